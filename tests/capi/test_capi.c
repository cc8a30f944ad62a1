/* The C API (include/infinipot.h) from C: a full question on the tiny model, streamed in
 * pieces and whole (same answer), with and without a pot, and every error path returning its
 * code with a message. Run by ctest as: test_capi TINY_MODEL.gguf (write_tiny_model makes it).
 * Exits 0 when every check passes; prints each failure. */
#define _POSIX_C_SOURCE 200809L /* truncate() */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capi_check.h"
#include "infinipot.h"

typedef struct {
  char text[4096];
  size_t len;
  int pieces;
  int stop_after;
} Collected;

static int collect(const char* piece, size_t len, void* user) {
  Collected* c = (Collected*)user;
  if (c->len + len < sizeof c->text) {
    memcpy(c->text + c->len, piece, len);
    c->len += len;
    c->text[c->len] = '\0';
  }
  ++c->pieces;
  return c->stop_after > 0 && c->pieces >= c->stop_after;
}

static const char* kDoc =
    "The lighthouse keeper wrote the number 4711 on the door. Ships came and went all winter. "
    "In spring the keeper painted the tower white and red, and counted 38 gulls on the rocks. "
    "The harbour master kept his logbook in the cellar, and the baker sold bread at dawn. "
    "Every evening the lamp was lit at seven and put out at five. The road to the village "
    "followed the cliff for two miles, past the old mill and the chapel with the blue door. ";

/* Feeds the document `times` times in pieces of `piece` bytes (0: whole), asks, returns the answer. */
static infinipot_status ask_about(infinipot_model* m, int pot, size_t piece, int times, Collected* out,
                                  infinipot_stats* stats) {
  infinipot_session_options so;
  infinipot_session* s = NULL;
  infinipot_status st;
  size_t n = strlen(kDoc), i;
  int t;
  infinipot_session_options_init(&so);
  so.pot = pot;
  so.reserve = 64;
  st = infinipot_session_create(m, &so, &s);
  if (st != INFINIPOT_OK) return st;
  for (t = 0; t < times; ++t)
    for (i = 0; i < n; i += piece ? piece : n) {
      size_t len = piece && i + piece < n ? piece : n - i;
      st = infinipot_session_feed(s, kDoc + i, len);
      if (st != INFINIPOT_OK) {
        infinipot_session_free(s);
        return st;
      }
    }
  st = infinipot_session_ask(s, "What number is on the door?", 8, collect, out);
  if (st == INFINIPOT_OK && stats) infinipot_session_stats(s, stats);
  infinipot_session_free(s);
  return st;
}

/* Copies a file; 0 on success. */
static int copy_file(const char* from, const char* to) {
  char buf[65536];
  size_t n;
  FILE* in = fopen(from, "rb");
  FILE* out = in ? fopen(to, "wb") : NULL;
  if (!in || !out) {
    if (in) fclose(in);
    return 1;
  }
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
  fclose(in);
  return fclose(out) != 0;
}

/* A library must not kill its host: the model file truncated while a model handle holds it
 * (mapped) is an error code when the weights are read, not SIGBUS. */
static void truncated_model_is_an_error(const char* model_path) {
  char copy[4096];
  infinipot_model* m = NULL;
  infinipot_session* s = NULL;
  infinipot_session_options so;
  Collected c;
  memset(&c, 0, sizeof c);
  snprintf(copy, sizeof copy, "%s.truncated.gguf", model_path);
  CHECK(copy_file(model_path, copy) == 0);
  CHECK(infinipot_model_open(copy, NULL, &m) == INFINIPOT_OK);
  if (!m) return;
  CHECK(truncate(copy, 4096) == 0);
  infinipot_session_options_init(&so);
  so.pot = 160;
  so.reserve = 64;
  CHECK_ERR(infinipot_session_create(m, &so, &s), INFINIPOT_ERR_MODEL, "truncated");
  CHECK(s == NULL);
  so.pot = 0; /* no pot: the weights are read when the question is asked */
  CHECK(infinipot_session_create(m, &so, &s) == INFINIPOT_OK);
  CHECK(infinipot_session_feed(s, kDoc, strlen(kDoc)) == INFINIPOT_OK);
  CHECK_ERR(infinipot_session_ask(s, "What number?", 4, collect, &c), INFINIPOT_ERR_MODEL, "truncated");
  infinipot_session_free(s);
  infinipot_model_free(m);
  remove(copy);
}

