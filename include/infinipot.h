/* infinipot C API: open a GGUF model on an OpenCL device under a device-memory cap, read a
 * long document through the memory pot as it arrives, ask it many questions, hold
 * conversations of any length in the pot's fixed memory, fork, save and load pots.
 *
 * C89-clean. Every function returns an infinipot_status; on failure infinipot_last_error()
 * gives the message (per thread, valid until the next call on that thread), naming the C
 * field or argument to change. No C++ exception crosses this boundary and nothing here exits
 * or aborts the host process. Handles are not thread-safe: use a model and its sessions from
 * one thread at a time.
 *
 *   infinipot_model_options mo;  infinipot_model* m;  infinipot_session* s;
 *   infinipot_model_options_init(&mo);  mo.device_mem = (size_t)256 << 20;
 *   if (infinipot_model_open("model.gguf", &mo, &m) != INFINIPOT_OK) puts(infinipot_last_error());
 *   infinipot_session_options so;  infinipot_session_options_init(&so);  so.pot = 1024;
 *   infinipot_session_create(m, &so, &s);
 *   infinipot_session_feed(s, piece, piece_len);      (as many times as the text arrives)
 *   infinipot_session_ask(s, "What is the pass key?", 32, on_piece, user_data);  (as often as you like)
 *   infinipot_session_chat(s, "And who wrote it?", 64, on_piece, user_data);     (a conversation)
 *   infinipot_session_free(s);  infinipot_model_free(m);
 *
 * Sessions of one model share its device: any number may exist; the one working holds the
 * device's pot and the others wait in host memory as pot snapshots (a switch copies the pot's
 * K/V to or from the host, infinipot_stats.kv_cache_bytes at most).
 */
#ifndef INFINIPOT_H
#define INFINIPOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: several questions and conversations per session, fork, save/load, sampling, progress;
 * infinipot_model_options and infinipot_stats grew (rebuild against this header). */
#define INFINIPOT_API_VERSION 2

typedef enum infinipot_status {
  INFINIPOT_OK = 0,
  INFINIPOT_ERR_INVALID_ARGUMENT = 1, /* a bad argument or option, or a call out of order */
  INFINIPOT_ERR_MODEL = 2,            /* the model file cannot be read or is not a supported GGUF */
  INFINIPOT_ERR_BUDGET = 3,           /* the device-memory cap cannot hold what was asked */
  INFINIPOT_ERR_DEVICE = 4,           /* OpenCL: no device, a build or a launch failed */
  INFINIPOT_ERR_IO = 5,               /* a file could not be read or written */
  INFINIPOT_ERR_INTERNAL = 6,         /* anything else (a bug: please report it) */
  INFINIPOT_CANCELLED = 7             /* the progress callback asked to stop (see there) */
} infinipot_status;

typedef struct infinipot_model infinipot_model;
typedef struct infinipot_session infinipot_session;

/* The message of the last failed call on this thread ("" if none). */
const char* infinipot_last_error(void);
/* The option the last failed call on this thread refused, as its field is spelled here
 * ("infinipot_session_options.pot", "infinipot_model_options.device_mem", "n_predict"),
 * or "" when the failure is not about one option (a damaged file, a device error). */
const char* infinipot_last_error_setting(void);
/* A short name for a status ("INFINIPOT_ERR_BUDGET"). */
const char* infinipot_status_name(infinipot_status status);

typedef struct infinipot_model_options {
  const char* device;            /* OpenCL device index or name substring; NULL: first GPU, else CPU */
  size_t device_mem;             /* hard cap on device memory in bytes; 0: the device's memory */
  const char* kv_type;           /* "auto" (NULL), "f16" or "f32" */
  int chunk;                     /* prefill chunk in tokens; 0: the device's tuning (platforms/) */
} infinipot_model_options;

void infinipot_model_options_init(infinipot_model_options* options);
infinipot_status infinipot_model_open(const char* path, const infinipot_model_options* options,
                                      infinipot_model** out);
/* Frees the model: at once, or with its last session when sessions are left (they stay usable;
 * no new session can be made on it). */
void infinipot_model_free(infinipot_model* model);

typedef struct infinipot_session_options {
  int pot;              /* KV entries of the memory pot; 0: no pot (the text is kept and read whole
                           by each ask, into a full KV cache; chat needs a pot) */
  int keep;             /* entries after a distillation; 0: pot / 2 */
  const char* policy;   /* "infinipot" (NULL) or another pot policy that reads a stream (see
                           `infinipot policies`) */
  const char* catalyst; /* what the catalyst prompt asks while reading; NULL: a general summarise
                           instruction (a question's own words take over when it is asked) */
  const char* system;   /* system prompt; NULL: the chat template's own */
  int reserve;          /* room kept while reading for the question, template and answer (pot
                           only); 0: 128 */
} infinipot_session_options;

void infinipot_session_options_init(infinipot_session_options* options);
/* A new session: with a pot, its device-memory plan (weights, pot, scoring) is checked against
 * the model's cap here (INFINIPOT_ERR_BUDGET naming the minimum). */
