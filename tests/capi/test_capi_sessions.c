/* The C API's sessions from C (include/infinipot.h), on the tiny model: many asks on one read
 * document, conversations, forks, sessions taking turns on the device, snapshots saved and
 * loaded, sampling, the progress callback's cancel, and errors naming C fields. Each check
 * compares against a session that did the same work alone (greedy answers are deterministic),
 * so parking, forking and restoring must leave the pot exactly as it was.
 * Run by ctest as: test_capi_sessions TINY_MODEL.gguf DIR (a writable directory). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"
#include "infinipot.h"

typedef struct {
  char text[2048];
  size_t len;
} Answer;

static int collect(const char* piece, size_t len, void* user) {
  Answer* a = (Answer*)user;
  if (a->len + len < sizeof a->text) {
    memcpy(a->text + a->len, piece, len);
    a->len += len;
    a->text[a->len] = '\0';
  }
  return 0;
}

static const char* kDoc =
    "The lighthouse keeper wrote the number 4711 on the door. Ships came and went all winter. "
    "In spring the keeper painted the tower white and red, and counted 38 gulls on the rocks. "
    "The harbour master kept his logbook in the cellar, and the baker sold bread at dawn. ";
static const char* kQ1 = "What number is on the door?";
static const char* kQ2 = "How many gulls were there?";

static infinipot_session* make(infinipot_model* m, int pot) {
  infinipot_session_options so;
  infinipot_session* s = NULL;
  infinipot_session_options_init(&so);
  so.pot = pot;
  so.reserve = 64;
  CHECK(infinipot_session_create(m, &so, &s) == INFINIPOT_OK && s != NULL);
  return s;
}

/* Feeds the document `times` times, in 9-byte pieces from `from` to `to` (bytes of the whole). */
static void feed_range(infinipot_session* s, int times, size_t from, size_t to) {
  size_t n = strlen(kDoc), i, len;
  for (i = from; i < to; i += len) {
    size_t at = i % n;
    len = 9;
    if (at + len > n) len = n - at;
    if (i + len > to) len = to - i;
    CHECK(infinipot_session_feed(s, kDoc + at, len) == INFINIPOT_OK);
  }
  (void)times;
}

static Answer ask(infinipot_session* s, const char* q) {
  Answer a;
  memset(&a, 0, sizeof a);
  CHECK(infinipot_session_ask(s, q, 8, collect, &a) == INFINIPOT_OK);
  return a;
}

static Answer chat(infinipot_session* s, const char* q) {
  Answer a;
  memset(&a, 0, sizeof a);
  CHECK(infinipot_session_chat(s, q, 8, collect, &a) == INFINIPOT_OK);
  return a;
}

/* Whether two files hold the same bytes (pot snapshots: the whole state of two pots). */
static int same_file(const char* p, const char* q) {
  FILE *a = fopen(p, "rb"), *b = fopen(q, "rb");
  int same = a && b, ca, cb;
  while (same) {
    ca = fgetc(a);
    cb = fgetc(b);
    if (ca != cb) same = 0;
    if (ca == EOF || cb == EOF) break;
  }
  if (a) fclose(a);
  if (b) fclose(b);
  return same;
}

/* Saves s's document pot as DIR/NAME.pot and says whether it equals DIR/REF.pot (the same
 * pieces fed to one session alone). */
static int same_pot(infinipot_session* s, const char* dir, const char* name, const char* ref) {
  char p[4096], q[4096];
  snprintf(p, sizeof p, "%s/%s.pot", dir, name);
  snprintf(q, sizeof q, "%s/%s.pot", dir, ref);
  if (infinipot_session_save(s, p) != INFINIPOT_OK) return 0;
  return same_file(p, q);
}

typedef struct {
  int calls;
  int stop_at;
  long last_read;
} Progress;

static int on_progress(const infinipot_progress* p, void* user) {
  Progress* g = (Progress*)user;
  ++g->calls;
  if (p->tokens_read < g->last_read || p->tokens_read > p->tokens_total) return 1; /* never: checked below */
  g->last_read = p->tokens_read;
  return g->stop_at > 0 && g->calls >= g->stop_at;
}

