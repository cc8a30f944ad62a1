// The whole model against an independent implementation: llama.cpp (through
// llama-cpp-python, scripts/reference/make_logits_fixture.py) on the same GGUF.
// Fixture: tests/fixtures/smollm2_logits.json, per prompt the tokens, every position's top-16
// logits and log-sum-exp, the last position's full logits row, and the greedy continuation.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "runtime/trace.h"
#include "tests/runtime/reference_suite.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

// llama.cpp multiplies Q4_1 weights with activations it first quantizes to 8 bits (Q8_1)
// and keeps the KV cache in f16; we keep activations and KV in fp32. Both are close to the
// exact product, not to each other. Measured over the three prompts: last-row logits differ
// by at most 0.68 (mean 0.08-0.19) on logits of magnitude ~30; per-position NLL by at most
// 0.27 (mean 0.016-0.043). The bounds leave ~40% room; a wrong layer, head or position
// moves logits by whole units and NLL by more than 1.
constexpr double kLastRowMaxAbs = 1.0;     // worst |logit difference| over the 49152 logits
constexpr double kLastRowMeanAbs = 0.3;    // mean |logit difference|
constexpr double kNllMaxAbs = 0.4;         // per position, -log p(top-1 token of llama.cpp)
constexpr double kNllMeanAbs = 0.07;
// Greedy decoding is checked teacher-forced along llama.cpp's continuation: at every step
// our argmax must be llama.cpp's token, or within this many logits of it (a near-tie: the
// "prose" prompt's second step has its top three within 0.09 in llama.cpp itself).
constexpr double kTieMargin = 0.3;

struct SmolLM2 {
  static constexpr const char* kFixture = "smollm2_logits.json";
  static std::string model() { return test::real_model_path(); }
};
using ModelReference = test::ReferenceSuite<SmolLM2>;

TEST_F(ModelReference, LastRowLogitsMatchLlamaCpp) {
  for (const auto& p : (*fixture_)["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto tokens = p["tokens"].get<std::vector<TokenId>>();
    engine_->kv().reset();
    engine_->forward().eval(tokens);
    const auto ours = engine_->forward().last_logits();
    const auto ref = p["last_logits"].get<std::vector<float>>();
    ASSERT_EQ(ours.size(), ref.size());
    double max_abs = 0, sum_abs = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const double d = std::fabs(double(ours[i]) - ref[i]);
      max_abs = std::max(max_abs, d);
      sum_abs += d;
    }
    EXPECT_LE(max_abs, kLastRowMaxAbs);
    EXPECT_LE(sum_abs / ref.size(), kLastRowMeanAbs);
    const auto argmax = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
    EXPECT_EQ(argmax(ours), argmax(ref));
    std::printf("[%s] last row: max |diff| %.4f, mean |diff| %.4f\n", p["name"].get<std::string>().c_str(), max_abs,
                sum_abs / ref.size());
  }
}

