// The compiled-kernel cache ($XDG_CACHE_HOME/infinipot/kernels): a cold start writes one
// binary per kernel file, a warm start reads them and answers the same, and corrupt entries
// (truncated or garbage) are detected by their checksum before the driver sees them (PoCL
// crashes on a garbled binary), rebuilt from source and replaced.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/kit/tiny_model.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

std::map<std::string, std::vector<uint8_t>> cache_files(const std::string& dir) {
  std::map<std::string, std::vector<uint8_t>> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) out[e.path().filename().string()] = test::read_file(e.path().string());
  return out;
}

TEST(KernelCache, ColdWritesWarmReadsCorruptIsRebuilt) {
  test::TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  write_tiny_llama(model, TinyLlamaOptions{});
  const std::string cache_home = dir.file("cache");
  const std::string kernels = cache_home + "/infinipot/kernels";
  const test::ProcOptions env{{{"XDG_CACHE_HOME", cache_home}}, 600};
  const std::vector<std::string> args = {"run", "-m", model, "-p", "Tell me about the sea.", "-n", "6", "--json"};

  const auto cold = test::run_infinipot(args, env);
  ASSERT_TRUE(test::succeeded(cold)) << cold.describe();
  const auto written = cache_files(kernels);
  ASSERT_GE(written.size(), 3u) << "a binary per kernel file the run built";
  for (const auto& [name, bytes] : written) {
    EXPECT_GT(bytes.size(), 0u) << name;
    EXPECT_EQ(name.substr(name.size() - 4), ".bin") << name << ": no temporary file left behind";
  }

  const auto warm = test::run_infinipot(args, env);
  ASSERT_TRUE(test::succeeded(warm)) << warm.describe();
  EXPECT_EQ(nlohmann::json::parse(warm.out)["text"], nlohmann::json::parse(cold.out)["text"]);
  EXPECT_EQ(cache_files(kernels), written) << "a warm start reads the cache, it does not rewrite it";

  // Corrupt every entry: garbage in some, truncated others. The run still answers the same,
  // and the entries are rebuilt.
  int i = 0;
  for (const auto& [name, bytes] : written) {
    std::ofstream out(kernels + "/" + name, std::ios::binary | std::ios::trunc);
    if (i++ % 2) out << "not a program binary";
    else out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size() / 3));
  }
  const auto healed = test::run_infinipot(args, env);
  ASSERT_TRUE(test::succeeded(healed)) << healed.describe();
  EXPECT_EQ(nlohmann::json::parse(healed.out)["text"], nlohmann::json::parse(cold.out)["text"]);
  // Every entry was replaced by a valid one (the driver's binary in our checked envelope;
  // its bytes may differ from the first build's), and the next start reads them as they are.
  const auto rebuilt = cache_files(kernels);
  for (const auto& [name, bytes] : written) {
    ASSERT_TRUE(rebuilt.count(name)) << name;
    const auto& b = rebuilt.at(name);
    EXPECT_GT(b.size(), 20u) << name << " was not rebuilt";
    EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "IPKB") << name;
  }
  const auto again = test::run_infinipot(args, env);
  ASSERT_TRUE(test::succeeded(again)) << again.describe();
  EXPECT_EQ(nlohmann::json::parse(again.out)["text"], nlohmann::json::parse(cold.out)["text"]);
  EXPECT_EQ(cache_files(kernels), rebuilt) << "the rebuilt entries are read, not rebuilt again";
}

}  // namespace
}  // namespace infinipot
