/* infinipot C API: open a GGUF model on an OpenCL device under a device-memory cap, read a
 * long document through the memory pot as it arrives, ask questions about it.
 *
 * C89-clean. Every function returns an infinipot_status; on failure infinipot_last_error()
 * gives the message (per thread, valid until the next call on that thread). No C++ exception
 * crosses this boundary and nothing here exits or aborts the host process.
 *
 *   infinipot_model_options mo;  infinipot_model* m;  infinipot_session* s;
 *   infinipot_model_options_init(&mo);  mo.device_mem = (size_t)256 << 20;
 *   if (infinipot_model_open("model.gguf", &mo, &m) != INFINIPOT_OK) puts(infinipot_last_error());
 *   infinipot_session_options so;  infinipot_session_options_init(&so);  so.pot = 1024;
 *   infinipot_session_create(m, &so, &s);
 *   infinipot_session_feed(s, piece, piece_len);      (as many times as the text arrives)
 *   infinipot_session_ask(s, "What is the pass key?", 32, on_piece, user_data);
 *   infinipot_session_free(s);  infinipot_model_free(m);
 */
#ifndef INFINIPOT_H
#define INFINIPOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define INFINIPOT_API_VERSION 1

typedef enum infinipot_status {
  INFINIPOT_OK = 0,
  INFINIPOT_ERR_INVALID_ARGUMENT = 1, /* a bad argument or option, or a call out of order */
  INFINIPOT_ERR_MODEL = 2,            /* the model file cannot be read or is not a supported GGUF */
  INFINIPOT_ERR_BUDGET = 3,           /* the device-memory cap cannot hold what was asked */
  INFINIPOT_ERR_DEVICE = 4,           /* OpenCL: no device, a build or a launch failed */
  INFINIPOT_ERR_IO = 5,               /* a file could not be read or written */
  INFINIPOT_ERR_INTERNAL = 6          /* anything else (a bug: please report it) */
} infinipot_status;

typedef struct infinipot_model infinipot_model;
typedef struct infinipot_session infinipot_session;

/* The message of the last failed call on this thread ("" if none). */
const char* infinipot_last_error(void);
/* A short name for a status ("INFINIPOT_ERR_BUDGET"). */
const char* infinipot_status_name(infinipot_status status);

typedef struct infinipot_model_options {
  const char* device;            /* OpenCL device index or name substring; NULL: first GPU, else CPU */
  size_t device_mem;             /* hard cap on device memory in bytes; 0: the device's memory */
  const char* kv_type;           /* "auto" (NULL), "f16" or "f32" */
} infinipot_model_options;

void infinipot_model_options_init(infinipot_model_options* options);
infinipot_status infinipot_model_open(const char* path, const infinipot_model_options* options,
                                      infinipot_model** out);
void infinipot_model_free(infinipot_model* model);

typedef struct infinipot_session_options {
  int pot;              /* KV entries of the memory pot; 0: no pot (the text is kept and read whole
                           by ask, into a full KV cache) */
  int keep;             /* entries after a distillation; 0: pot / 2 */
  const char* policy;   /* "infinipot" (NULL) or another pot policy (see `infinipot run --help`) */
  const char* catalyst; /* what the catalyst prompt asks while reading; NULL: the question of the
                           first ask when there is no pot, else a general summarise instruction */
  const char* system;   /* system prompt; NULL: the chat template's own */
  int reserve;          /* room kept for question + answer tokens (pot only); 0: 128 */
} infinipot_session_options;

void infinipot_session_options_init(infinipot_session_options* options);
/* A session holds its own KV store (the pot) on the model's device; one per model at a time. */
infinipot_status infinipot_session_create(infinipot_model* model, const infinipot_session_options* options,
                                          infinipot_session** out);
/* Feeds `len` bytes of the document (UTF-8; may end inside a word or a character: the rest
 * waits for the next piece). With a pot, complete words are read through it at once. */
infinipot_status infinipot_session_feed(infinipot_session* session, const char* text, size_t len);

/* Receives each piece of the answer (UTF-8, never a split character); return non-zero to stop. */
typedef int (*infinipot_piece_callback)(const char* piece, size_t len, void* user_data);
/* Ends the document and answers `question` with at most n_predict tokens (greedy). A session
 * answers one question; create a new one (or save/load a pot from the CLI) for the next. */
infinipot_status infinipot_session_ask(infinipot_session* session, const char* question, int n_predict,
                                       infinipot_piece_callback on_piece, void* user_data);

typedef struct infinipot_stats {
  int prompt_tokens;           /* chat prefix + document + question */
  int generated_tokens;
  int distillations;           /* the pot's CCD cycles */
  double ttft_s;               /* from ask() to the first answer token */
  double prefill_tok_s;
  double decode_tok_s;
  size_t peak_device_bytes;
  size_t kv_cache_bytes;       /* peak of the kv_cache category */
} infinipot_stats;

infinipot_status infinipot_session_stats(const infinipot_session* session, infinipot_stats* out);
void infinipot_session_free(infinipot_session* session);

#ifdef __cplusplus
}
#endif

#endif /* INFINIPOT_H */
