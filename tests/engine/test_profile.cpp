// `infinipot profile` through the real binary on a tiny random-weight model: the trace is
// valid Chrome Trace Event JSON with device-memory counters ("ph":"C") that never exceed the
// cap and spans ("ph":"X") for every phase the issue names (loading, prefill chunks, each
// distillation split into CaP / NuC / selection / compaction / re-rotation, decode), kernel
// spans with --kernels, the retained-token map; the PNG is a PNG; bad output paths are
// refused before the run.
#include <gtest/gtest.h>
#include <algorithm>
#include <cstdio>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/kit/tiny_model.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using nlohmann::json;
constexpr double kQuick = 30;
constexpr double kRun = 600;

class Profile : public ::testing::Test {
 protected:
  void SetUp() override {
    TinyLlamaOptions o;
    o.n_ctx = 4096;
    model_ = dir_.file("tiny.gguf");
    write_tiny_llama(model_, o);
    std::string text;
    for (int i = 0; i < 60; ++i) text += "The harbour master logged ship number " + std::to_string(100 + i) + " at dawn. ";
    doc_ = dir_.file("doc.txt");
    std::ofstream(doc_) << text;
  }
  test::ProcResult profile(const std::vector<std::string>& args, double timeout = kRun) {
    std::vector<std::string> all = {"profile", "-m", model_, "-f", doc_, "-q", "Which ship came last?", "-n", "4"};
    all.insert(all.end(), args.begin(), args.end());
    return test::run_infinipot(all, {{}, timeout});
  }
  test::TempDir dir_;
  std::string model_, doc_;
};

