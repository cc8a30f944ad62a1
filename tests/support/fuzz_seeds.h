// The GGUF fuzz seed corpus (tests/fuzz/corpus/gguf/*.gguf.seed; not named .gguf so no one
// mistakes them for models): small valid files that reach every
// part of the loader, each under 20 KB so libFuzzer mutates them quickly. test_fuzz_seeds
// checks the committed files and rewrites them when INFINIPOT_REGEN_FUZZ_CORPUS=1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace infinipot::test {

struct FuzzSeed {
  std::string name;            // file name in the corpus directory
  std::vector<uint8_t> bytes;
  bool is_model;               // read_llama_config + map_weights must accept it
};

std::vector<FuzzSeed> gguf_fuzz_seeds();

}  // namespace infinipot::test