int main(int argc, char** argv) {
  infinipot_model_options mo;
  infinipot_model *m = NULL, *small = NULL;
  infinipot_session *a, *b, *c, *f, *l;
  infinipot_session_options so;
  infinipot_sampling sp;
  infinipot_stats st, st2;
  Progress prog;
  Answer alone1, alone2, x, y, t1, t2;
  char path[4096], bad[4096];
  const size_t whole = 6 * strlen(kDoc), half = 3 * strlen(kDoc) + 4; /* half: inside a word */
  if (argc != 3) {
    fprintf(stderr, "usage: test_capi_sessions TINY_MODEL.gguf DIR\n");
    return 2;
  }
  infinipot_model_options_init(&mo);
  if (infinipot_model_open(argv[1], &mo, &m) != INFINIPOT_OK) {
    fprintf(stderr, "cannot open %s: %s\n", argv[1], infinipot_last_error());
    return 1;
  }

  /* One document, many questions: each ask answers from the document as read. */
  a = make(m, 160);
  feed_range(a, 6, 0, whole);
  alone1 = ask(a, kQ1);
  alone2 = ask(a, kQ2);
  x = ask(a, kQ1);
  CHECK(alone1.len > 0 && strcmp(alone1.text, x.text) == 0);
  CHECK(infinipot_session_stats(a, &st) == INFINIPOT_OK);
  CHECK(st.distillations > 1 && st.tokens_read > 160);
  CHECK(st.prompt_tokens > st.tokens_read); /* document + the question */
  CHECK_ERR(infinipot_session_feed(a, "more ", 5), INFINIPOT_ERR_INVALID_ARGUMENT, "ended");

  /* References: the same pieces as the forked and interleaved sessions below get, fed by one
   * session alone (how the text is cut into pieces may change a last bit of the pot's floats;
   * parking, forking and restoring must change nothing). */
  b = make(m, 160);
  feed_range(b, 6, 0, half);
  feed_range(b, 6, half, whole);
  snprintf(path, sizeof path, "%s/alone.pot", argv[2]);
  CHECK(infinipot_session_save(b, path) == INFINIPOT_OK);
  infinipot_session_free(b);
  b = make(m, 160);
  feed_range(b, 6, 0, 100);
  feed_range(b, 6, 100, whole);
  snprintf(path, sizeof path, "%s/alone100.pot", argv[2]);
  CHECK(infinipot_session_save(b, path) == INFINIPOT_OK);
  infinipot_session_free(b);

  /* Fork mid-feed (inside a word): both go on as one session alone would. */
  b = make(m, 160);
  feed_range(b, 6, 0, half);
  CHECK(infinipot_session_fork(b, &f) == INFINIPOT_OK && f != NULL);
  feed_range(f, 6, half, whole);
  feed_range(b, 6, half, whole);
  x = ask(b, kQ1);
  y = ask(f, kQ1);
  CHECK(strcmp(x.text, alone1.text) == 0);
  CHECK(strcmp(y.text, alone1.text) == 0);
  CHECK(same_pot(b, argv[2], "forked_from", "alone"));
  CHECK(same_pot(f, argv[2], "fork", "alone"));
  CHECK(infinipot_session_stats(b, &st2) == INFINIPOT_OK && st2.distillations == st.distillations);
  infinipot_session_free(f);

  /* Two sessions fed in turns (each parked mid-read while the other reads): each ends as alone. */
  c = make(m, 160);
  infinipot_session_free(b);
  b = make(m, 160);
  feed_range(b, 6, 0, half);
  feed_range(c, 6, 0, 100);
  feed_range(b, 6, half, whole);
  feed_range(c, 6, 100, whole);
  x = ask(c, kQ2);
  y = ask(b, kQ1);
  CHECK(strcmp(x.text, alone2.text) == 0);
  CHECK(strcmp(y.text, alone1.text) == 0);
  CHECK(same_pot(b, argv[2], "turns_b", "alone"));
  CHECK(same_pot(c, argv[2], "turns_c", "alone100"));

  /* A conversation after the document; its fork goes on independently; and an ask between
   * turns does not disturb it. The first turn is the document's first question. */
  t1 = chat(b, kQ1);
  CHECK(strcmp(t1.text, alone1.text) == 0);
  CHECK(infinipot_session_fork(b, &f) == INFINIPOT_OK);
  x = ask(b, kQ2);
  CHECK(strcmp(x.text, alone2.text) == 0);
  t2 = chat(b, kQ2);
  y = chat(f, kQ2);
  CHECK(t2.len > 0 && strcmp(t2.text, y.text) == 0);
  CHECK(infinipot_session_stats(b, &st) == INFINIPOT_OK && st.turns == 2);
  infinipot_session_free(f);
  infinipot_session_free(b);
  b = NULL;
  /* Many turns through a 160-entry pot: it distills between messages and keeps answering. */
  {
    int i;
    CHECK(infinipot_session_stats(c, &st2) == INFINIPOT_OK);
    for (i = 0; i < 12; ++i) (void)chat(c, "Tell me one more thing about the keeper and the harbour.");
    CHECK(infinipot_session_stats(c, &st) == INFINIPOT_OK);
    CHECK(st.turns == 12 && st.distillations > st2.distillations);
    CHECK(st.tokens_read > st2.tokens_read + 160); /* more than the pot holds, read in its fixed memory */
  }
  CHECK_ERR(infinipot_session_chat(c, "Hi", 400, collect, &x), INFINIPOT_ERR_INVALID_ARGUMENT, "n_predict");
  (void)chat(c, "And now?"); /* the refusal left the conversation as it was */
  infinipot_session_free(c);

  /* Snapshots: save the read document, load it, ask: the same answer. */
  snprintf(path, sizeof path, "%s/capi_doc.pot", argv[2]);
  CHECK(infinipot_session_save(a, path) == INFINIPOT_OK);
  CHECK(infinipot_session_load(m, path, NULL, &l) == INFINIPOT_OK && l != NULL);
  x = ask(l, kQ1);
  CHECK(strcmp(x.text, alone1.text) == 0);
  t1 = chat(l, kQ1);
  CHECK(strcmp(t1.text, alone1.text) == 0);
  infinipot_session_free(l);
  infinipot_session_options_init(&so);
  so.system = "You are a pirate.";
  CHECK_ERR(infinipot_session_load(m, path, &so, &l), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_session_options.system");
  CHECK_ERR(infinipot_session_load(m, "/nonexistent/x.pot", NULL, &l), INFINIPOT_ERR_IO, "x.pot");
  CHECK(l == NULL);
  snprintf(bad, sizeof bad, "%s/capi_bad.pot", argv[2]);
  {
    FILE* out = fopen(bad, "wb");
    CHECK(out != NULL);
    if (out) {
      fputs("IPOTSNAP not really", out);
      fclose(out);
    }
  }
  CHECK_ERR(infinipot_session_load(m, bad, NULL, &l), INFINIPOT_ERR_IO, "capi_bad.pot");
  CHECK_ERR(infinipot_session_save(a, "/nonexistent/dir/x.pot"), INFINIPOT_ERR_IO, "x.pot");
  remove(bad);
  remove(path);

  /* Sampling: checked fields; the same seed gives the same answer. */
  infinipot_sampling_init(&sp);
  sp.top_p = 0;
  CHECK_ERR(infinipot_session_set_sampling(a, &sp), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_sampling.top_p");
  CHECK_SETTING("infinipot_sampling.top_p");
  infinipot_sampling_init(&sp);
  sp.temperature = -1;
  CHECK_ERR(infinipot_session_set_sampling(a, &sp), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_sampling.temperature");
  CHECK_SETTING("infinipot_sampling.temperature");
  infinipot_sampling_init(&sp);
  sp.temperature = 1.5f;
  sp.top_k = 50;
  sp.seed = 7;
  CHECK(infinipot_session_set_sampling(a, &sp) == INFINIPOT_OK);
  x = ask(a, kQ1);
  y = ask(a, kQ1);
  CHECK(x.len > 0 && strcmp(x.text, y.text) == 0);

  /* Progress: reported during feed, in order; a non-zero return cancels, the session goes on. */
  {
    infinipot_model_options o2;
    infinipot_session* p = NULL;
    infinipot_model_options_init(&o2);
    o2.chunk = 16;
    CHECK(infinipot_model_open(argv[1], &o2, &small) == INFINIPOT_OK);
    p = make(small, 160);
    memset(&prog, 0, sizeof prog);
    CHECK(infinipot_session_set_progress(p, on_progress, &prog) == INFINIPOT_OK);
    CHECK(infinipot_session_feed(p, kDoc, strlen(kDoc)) == INFINIPOT_OK);
    CHECK(prog.calls >= 2); /* a chunk of 16 tokens: several reports for one piece */
    prog.stop_at = prog.calls + 1;
    CHECK_ERR(infinipot_session_feed(p, kDoc, strlen(kDoc)), INFINIPOT_CANCELLED, "tokens_read");
    CHECK(infinipot_session_stats(p, &st) == INFINIPOT_OK);
    CHECK(st.tokens_read == prog.last_read);
    prog.stop_at = 0;
    x = ask(p, kQ1); /* still usable */
    CHECK(x.len > 0);
    /* The model freed with a session left: freed with that session, which stays usable. */
    infinipot_model_free(small);
    y = ask(p, kQ2);
    CHECK(y.len > 0);
    infinipot_session_free(p);
  }

  /* Errors name C fields, never CLI flags. */
  infinipot_session_options_init(&so);
  so.pot = 4;
  CHECK_ERR(infinipot_session_create(m, &so, &f), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_session_options.pot");
  so.pot = 160;
  so.keep = 150;
  CHECK_ERR(infinipot_session_create(m, &so, &f), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_session_options.keep");
  infinipot_session_options_init(&so);
  so.pot = 160;
  so.policy = "snapkv";
  CHECK_ERR(infinipot_session_create(m, &so, &f), INFINIPOT_ERR_INVALID_ARGUMENT, "snapkv");
  infinipot_model_options_init(&mo);
  mo.device_mem = 4096;
  CHECK(infinipot_model_open(argv[1], &mo, &small) == INFINIPOT_OK);
  so.policy = NULL;
  so.reserve = 64;
  CHECK_ERR(infinipot_session_create(small, &so, &f), INFINIPOT_ERR_BUDGET, "infinipot_model_options.device_mem");
  infinipot_model_free(small);
  f = make(m, 0);
  CHECK_ERR(infinipot_session_chat(f, "Hi", 8, collect, &x), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_session_options.pot");
  CHECK_ERR(infinipot_session_fork(f, &l), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_session_options.pot");
  CHECK(infinipot_session_feed(f, kDoc, strlen(kDoc)) == INFINIPOT_OK);
  x = ask(f, kQ1); /* without a pot: every ask reads the text whole */
  y = ask(f, kQ1);
  CHECK(x.len > 0 && strcmp(x.text, y.text) == 0);
  infinipot_session_free(f);
  CHECK_ERR(infinipot_session_ask(a, "", 8, collect, &x), INFINIPOT_ERR_INVALID_ARGUMENT, "question");
  CHECK_ERR(infinipot_session_chat(a, "caf\xff", 8, collect, &x), INFINIPOT_ERR_INVALID_ARGUMENT, "UTF-8");
  CHECK_ERR(infinipot_session_fork(a, NULL), INFINIPOT_ERR_INVALID_ARGUMENT, "out");
  CHECK(strcmp(infinipot_status_name(INFINIPOT_CANCELLED), "INFINIPOT_CANCELLED") == 0);

  infinipot_session_free(a);
  infinipot_model_free(m);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("test_capi_sessions: every check passed\n");
  return failures ? 1 : 0;
}