TEST_F(ModelReference, EveryPositionNllMatchesLlamaCpp) {
  for (const auto& p : (*fixture_)["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto tokens = p["tokens"].get<std::vector<TokenId>>();
    const auto top_ids = p["top_ids"];
    const auto top_logits = p["top_logits"];
    const auto lse = p["logsumexp"].get<std::vector<double>>();
    std::vector<TokenId> targets(tokens.size());
    for (size_t r = 0; r < tokens.size(); ++r) targets[r] = top_ids[r][0].get<TokenId>();
    engine_->kv().reset();
    engine_->forward().eval(tokens);
    const auto nll = engine_->forward().token_nll(targets);
    double max_abs = 0, sum_abs = 0;
    for (size_t r = 0; r < tokens.size(); ++r) {
      const double ref = lse[r] - top_logits[r][0].get<double>();
      const double d = std::fabs(nll[r] - ref);
      max_abs = std::max(max_abs, d);
      sum_abs += d;
    }
    EXPECT_LE(max_abs, kNllMaxAbs);
    EXPECT_LE(sum_abs / tokens.size(), kNllMeanAbs);
    std::printf("[%s] %zu positions: nll max |diff| %.4f, mean %.4f\n", p["name"].get<std::string>().c_str(),
                tokens.size(), max_abs, sum_abs / tokens.size());
  }
}

// NuC on a subsample (PolicyParams::nuc_stride): the LM head over rows first, first + k, ...
// packed from the final norm's output gives those rows' NLL as the whole-chunk product does
// (the same kernels over fewer rows: 1e-4 nats, float summation order only), and bad row
// sets are refused.
TEST_F(ModelReference, StridedRowsNllEqualsTheSameRowsOfTheWholeChunk) {
  const auto& p = (*fixture_)["prompts"][0];
  const auto tokens = p["tokens"].get<std::vector<TokenId>>();
  std::vector<TokenId> targets(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) targets[r] = p["top_ids"][r][0].get<TokenId>();
  engine_->kv().reset();
  engine_->forward().eval(tokens);
  const auto all = engine_->forward().token_nll(targets);
  const int n = static_cast<int>(tokens.size());
  ASSERT_GE(n, 9);
  for (const auto& [first, k] : std::vector<std::pair<int, int>>{{0, 2}, {1, 3}, {3, 4}, {0, n}}) {
    SCOPED_TRACE("first " + std::to_string(first) + ", stride " + std::to_string(k));
    std::vector<TokenId> some;
    for (int r = first; r < n; r += k) some.push_back(targets[r]);
    const auto nll = engine_->forward().token_nll(some, first, k);
    ASSERT_EQ(nll.size(), some.size());
    for (size_t i = 0; i < nll.size(); ++i) EXPECT_NEAR(nll[i], all[first + i * k], 1e-4) << "row " << first + i * k;
  }
  std::vector<TokenId> too_many;
  for (int r = 1; r < n + 2; r += 2) too_many.push_back(targets[0]);
  EXPECT_THROW(engine_->forward().token_nll(too_many, 1, 2), cl::ClError);   // past the last row
  EXPECT_THROW(engine_->forward().token_nll({targets[0]}, 2, 2), cl::ClError);  // first not below stride
  EXPECT_THROW(engine_->forward().token_nll({targets[0]}, 0, 0), cl::ClError);
}

TEST_F(ModelReference, GreedyContinuationMatchesLlamaCpp) {
  for (const auto& p : (*fixture_)["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto tokens = p["tokens"].get<std::vector<TokenId>>();
    const auto ref = p["greedy"].get<std::vector<TokenId>>();
    engine_->kv().reset();
    engine_->forward().eval(tokens);
    int identical = 0;
    for (size_t i = 0; i < ref.size(); ++i) {  // decode path (matvec), not stopping at EOS
      const auto logits = engine_->forward().last_logits();
      const auto ours = std::max_element(logits.begin(), logits.end()) - logits.begin();
      if (ours == ref[i]) ++identical;
      else EXPECT_LE(logits[ours] - logits[ref[i]], kTieMargin) << "step " << i << ": we pick " << ours
                                                                << ", llama.cpp " << ref[i];
      engine_->forward().eval({ref[i]});  // teacher forcing: stay on llama.cpp's path
    }
    std::printf("[%s] greedy: %d of %zu steps pick llama.cpp's token\n", p["name"].get<std::string>().c_str(),
                identical, ref.size());
  }
}

// The fp16 KV store (--kv-type f16, the default on GPUs; llama.cpp's default too) against
// llama.cpp under the same bounds as the fp32 store.
TEST(ModelReferenceF16Kv, EveryPositionNllMatchesLlamaCpp) {
  const auto fixture = test::load_reference_fixture(SmolLM2::kFixture);
  EngineOptions o;
  o.model_path = test::real_model_path();
  o.kv_type = "f16";
  Engine engine(o);
  engine.prepare(512);
  ASSERT_TRUE(engine.kv().half());
  for (const auto& p : fixture["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto tokens = p["tokens"].get<std::vector<TokenId>>();
    std::vector<TokenId> targets(tokens.size());
    for (size_t r = 0; r < tokens.size(); ++r) targets[r] = p["top_ids"][r][0].get<TokenId>();
    engine.forward().eval(tokens);
    const auto nll = engine.forward().token_nll(targets);
    double max_abs = 0, sum_abs = 0;
    for (size_t r = 0; r < tokens.size(); ++r) {
      const double d = std::fabs(nll[r] - (p["logsumexp"][r].get<double>() - p["top_logits"][r][0].get<double>()));
      max_abs = std::max(max_abs, d);
      sum_abs += d;
    }
    EXPECT_LE(max_abs, kNllMaxAbs);
    EXPECT_LE(sum_abs / tokens.size(), kNllMeanAbs);
    std::printf("[%s, f16 KV] nll max |diff| %.4f, mean %.4f\n", p["name"].get<std::string>().c_str(), max_abs,
                sum_abs / tokens.size());
    engine.kv().reset();
  }
}

// Prefill (packed GEMM over dequantized panels) and decode (matvec over quantized blocks)
// are different code paths; fed the same tokens they must give the same logits. The float
// decode path whatever this device's tuning says (the integer one rounds its inputs to 8 bits
// and is checked against llama.cpp by ModelReferenceInt8Matvec), with separate launches and
// with the fused decode products (tuning matvec_fusion: norm, GLU, RoPE + KV store inside
// the matvec) and with them fused but the norm (matvec_norm_fusion false), whichever is this
// device's default.
TEST_F(ModelReference, DecodeOneByOneEqualsChunkedPrefill) {
  const auto tokens = (*fixture_)["prompts"][1]["tokens"].get<std::vector<TokenId>>();
  // (matvec_fusion, matvec_norm_fusion): separate launches, all fused, fused but the norm.
  for (auto [fusion, norm] : {std::pair{false, false}, {true, true}, {true, false}}) {
    EngineOptions o;
    o.model_path = test::real_model_path();
    o.tuning_overrides = {{"matvec_int8", nlohmann::json::array()}, {"matvec_native_dot", nlohmann::json::array()},
                          {"matvec_fusion", fusion}, {"matvec_norm_fusion", norm}};
    Engine engine(o);
    engine.prepare(512);
    ASSERT_EQ(engine.context().tuning().matvec_fusion, fusion);
    ASSERT_EQ(engine.context().tuning().matvec_norm_fusion, norm);
    const char* what = !fusion ? "separate launches" : norm ? "fused decode" : "fused decode, separate norm";
    engine.forward().eval(tokens);
    const auto chunked = engine.forward().last_logits();
    engine.kv().reset();
    for (TokenId t : tokens) engine.forward().eval({t});
    const auto stepwise = engine.forward().last_logits();
    double max_abs = 0;
    for (size_t i = 0; i < chunked.size(); ++i)
      max_abs = std::max(max_abs, double(std::fabs(chunked[i] - stepwise[i])));
    // Both are fp32 end to end; only the summation order differs (1e-3 covers 30 layers of it).
    EXPECT_LE(max_abs, 2e-3) << what;
    std::printf("prefill vs decode (%s): max |diff| %.2e over %zu tokens\n", what, max_abs, tokens.size());
  }
}

// Decoding every prompt token one by one with these tuning values (and native dot form), so
// each of the 30 layers' products and the LM head run through the decode path they select: the
// last row's logits.
std::vector<float> decode_one_by_one(const nlohmann::json& overrides, const std::vector<TokenId>& tokens,
                                     const std::function<void(Engine&)>& check, int native_dot_form = -1) {
  EngineOptions o;
  o.model_path = test::real_model_path();
  o.tuning_overrides = overrides;
  o.native_dot_form = native_dot_form;
  Engine engine(o);
  engine.prepare(512);
  check(engine);
  for (TokenId t : tokens) engine.forward().eval({t});
  return engine.forward().last_logits();
}

// A decode path that quantizes the products' input to 8 bits per 32-block (as llama.cpp does)
// against llama.cpp and against our float decode path: the same bounds against llama.cpp as
// the float path, the same argmax, and logits that differ from the float path's (else the
// path did not run).
void expect_quantized_decode_matches(const nlohmann::json& quantized, const nlohmann::json& floats,
                                     const std::function<void(Engine&)>& check, const char* name,
                                     int native_dot_form = -1) {
  const auto fixture = test::load_reference_fixture(SmolLM2::kFixture);
  for (const auto& p : fixture["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto tokens = p["tokens"].get<std::vector<TokenId>>();
    const auto ints = decode_one_by_one(quantized, tokens, check, native_dot_form);
    const auto flts = decode_one_by_one(floats, tokens, [](Engine&) {});
    const auto ref = p["last_logits"].get<std::vector<float>>();
    ASSERT_EQ(ints.size(), ref.size());
    double max_ref = 0, sum_ref = 0, max_float = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(double(ints[i]) - ref[i]));
      sum_ref += std::fabs(double(ints[i]) - ref[i]);
      max_float = std::max(max_float, double(std::fabs(ints[i] - flts[i])));
    }
    EXPECT_LE(max_ref, kLastRowMaxAbs);
    EXPECT_LE(sum_ref / ref.size(), kLastRowMeanAbs);
    const auto argmax = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
    EXPECT_EQ(argmax(ints), argmax(ref));
    EXPECT_GT(max_float, 0.0);
    std::printf("[%s] %s decode: vs llama.cpp max |diff| %.4f, mean %.4f; vs float decode max |diff| %.4f\n",
                p["name"].get<std::string>().c_str(), name, max_ref, sum_ref / ref.size(), max_float);
  }
}

// The integer decode products (tuning matvec_int8: matvec_q8.cl for the model's Q4_1 layers
// and Q8_0 LM head).
TEST(ModelReferenceInt8Matvec, DecodeMatchesLlamaCppAndTheFloatPath) {
  const std::vector<std::string> types{"Q4_0", "Q4_1", "Q8_0"};
  expect_quantized_decode_matches(
      {{"matvec_int8", types}, {"matvec_native_dot", nlohmann::json::array()}},
      {{"matvec_int8", nlohmann::json::array()}, {"matvec_native_dot", nlohmann::json::array()}},
      [&](Engine& e) { EXPECT_EQ(e.context().tuning().matvec_int8, types); }, "int8");
}

// The products in the CPU's own 8-bit dot (tuning matvec_native_dot: native_dot.cl for the
// Q4_1 layers, with the norm inside, and the Q8_0 LM head), where the device has one: in its own
// form and in the AVX2 form (on a VNNI CPU these differ).
TEST(ModelReferenceNativeDot, DecodeMatchesLlamaCppAndTheFloatPath) {
  {
    cl::ContextOptions co;
    co.tuning_overrides = {{"matvec_native_dot", {"avx512_vnni", "avx2"}}};
    cl::Context probe(co);
    if (probe.device().native_dot == 0)
      GTEST_SKIP() << probe.device().name << " has no 8-bit dot instruction that PoCL kernels may use";
  }
  for (int form : {-1, 2}) {
    SCOPED_TRACE(form == 2 ? "AVX2 form" : "the device's own form");
    expect_quantized_decode_matches(
        {{"matvec_int8", nlohmann::json::array()},
         {"matvec_native_dot", {"avx512_vnni", "avx2"}},
         {"matvec_native_types", {"Q4_0", "Q4_1", "Q8_0"}}},
        {{"matvec_int8", nlohmann::json::array()}, {"matvec_native_dot", nlohmann::json::array()}},
        [form](Engine& e) {
          EXPECT_GT(e.context().device().native_dot, 0);
          if (form == 2) EXPECT_EQ(e.context().device().native_dot, 2);
        },
        form == 2 ? "native dot (AVX2)" : "native dot", form);
  }
}

// The prefill products in the CPU's integer dot (tuning gemm_native_types: gemm_native.cl,
// the input rounded to 16 bits per 32-block) against the float GEMM, over every reference
// prompt's last-row logits and every position's NLL: the same model to within what 16-bit
// input rounding moves (measured: last-row logits max |diff| 0.002-0.003, NLL 0.0010-0.0015;
// a wrong block or panel moves logits by whole units). Then against llama.cpp under the bounds
// above, as the float prefill is.
TEST(ModelReferenceNativeGemm, PrefillMatchesTheFloatGemmAndLlamaCpp) {
  const nlohmann::json native = {{"matvec_native_dot", {"avx512_vnni"}}, {"gemm_native_types", {"Q4_0", "Q4_1", "Q8_0"}}};
  nlohmann::json floats = native;
  floats["gemm_native_types"] = nlohmann::json::array();
  {
    cl::ContextOptions co;
    co.tuning_overrides = native;
    cl::Context probe(co);
    if (probe.device().native_dot != 1)
      GTEST_SKIP() << probe.device().name << " has no AVX-512 VNNI that PoCL kernels may use";
  }
  const auto fixture = test::load_reference_fixture(SmolLM2::kFixture);
  auto run = [&](const nlohmann::json& tuning, std::vector<std::vector<float>>& last,
                 std::vector<std::vector<float>>& nll) {
    EngineOptions o;
    o.model_path = test::real_model_path();
    o.tuning_overrides = tuning;
    Engine engine(o);
    engine.prepare(512);
    for (const auto& p : fixture["prompts"]) {
      const auto tokens = p["tokens"].get<std::vector<TokenId>>();
      std::vector<TokenId> targets(tokens.size());
      for (size_t r = 0; r < tokens.size(); ++r) targets[r] = p["top_ids"][r][0].get<TokenId>();
      engine.kv().reset();
      engine.forward().eval(tokens);
      last.push_back(engine.forward().last_logits());
      engine.kv().reset();
      engine.forward().eval(tokens);
      nll.push_back(engine.forward().token_nll(targets));
    }
  };
  std::vector<std::vector<float>> last_n, last_f;
  std::vector<std::vector<float>> nll_n, nll_f;
  run(native, last_n, nll_n);
  run(floats, last_f, nll_f);
  for (size_t p = 0; p < last_n.size(); ++p) {
    const std::string name = fixture["prompts"][p]["name"].get<std::string>();
    SCOPED_TRACE(name);
    const auto ref = fixture["prompts"][p]["last_logits"].get<std::vector<float>>();
    double vs_float = 0, vs_ref = 0, sum_ref = 0, nll_vs_float = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      vs_float = std::max(vs_float, double(std::fabs(last_n[p][i] - last_f[p][i])));
      const double d = std::fabs(double(last_n[p][i]) - ref[i]);
      vs_ref = std::max(vs_ref, d);
      sum_ref += d;
    }
    for (size_t r = 0; r < nll_n[p].size(); ++r) nll_vs_float = std::max(nll_vs_float, double(std::fabs(nll_n[p][r] - nll_f[p][r])));
    EXPECT_LE(vs_float, 0.02);
    EXPECT_GT(vs_float, 0.0) << "the integer GEMM gave the float GEMM's logits bit for bit: it did not run";
    EXPECT_LE(nll_vs_float, 0.005);
    EXPECT_LE(vs_ref, kLastRowMaxAbs);
    EXPECT_LE(sum_ref / ref.size(), kLastRowMeanAbs);
    std::printf("[%s] integer GEMM: last row vs float GEMM max |diff| %.4f (NLL %.5f), vs llama.cpp max %.4f mean %.4f\n",
                name.c_str(), vs_float, nll_vs_float, vs_ref, sum_ref / ref.size());
  }
}

// decode_layer_launch: a decode row's every block in one launch (decode_layer.cl), against the
// five launches a block of the same products in the native dot: every reference prompt decoded
// token by token to the same logits, bit for bit (the kernel runs the same functions on the
// same inputs; test_decode_layer.cpp checks it against the CPU reference), in one
// launch per layer plus the embedding and the final norm (counted from a kernel trace).
TEST(ModelReferenceDecodeLayer, OneLaunchABlockDecodesTheSameBits) {
  const nlohmann::json five = {{"matvec_int8", nlohmann::json::array()},
                               {"matvec_native_dot", {"avx512_vnni", "avx2"}},
                               {"attention_vec16", true},
                               {"decode_layer_launch", false}};
  nlohmann::json one = five;
  one["decode_layer_launch"] = true;
  {
    cl::ContextOptions co;
    co.tuning_overrides = one;
    cl::Context probe(co);
    if (probe.device().native_dot == 0)
      GTEST_SKIP() << probe.device().name << " has no 8-bit dot instruction that PoCL kernels may use";
  }
  const auto fixture = test::load_reference_fixture(SmolLM2::kFixture);
  for (const auto& p : fixture["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto tokens = p["tokens"].get<std::vector<TokenId>>();
    const auto a = decode_one_by_one(one, tokens, [](Engine& e) { ASSERT_TRUE(e.context().tuning().decode_layer_launch); });
    const auto b = decode_one_by_one(five, tokens, [](Engine&) {});
    ASSERT_EQ(a.size(), b.size());
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
    EXPECT_EQ(differ, 0u) << "logits that differ from the five launches' bits";
  }
  // Launches: 16 decode rows after a 4-token prompt.
  trace::start(true);
  {
    EngineOptions o;
    o.model_path = test::real_model_path();
    o.tuning_overrides = one;
    Engine engine(o);
    engine.prepare(64);
    engine.forward().eval(std::vector<TokenId>{1, 2, 3, 4});
    for (TokenId t = 5; t < 21; ++t) engine.forward().eval({t});
  }
  const nlohmann::json events = trace::stop()["traceEvents"];
  int layers = 0, all = 0;
  for (const auto& e : events)
    if (e["ph"] == "X" && e["tid"] == 2) {
      ++all;
      layers += e["name"] == "decode_layer";
    }
  const int n_layer = 30;
  EXPECT_EQ(layers, 16 * n_layer) << "a decode row's blocks did not run as decode_layer";
  // The prompt's launches (5 a layer and a few) and 16 rows of n_layer + the embedding + the final norm.
  EXPECT_LE(all - layers, 5 * n_layer + 8 + 16 * 2) << all << " launches";
}

}  // namespace
}  // namespace infinipot
