// The pot on every model family (tiny generated models, tests/kit/tiny_model.h), through the
// real binary: `run --pot 256` over a ~4K-token document distills and completes, and its peak
// device bytes are those of the ~1K-token run (the pot's memory does not grow with the input).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/kit/tiny_model.h"
#include "tests/pot/cli_pot_fixture.h"

namespace infinipot {
namespace {

using test_cli_pot::json;
using test_cli_pot::long_document;
using test_cli_pot::write_text;

constexpr double kRun = 600;  // seconds: kernels possibly compiled from cold

class PotFamilies : public ::testing::TestWithParam<std::string> {
 protected:
  json run_json(const std::string& model, const std::string& doc) {
    const test::ProcResult r = test::run_infinipot(
        {"run", "-m", model, "-f", doc, "-q", "Which town painted its bridge violet?", "--pot", "256", "-n", "4",
         "--kv-type", "f32", "--json"},
        {{}, kRun});
    EXPECT_TRUE(test::succeeded(r)) << r.describe();
    if (r.exit_code != 0) return json::object();
    return json::parse(r.out);
  }
  test::TempDir dir_;
};

TEST_P(PotFamilies, APot256ReadsFourTimesTheTextInTheSameDeviceBytes) {
  TinyLlamaOptions o;
  o.arch = GetParam();
  o.name = "tiny-" + o.arch;
  if (o.arch == "qwen3") o.head_dim = 32;
  const std::string model = dir_.file(o.arch + ".gguf");
  write_tiny_llama(model, o);
  const std::string short_doc = dir_.file("1k.txt"), long_doc = dir_.file("4k.txt");
  write_text(short_doc, long_document(14));
  write_text(long_doc, long_document(66));
  const json a = run_json(model, short_doc), b = run_json(model, long_doc);
  ASSERT_TRUE(a.contains("peak_device_bytes") && b.contains("peak_device_bytes"));
  const int short_tokens = a["prompt_tokens"].get<int>(), long_tokens = b["prompt_tokens"].get<int>();
  EXPECT_GE(short_tokens, 800);
  EXPECT_LE(short_tokens, 1300);
  EXPECT_GE(long_tokens, 3600);
  EXPECT_GT(b["ccd_cycles"].get<int>(), a["ccd_cycles"].get<int>());
  EXPECT_GT(a["ccd_cycles"].get<int>(), 0);  // 1K tokens overflow 256 entries too
  EXPECT_EQ(a["peak_device_bytes"], b["peak_device_bytes"]) << o.arch << ": " << short_tokens << " vs " << long_tokens
                                                            << " tokens";
  EXPECT_GE(b["generated_tokens"].get<int>(), 1);
}

INSTANTIATE_TEST_SUITE_P(Families, PotFamilies, ::testing::Values("llama", "qwen2", "qwen3", "phi3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace infinipot
