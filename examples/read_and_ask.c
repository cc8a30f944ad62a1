/* read_and_ask: reads a text file through infinipot's memory pot in 4 KiB pieces, as if it
 * were arriving over a network, then asks one question about it and prints the answer and
 * the figures. Plain C89 against the installed C API.
 *
 *   read_and_ask MODEL.gguf DOCUMENT.txt "QUESTION" [POT_ENTRIES [DEVICE_MEM_MIB]]
 */
#include <stdio.h>
#include <stdlib.h>

#include <infinipot.h>

static int print_piece(const char* piece, size_t len, void* user_data) {
  (void)user_data;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return 0; /* non-zero would stop the answer here */
}

static int fail(const char* what, infinipot_status st) {
  fprintf(stderr, "read_and_ask: %s failed (%s): %s\n", what, infinipot_status_name(st), infinipot_last_error());
  return 1;
}

int main(int argc, char** argv) {
  infinipot_model_options mo;
  infinipot_session_options so;
  infinipot_model* model = NULL;
  infinipot_session* session = NULL;
  infinipot_stats stats;
  infinipot_status st;
  char buf[4096];
  size_t n;
  FILE* f;
  int rc = 1;

  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL.gguf DOCUMENT.txt \"QUESTION\" [POT_ENTRIES [DEVICE_MEM_MIB]]\n", argv[0]);
    return 2;
  }
  infinipot_model_options_init(&mo);
  if (argc > 5) mo.device_mem = (size_t)atoi(argv[5]) << 20;
  st = infinipot_model_open(argv[1], &mo, &model);
  if (st != INFINIPOT_OK) return fail("opening the model", st);

  infinipot_session_options_init(&so);
  so.pot = argc > 4 ? atoi(argv[4]) : 1024;
  so.catalyst = argv[3]; /* the question is known in advance: let the pot keep what it needs */
  st = infinipot_session_create(model, &so, &session);
  if (st != INFINIPOT_OK) {
    fail("creating the session", st);
    goto done;
  }
  f = fopen(argv[2], "rb");
  if (!f) {
    fprintf(stderr, "read_and_ask: cannot open %s\n", argv[2]);
    goto done;
  }
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    st = infinipot_session_feed(session, buf, n);
    if (st != INFINIPOT_OK) {
      fclose(f);
      fail("feeding the document", st);
      goto done;
    }
  }
  fclose(f);
  st = infinipot_session_ask(session, argv[3], 64, print_piece, NULL);
  if (st != INFINIPOT_OK) {
    fail("asking", st);
    goto done;
  }
  infinipot_session_stats(session, &stats);
  fprintf(stderr, "\n--- %d prompt tokens, %d generated, %d distillations; TTFT %.2f s, prefill %.1f tok/s, "
                  "decode %.1f tok/s; peak device memory %lu bytes (KV %lu)\n",
          stats.prompt_tokens, stats.generated_tokens, stats.distillations, stats.ttft_s, stats.prefill_tok_s,
          stats.decode_tok_s, (unsigned long)stats.peak_device_bytes, (unsigned long)stats.kv_cache_bytes);
  rc = 0;
done:
  infinipot_session_free(session);
  infinipot_model_free(model);
  return rc;
}
