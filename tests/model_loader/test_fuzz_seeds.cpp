// The committed GGUF fuzz seeds (tests/fuzz/corpus/gguf/) exist, are small and load. Run
// with INFINIPOT_REGEN_FUZZ_CORPUS=1 to rewrite them from tests/support/fuzz_seeds.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "model_loader/gguf.h"
#include "model_loader/inspect.h"
#include "model_loader/model_config.h"
#include "tests/support/fuzz_seeds.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

constexpr size_t kMaxSeedBytes = 20 * 1024;

// $INFINIPOT_SOURCE_DIR, else the checkout this file was compiled from (ctest does not
// always pass the variable through).
std::string corpus_dir() {
  const char* src = std::getenv("INFINIPOT_SOURCE_DIR");
  std::string root = src != nullptr && *src != '\0'
                         ? std::string(src)
                         : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  return root + "/tests/fuzz/corpus/gguf";
}

TEST(GgufFuzzSeeds, CommittedSeedsExistAreSmallAndLoad) {
  const bool regen = std::getenv("INFINIPOT_REGEN_FUZZ_CORPUS") != nullptr;
  if (regen) std::filesystem::create_directories(corpus_dir());
  for (const test::FuzzSeed& seed : test::gguf_fuzz_seeds()) {
    SCOPED_TRACE(seed.name);
    EXPECT_LT(seed.bytes.size(), kMaxSeedBytes);
    const std::string path = corpus_dir() + "/" + seed.name;
    if (regen) test::write_file(path, seed.bytes);
    ASSERT_TRUE(std::filesystem::exists(path))
        << path << " is missing: run test_fuzz_seeds with INFINIPOT_REGEN_FUZZ_CORPUS=1";
    const std::vector<uint8_t> bytes = test::read_file(path);
    EXPECT_LT(bytes.size(), kMaxSeedBytes);
    gguf::GgufFile f = gguf::GgufFile::from_memory(bytes.data(), bytes.size(), seed.name);
    EXPECT_NO_THROW(inspect_json(f).dump());
    if (seed.is_model) {
      EXPECT_NO_THROW(map_weights(f, read_llama_config(f)));
    }
  }
}

}  // namespace
}  // namespace infinipot