infinipot_status infinipot_session_create(infinipot_model* model, const infinipot_session_options* options,
                                          infinipot_session** out);
/* Feeds `len` bytes of the document (UTF-8; may end inside a word or a character: the rest
 * waits for the next piece). With a pot, complete words are read through it at once. The
 * document ends at the session's first ask, chat, save or fork-after-ask: feeding after that
 * is refused (fork the session before, to ask on a document that will grow). */
infinipot_status infinipot_session_feed(infinipot_session* session, const char* text, size_t len);

/* Receives each piece of the answer (UTF-8, never a split character); return non-zero to stop
 * the answer there (the call still returns INFINIPOT_OK with what was answered). */
typedef int (*infinipot_piece_callback)(const char* piece, size_t len, void* user_data);
/* Answers `question` about the document with at most n_predict tokens. Every ask answers from
 * the document as read, never from an earlier ask: ask as many as you like, each pays only its
 * own tokens. Without a feed, it answers the question alone. */
infinipot_status infinipot_session_ask(infinipot_session* session, const char* question, int n_predict,
                                       infinipot_piece_callback on_piece, void* user_data);
/* One turn of a conversation (a pot is needed): reads `message` as the user's turn after the
 * turns before it (after the document, when one was fed) and answers it; the answer stays in
 * the conversation. When the pot fills it distills between messages, with the newest message
 * as the catalyst, so a conversation of any length runs in the pot's fixed memory. */
infinipot_status infinipot_session_chat(infinipot_session* session, const char* message, int n_predict,
                                        infinipot_piece_callback on_piece, void* user_data);

typedef struct infinipot_sampling {
  float temperature;        /* 0 (the default): greedy */
  float top_p;              /* in (0, 1]; 1 (the default): no nucleus filter */
  int top_k;                /* 0 (the default): no top-k filter */
  unsigned long seed;       /* the random stream when temperature > 0 (the default 0) */
} infinipot_sampling;

void infinipot_sampling_init(infinipot_sampling* sampling);
/* How the session's asks and chats pick tokens from now on (greedy until set). */
infinipot_status infinipot_session_set_sampling(infinipot_session* session, const infinipot_sampling* sampling);

typedef struct infinipot_progress {
  long tokens_read;        /* tokens of the session's stream in the pot so far (chat prefix and
                              document; without a pot, of the prompt evaluated so far) */
  long tokens_total;       /* of this call's tokens plus those before it; the goal of tokens_read */
  int distillations;       /* the pot's CCD cycles so far */
  double elapsed_s;        /* since this call began */
} infinipot_progress;
/* Called after each chunk a feed reads (and without a pot, each chunk an ask evaluates);
 * return non-zero to stop: the call returns INFINIPOT_CANCELLED. A cancelled feed keeps what
 * it read (infinipot_stats.tokens_read says how much) and drops the rest of its piece; the
 * session goes on (feed more, ask, or free it). A cancelled ask without a pot answers nothing. */
typedef int (*infinipot_progress_callback)(const infinipot_progress* progress, void* user_data);
infinipot_status infinipot_session_set_progress(infinipot_session* session, infinipot_progress_callback callback,
                                                void* user_data);

/* A second session that goes on from this one's state (the document as read, the
 * conversation so far, the settings, sampling and progress callback), independently: read a
 * document once, then fork one conversation per user. With a pot only. */
infinipot_status infinipot_session_fork(infinipot_session* session, infinipot_session** out);

/* Writes the document's pot (a pot snapshot, the format `infinipot run --save-pot` writes and
 * `--load-pot` reads) to `path`: ends the document as ask does. The conversation is not saved. */
infinipot_status infinipot_session_save(infinipot_session* session, const char* path);
/* A session whose document is the pot snapshot at `path` (written by infinipot_session_save or
 * `infinipot run --save-pot`) for this model; the pot's settings come from the file (options'
 * pot, keep, policy and reserve are ignored; system must be the one it was saved with). */
infinipot_status infinipot_session_load(infinipot_model* model, const char* path,
                                        const infinipot_session_options* options, infinipot_session** out);

typedef struct infinipot_stats {
  int prompt_tokens;           /* of the last ask or chat: chat prefix + document (+ turns) + question */
  int generated_tokens;        /* of the last ask or chat */
  int distillations;           /* the pot's CCD cycles in this session's stream */
  double ttft_s;               /* from the last ask or chat to its first answer token */
  double prefill_tok_s;
  double decode_tok_s;
  size_t peak_device_bytes;
  size_t kv_cache_bytes;       /* peak of the kv_cache category */
  long tokens_read;            /* tokens fed and read so far (chat prefix + document) */
  int turns;                   /* chat turns answered */
} infinipot_stats;

infinipot_status infinipot_session_stats(const infinipot_session* session, infinipot_stats* out);
void infinipot_session_free(infinipot_session* session);

#ifdef __cplusplus
}
#endif

#endif /* INFINIPOT_H */
