// Writes the tiny random-weight model (tests/kit/tiny_model.h) the C API test reads:
// write_tiny_model OUT.gguf
#include <cstdio>

#include "tests/kit/tiny_model.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_tiny_model OUT.gguf\n");
    return 2;
  }
  infinipot::TinyLlamaOptions o;
  o.n_ctx = 4096;
  infinipot::write_tiny_llama(argv[1], o);
  return 0;
}