TEST_F(Profile, TraceHasMemoryCountersWithinTheCapAndEveryPhase) {
  const std::string trace_path = dir_.file("t.json"), png = dir_.file("p.png");
  const auto r = profile({"--pot", "160", "--chunk", "32", "--device-mem", "64M", "--kernels", "--trace", trace_path,
                          "--png", png});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  std::ifstream in(trace_path);
  json t;
  ASSERT_NO_THROW(t = json::parse(in)) << "the trace is not JSON";
  ASSERT_TRUE(t["traceEvents"].is_array());

  int counters = 0, kernels = 0;
  double peak = 0;
  std::map<std::string, int> spans;
  std::vector<std::pair<double, double>> cycles;  // distillation spans
  std::vector<std::pair<double, double>> caps;    // CaP spans
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid")) << e.dump();
    if (e["ph"] == "C" && e["name"] == "device memory (bytes)") {
      ++counters;
      double sum = 0;
      for (auto it = e["args"].begin(); it != e["args"].end(); ++it) {
        EXPECT_GE(it.value().get<double>(), 0) << it.key();
        sum += it.value().get<double>();
      }
      EXPECT_LE(sum, 64.0 * (1 << 20)) << "a memory sample exceeds the 64M cap";
      peak = std::max(peak, sum);
      for (const char* cat : {"weights", "kv_cache", "kv_selection", "activations", "scratch", "gemm"})
        EXPECT_TRUE(e["args"].contains(cat)) << cat;
    } else if (e["ph"] == "X") {
      ASSERT_TRUE(e.contains("ts") && e.contains("dur") && e["dur"].get<double>() >= 0) << e.dump();
      if (e["tid"] == 2) {
        ++kernels;
        continue;
      }
      spans[e["name"].get<std::string>()]++;
      const double a = e["ts"].get<double>(), b = a + e["dur"].get<double>();
      if (e["name"] == "distillation") cycles.emplace_back(a, b);
      if (e["name"] == "CaP (catalyst attention)") caps.emplace_back(a, b);
    }
  }
  EXPECT_GT(counters, 10);
  EXPECT_GT(peak, 0);
  EXPECT_GT(kernels, 100) << "--kernels: a span per kernel launch";
  for (const char* name : {"load model (GGUF, tokenizer)", "prepare device (context, weights, KV store)",
                           "prefill chunk", "distillation", "CaP (catalyst attention)", "NuC (novelty of the chunk)",
                           "selection", "compaction", "re-rotation (CR-RoPE)", "decode token"})
    EXPECT_GT(spans[name], 0) << "no span named '" << name << "'";
  EXPECT_EQ(spans["decode token"], 3);  // -n 4: the 4th token is sampled, never evaluated
  // Each CaP pass lies inside a distillation cycle.
  ASSERT_EQ(caps.size(), cycles.size());
  for (size_t i = 0; i < caps.size(); ++i) {
    EXPECT_GE(caps[i].first, cycles[i].first);
    EXPECT_LE(caps[i].second, cycles[i].second + 1);
  }
  // The retained-token map: every layer, each KV head holding at most the pot's entries.
  const json& m = t["infinipot"];
  ASSERT_EQ(m["layers"].size(), 2u);
  for (const auto& heads : m["layers"]) {
    ASSERT_EQ(heads.size(), 2u);
    for (const auto& positions : heads) {
      EXPECT_LE(positions.size(), 160u);
      EXPECT_GT(positions.size(), 0u);
      for (const auto& p : positions) EXPECT_LT(p.get<int>(), m["stream_tokens"].get<int>());
    }
  }
  EXPECT_EQ(m["pot"]["cycles"].get<int>(), static_cast<int>(cycles.size()));

  const std::vector<uint8_t> bytes = test::read_file(png);
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), std::string("\x89PNG\r\n\x1a\n", 8));

  EXPECT_NE(r.out.find("## Device memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("## Time per phase"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| ccd | distillation | " + std::to_string(cycles.size()) + " |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("distillation cycles"), std::string::npos) << r.out;

  // The decode step: launches per token between the first and the last decode span's start,
  // counted here from the trace, and a host gap that is the wall time less the device time.
  std::vector<double> decode_starts, kernel_starts;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == 2) kernel_starts.push_back(e["ts"].get<double>());
    else if (e["ph"] == "X" && e["name"] == "decode token") decode_starts.push_back(e["ts"].get<double>());
  std::sort(decode_starts.begin(), decode_starts.end());
  const double launches = std::count_if(kernel_starts.begin(), kernel_starts.end(), [&](double ts) {
                            return ts >= decode_starts.front() && ts < decode_starts.back();
                          }) / double(decode_starts.size() - 1);
  const size_t at = r.out.find("## Decode step (mean of 2 tokens)");
  ASSERT_NE(at, std::string::npos) << r.out;
  const size_t row = r.out.find("\n| ", r.out.find("|---:", at));
  double wall = 0, device = 0, gap = 0, printed = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + row, "\n| %lf | %lf | %lf | %lf |", &wall, &device, &gap, &printed), 4)
      << r.out.substr(at);
  EXPECT_GT(launches, 10) << "a tiny-model token still runs every layer's kernels";
  EXPECT_NEAR(printed, launches, 0.05);
  EXPECT_GT(wall, 0);
  EXPECT_GT(device, 0);
  EXPECT_NEAR(gap, wall - device, 0.02);
}

TEST_F(Profile, FullCacheTraceHoldsEveryPosition) {
  const std::string trace_path = dir_.file("full.json");
  const auto r = profile({"--trace", trace_path, "--json"});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  ASSERT_TRUE(json::accept(r.out)) << "--json keeps stdout to run's one object";
  std::ifstream in(trace_path);
  const json t = json::parse(in);
  const json& m = t["infinipot"];
  ASSERT_EQ(m["layers"].size(), 2u);
  EXPECT_EQ(m["layers"][0][0].size(), m["stream_tokens"].get<size_t>());
  EXPECT_TRUE(m["pot"].is_null());
  EXPECT_NE(r.err.find("## Device memory"), std::string::npos) << r.err;
}

TEST_F(Profile, UnwritableOutputsAreRefusedBeforeTheRun) {
  EXPECT_TRUE(test::fails_cleanly(profile({"--trace", dir_.file("no/such/dir/t.json")}, kQuick),
                                  {"--trace", "no/such/dir/t.json"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(profile({"--png", dir_.file("no/such/dir/p.png")}, kQuick),
                                  {"--png", "no/such/dir/p.png"}, 1, kQuick));
}

}  // namespace
}  // namespace infinipot