int main(int argc, char** argv) {
  infinipot_model_options mo;
  infinipot_session_options so;
  infinipot_model *m = NULL, *small = NULL;
  infinipot_session *s = NULL, *s2 = NULL;
  infinipot_stats st_piece, st_whole, st_full;
  Collected whole, pieces, full, stopped, junk;
  if (argc != 2) {
    fprintf(stderr, "usage: test_capi TINY_MODEL.gguf\n");
    return 2;
  }
  memset(&whole, 0, sizeof whole);
  memset(&pieces, 0, sizeof pieces);
  memset(&full, 0, sizeof full);
  memset(&stopped, 0, sizeof stopped);
  memset(&junk, 0, sizeof junk);

  /* Opening: bad arguments and bad files. */
  infinipot_model_options_init(&mo);
  CHECK_ERR(infinipot_model_open(NULL, &mo, &m), INFINIPOT_ERR_INVALID_ARGUMENT, "path");
  CHECK_SETTING(""); /* an argument, not an option */
  CHECK_ERR(infinipot_model_open(argv[1], &mo, NULL), INFINIPOT_ERR_INVALID_ARGUMENT, "out");
  CHECK_ERR(infinipot_model_open("/nonexistent/model.gguf", &mo, &m), INFINIPOT_ERR_MODEL, "model.gguf");
  CHECK(m == NULL);
  CHECK_ERR(infinipot_model_open("/etc/hostname", &mo, &m), INFINIPOT_ERR_MODEL, "hostname");
  CHECK_SETTING("");
  mo.kv_type = "f64";
  CHECK_ERR(infinipot_model_open(argv[1], &mo, &m), INFINIPOT_ERR_INVALID_ARGUMENT, "f64");
  CHECK_SETTING("infinipot_model_options.kv_type");
  infinipot_model_options_init(&mo);
  CHECK(infinipot_model_open(argv[1], &mo, &m) == INFINIPOT_OK && m != NULL);
  if (!m) return 1;

  /* Sessions: bad options, the budget, several sessions on one model. */
  infinipot_session_options_init(&so);
  so.reserve = 64; /* question + answer: 160-entry pots keep 80 after a distillation */
  so.pot = -1;
  CHECK_ERR(infinipot_session_create(m, &so, &s), INFINIPOT_ERR_INVALID_ARGUMENT, "pot");
  CHECK_SETTING("infinipot_session_options.pot");
  so.pot = 160;
  so.policy = "nosuch";
  CHECK_ERR(infinipot_session_create(m, &so, &s), INFINIPOT_ERR_INVALID_ARGUMENT, "nosuch");
  CHECK_SETTING("infinipot_session_options.policy");
  so.policy = "full";
  CHECK_ERR(infinipot_session_create(m, &so, &s), INFINIPOT_ERR_INVALID_ARGUMENT, "full");
  CHECK_SETTING("infinipot_session_options.policy");
  so.policy = NULL;
  so.pot = 4;
  CHECK_ERR(infinipot_session_create(m, &so, &s), INFINIPOT_ERR_INVALID_ARGUMENT, "infinipot_session_options.pot");
  CHECK_SETTING("infinipot_session_options.pot"); /* from the pot's own check (MemoryPot::resolve) */
  CHECK(s == NULL);
  mo.device_mem = 4096;
  CHECK(infinipot_model_open(argv[1], &mo, &small) == INFINIPOT_OK);
  so.pot = 160;
  CHECK_ERR(infinipot_session_create(small, &so, &s), INFINIPOT_ERR_BUDGET, "budget");
  CHECK_SETTING("infinipot_model_options.device_mem");
  infinipot_model_free(small);
  CHECK(infinipot_session_create(m, &so, &s) == INFINIPOT_OK && s != NULL);
  CHECK(infinipot_session_create(m, &so, &s2) == INFINIPOT_OK && s2 != NULL); /* sessions take turns on the device */
  infinipot_session_free(s2);

  /* Feeding and asking: bad arguments, bad text, order. */
  CHECK_ERR(infinipot_session_feed(s, NULL, 5), INFINIPOT_ERR_INVALID_ARGUMENT, "NULL");
  CHECK_ERR(infinipot_session_feed(s, "caf\xff ok ", 8), INFINIPOT_ERR_INVALID_ARGUMENT, "UTF-8");
  CHECK(infinipot_session_feed(s, kDoc, strlen(kDoc)) == INFINIPOT_OK);
  CHECK_ERR(infinipot_session_ask(s, NULL, 8, collect, &junk), INFINIPOT_ERR_INVALID_ARGUMENT, "question");
  CHECK_ERR(infinipot_session_ask(s, "Which?", 0, collect, &junk), INFINIPOT_ERR_INVALID_ARGUMENT, "n_predict");
  CHECK_SETTING("n_predict");
  junk.stop_after = 1;
  CHECK(infinipot_session_ask(s, "Which number?", 8, collect, &junk) == INFINIPOT_OK);
  CHECK_SETTING(""); /* a call that succeeds clears it */
  CHECK(junk.pieces == 1); /* the callback's non-zero return stopped the answer */
  CHECK(infinipot_session_ask(s, "Again?", 8, collect, &junk) == INFINIPOT_OK); /* many asks per document */
  CHECK_ERR(infinipot_session_feed(s, "more ", 5), INFINIPOT_ERR_INVALID_ARGUMENT, "ended");
  CHECK_ERR(infinipot_session_stats(s, NULL), INFINIPOT_ERR_INVALID_ARGUMENT, "NULL");
  infinipot_session_free(s);
  s = NULL;

  /* A full question through the pot: the document 6 times (several distillations), whole and
   * in 7-byte pieces (cut inside words and characters), gives the same answer. */
  CHECK(ask_about(m, 160, 0, 6, &whole, &st_whole) == INFINIPOT_OK);
  CHECK(ask_about(m, 160, 7, 6, &pieces, &st_piece) == INFINIPOT_OK);
  CHECK(whole.len > 0);
  CHECK(strcmp(whole.text, pieces.text) == 0);
  CHECK(st_whole.prompt_tokens == st_piece.prompt_tokens);
  CHECK(st_whole.distillations > 1);
  CHECK(st_whole.distillations == st_piece.distillations);
  CHECK(st_whole.generated_tokens >= 1 && st_whole.generated_tokens <= 8);
  CHECK(st_whole.peak_device_bytes > 0 && st_whole.kv_cache_bytes > 0);
  CHECK(st_whole.ttft_s > 0 && st_whole.prefill_tok_s > 0);

  /* Without a pot: the text is kept and read whole into a full cache. */
  CHECK(ask_about(m, 0, 11, 2, &full, &st_full) == INFINIPOT_OK);
  CHECK(st_full.distillations == 0);
  CHECK(st_full.kv_cache_bytes > 0);
  CHECK(full.len > 0);

  CHECK(strcmp(infinipot_status_name(INFINIPOT_ERR_BUDGET), "INFINIPOT_ERR_BUDGET") == 0);
  truncated_model_is_an_error(argv[1]);
  infinipot_session_free(NULL);
  infinipot_model_free(m);
  infinipot_model_free(NULL);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("test_capi: every check passed (answer through the pot: \"%s\")\n", whole.text);
  return failures ? 1 : 0;
}
