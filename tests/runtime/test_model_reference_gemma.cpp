// Gemma 3 270M (base, Q4_K_M) against an independent implementation: llama.cpp on the same
// GGUF. Fixture: tests/fixtures/gemma3_reference.json, made by
// scripts/reference/make_gemma3_fixture.py (per prompt: tokens, every position's top-16 logits
// and log-sum-exp, llama-completion's greedy continuation; llama-perplexity's figure).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "tests/support/cli_process.h"
#include "tests/runtime/reference_suite.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

// llama.cpp quantizes activations to 8 bits for its quantized products, runs GELU through an
// fp16 table and keeps the KV cache in f16; we keep them in fp32. Measured over the eight
// prompts (printed): NLL max |diff| 0.38, mean <= 0.084; top-16 logits max |diff| 0.56. The
// bounds leave room; a wrong layer, head, norm or RoPE pairing moves logits by whole units and
// NLL by more than 1.
constexpr double kTopLogitMaxAbs = 1.0;  // worst |difference| over llama.cpp's top-16 of each row
constexpr double kNllMaxAbs = 0.5;       // per position, -log p(llama.cpp's top-1 token)
constexpr double kNllMeanAbs = 0.1;
// Teacher-forced greedy steps: our argmax must be llama.cpp's token or within this many
// logits of it (llama.cpp's own two greedy paths, llama-completion and batch-1 decode, differ
// on a step whose top two are within a few hundredths).
constexpr double kTieMargin = 0.3;
// Perplexity on data/perplexity.txt, against llama.cpp on the same weights dequantized to F32
// (it then multiplies in fp32 as we do): the 1% bound; measured 0.004%. Against
// llama.cpp on the Q4_K_M file itself we are 1.45% lower, because llama.cpp quantizes the
// activations to 8 bits before each quantized product (its own F32-weights figure is 1.45%
// lower too); that figure is printed, and bounded at 2% so a regression still shows. With
// --round-activations --kv-type f16 (llama.cpp's rounding of product inputs and its f16 KV
// cache) the same file gives 6.9774 against llama.cpp's 7.0000 (-0.32%): bounded at 1%.
constexpr double kPerplexityRelTol = 0.01;
constexpr double kPerplexitySameFileRelTol = 0.02;

struct Gemma3 {
  static constexpr const char* kFixture = "gemma3_reference.json";
  static std::string model() { return test::gemma_model_path(); }
};
using GemmaReference = test::ReferenceSuite<Gemma3>;

// The tokenizer agrees with llama.cpp's on the prompts (BOS first: add_bos_token).
TEST_F(GemmaReference, PromptTokensMatchLlamaCpp) {
  for (const auto& p : (*fixture_)["prompts"]) {
    const auto parts = engine_->prompt_parts("", p["text"].get<std::string>(), "", /*raw=*/true);
    EXPECT_EQ(parts.all(), p["tokens"].get<std::vector<TokenId>>()) << p["name"];
  }
}

TEST_F(GemmaReference, EveryPositionMatchesLlamaCpp) {
  for (const auto& p : (*fixture_)["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto tokens = p["tokens"].get<std::vector<TokenId>>();
    const auto& top_ids = p["top_ids"];
    const auto& top_logits = p["top_logits"];
    const auto lse = p["logsumexp"].get<std::vector<double>>();
    std::vector<TokenId> targets(tokens.size());
    for (size_t r = 0; r < tokens.size(); ++r) targets[r] = top_ids[r][0].get<TokenId>();
    engine_->kv().reset();
    engine_->forward().eval(tokens);
    const auto nll = engine_->forward().token_nll(targets);
    double max_abs = 0, sum_abs = 0;
    for (size_t r = 0; r < tokens.size(); ++r) {
      const double d = std::fabs(nll[r] - (lse[r] - top_logits[r][0].get<double>()));
      max_abs = std::max(max_abs, d);
      sum_abs += d;
    }
    EXPECT_LE(max_abs, kNllMaxAbs);
    EXPECT_LE(sum_abs / tokens.size(), kNllMeanAbs);
    // The last row's logits themselves, at llama.cpp's 16 largest.
    const auto last = engine_->forward().last_logits();
    const auto& ids = top_ids[tokens.size() - 1];
    const auto& ref = top_logits[tokens.size() - 1];
    double top_max = 0;
    for (size_t i = 0; i < ids.size(); ++i)
      top_max = std::max(top_max, std::fabs(double(last[ids[i].get<size_t>()]) - ref[i].get<double>()));
    EXPECT_LE(top_max, kTopLogitMaxAbs);
    std::printf("[%s] %zu positions: nll max |diff| %.4f, mean %.4f; last row top-16 max |diff| %.4f\n",
                p["name"].get<std::string>().c_str(), tokens.size(), max_abs, sum_abs / tokens.size(), top_max);
  }
}

// Every prompt's greedy path, teacher-forced along llama.cpp's tokens (decode path: matvec).
TEST_F(GemmaReference, GreedyStepsMatchLlamaCppUpToNearTies) {
  for (const auto& p : (*fixture_)["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const auto ref = p["greedy"].get<std::vector<TokenId>>();
    engine_->kv().reset();
    engine_->forward().eval(p["tokens"].get<std::vector<TokenId>>());
    int identical = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      const auto logits = engine_->forward().last_logits();
      const auto ours = std::max_element(logits.begin(), logits.end()) - logits.begin();
      if (ours == ref[i]) ++identical;
      else EXPECT_LE(logits[ours] - logits[ref[i]], kTieMargin) << "step " << i << ": we pick " << ours
                                                                << ", llama.cpp " << ref[i];
      engine_->forward().eval({ref[i]});
    }
    std::printf("[%s] greedy: %d of %zu steps pick llama.cpp's token\n", p["name"].get<std::string>().c_str(),
                identical, ref.size());
  }
}

// What a user sees: `infinipot run` on the base model (no chat template: plain text after
// BOS), greedy, 32 tokens. Exact text can only be required up to llama.cpp's first near-tie
// (its own two greedy paths part there on three of the eight prompts), so every output must
// start with the fixture's tie_free_prefix; and at least three prompts must come out
// identical to llama-completion over all 32 tokens (the acceptance: three prompts).
TEST_F(GemmaReference, GreedyRunPrintsWhatLlamaCompletionPrints) {
  int identical = 0;
  for (const auto& p : (*fixture_)["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    test::ProcOptions po;
    po.timeout_s = 300;
    const test::ProcResult r = test::run_infinipot(
        {"run", "-m", test::gemma_model_path(), "-p", p["text"].get<std::string>(), "-n", "32", "--temp", "0"}, po);
    ASSERT_TRUE(test::succeeded(r)) << r.describe();
    std::string out = r.out;  // compared without trailing newlines, as the fixture stores it
    while (!out.empty() && out.back() == '\n') out.pop_back();
    std::string prefix = p["tie_free_prefix"].get<std::string>();
    while (!prefix.empty() && prefix.back() == '\n') prefix.pop_back();
    EXPECT_EQ(out.substr(0, prefix.size()), prefix);
    const bool same = out == p["completion"].get<std::string>();
    identical += same;
    std::printf("[%s] %s llama-completion over 32 tokens\n", p["name"].get<std::string>().c_str(),
                same ? "identical to" : "differs from");
  }
  EXPECT_GE(identical, 3);
}

// `infinipot perplexity` with llama-perplexity's windows (-c 512, 20 windows, BOS first).
TEST_F(GemmaReference, PerplexityWithinOnePercentOfLlamaCpp) {
  const auto& ref = (*fixture_)["perplexity_f32_weights"];
  const double same_file = (*fixture_)["perplexity"]["ppl"].get<double>();
  test::ProcOptions po;
  po.timeout_s = 850;
  const test::ProcResult r = test::run_infinipot(
      {"perplexity", "-m", test::gemma_model_path(), "-f", std::string(INFINIPOT_TEST_SOURCE_DIR) + "/data/perplexity.txt",
       "-c", std::to_string(ref["ctx"].get<int>()), "--chunks", std::to_string(ref["chunks"].get<int>()), "--json"},
      po);
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  const double ours = j["perplexity"].get<double>(), theirs = ref["ppl"].get<double>();
  EXPECT_LE(std::fabs(ours - theirs), kPerplexityRelTol * theirs) << "ours " << ours << ", llama.cpp " << theirs;
  EXPECT_LE(std::fabs(ours - same_file), kPerplexitySameFileRelTol * same_file);
  std::printf("perplexity: ours %.4f; llama.cpp %.4f on F32 weights (%+.3f%%), %.4f on the Q4_K_M file (%+.2f%%); "
              "%.0f s\n", ours, theirs, 100.0 * (ours - theirs) / theirs, same_file,
              100.0 * (ours - same_file) / same_file, r.seconds);
}

// The same windows under llama.cpp's numerics (--round-activations: each product's input
// rounded to Q8_0 / Q8_K as ggml-cpu quantizes it; --kv-type f16 as its default cache),
// against llama-perplexity on the same Q4_K_M file: the 1% bound on the same GGUF.
TEST_F(GemmaReference, PerplexityUnderLlamaCppRoundingWithinOnePercentOfTheSameFile) {
  const auto& ref = (*fixture_)["perplexity"];
  test::ProcOptions po;
  po.timeout_s = 900;
  const test::ProcResult r = test::run_infinipot(
      {"perplexity", "-m", test::gemma_model_path(), "-f", std::string(INFINIPOT_TEST_SOURCE_DIR) + "/data/perplexity.txt",
       "-c", std::to_string(ref["ctx"].get<int>()), "--chunks", std::to_string(ref["chunks"].get<int>()),
       "--round-activations", "--kv-type", "f16", "--json"},
      po);
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["round_activations"].get<bool>());
  EXPECT_EQ(j["kv_type"], "f16");
  const double ours = j["perplexity"].get<double>(), theirs = ref["ppl"].get<double>();
  EXPECT_LE(std::fabs(ours - theirs), kPerplexityRelTol * theirs) << "ours " << ours << ", llama.cpp " << theirs;
  std::printf("perplexity with llama.cpp's rounding: ours %.4f; llama.cpp %.4f on the Q4_K_M file (%+.2f%%); %.0f s\n",
              ours, theirs, 100.0 * (ours - theirs) / theirs, r.seconds);
}

// A pot over Gemma 3: the global layers (3 of 18) read through --pot 128, the local ones keep
// their window + chunk store, which slides (the document is longer than 512 + 128 tokens).
// kv_cache is counted from the model's shape here (1 KV head of 256 dims, f32): 3 x 128
// global entries, 15 x (512 + 128) local ones, and one local layer's K copy plus its
// slot and delta lists for sliding.
// CR-RoPE on Gemma 3: re-rotating every cached key of the global layers by the same delta,
// and moving the next token's position with them, must leave the logits unchanged (attention
// sees relative positions; the local layers keep their own positions).
TEST(GemmaKvStore, ShiftingGlobalPositionsLeavesLogitsUnchanged) {
  EngineOptions o;
  o.model_path = test::gemma_model_path();
  o.kv_type = "f32";
  Engine e(o);
  e.prepare(256);
  const auto tokens = e.chat_prompt("", "The pass key is 31415. Remember it. The grass is green. The sky is blue.");
  e.forward().eval(tokens);
  e.forward().eval({tokens.back()});
  const std::vector<float> reference = e.forward().last_logits();
  for (const int shift : {37, -3}) {
    e.kv().reset();
    e.forward().eval(tokens);
    const int n = e.kv().size(), cap = e.kv().capacity();
    std::vector<int> delta(size_t(e.config().n_head_kv) * cap, 0);
    for (int h = 0; h < e.config().n_head_kv; ++h) std::fill_n(delta.begin() + size_t(h) * cap, n, shift);
    for (int l = 0; l < e.kv().n_layers(); ++l) e.kv().rerotate(l, delta);
    e.kv().set_size(n, e.kv().next_position() + shift);
    e.forward().eval({tokens.back()});
    const std::vector<float> shifted = e.forward().last_logits();
    double diff = 0;
    for (size_t i = 0; i < reference.size(); ++i) diff = std::max(diff, double(std::fabs(reference[i] - shifted[i])));
    std::printf("shift by %d: max |logit diff| %.2e\n", shift, diff);
    EXPECT_LE(diff, 1e-3);
  }
}

TEST(GemmaPot, ReadsThroughAPotOverTheGlobalLayers) {
  std::string doc;
  for (int i = 0; i < 60; ++i) doc += "Item " + std::to_string(i) + " of the list is a stone with the number " +
                                      std::to_string(1000 + 37 * i) + " on it. ";
  test::TempDir dir;
  const std::string file = dir.file("doc.txt");
  std::ofstream(file) << doc;
  test::ProcOptions po;
  po.timeout_s = 850;
  const test::ProcResult r = test::run_infinipot({"run", "-m", test::gemma_model_path(), "-f", file, "-q",
                                                  "Which number is on item 7?", "-n", "4", "--pot", "128",
                                                  "--policy", "cap", "--kv-type", "f32", "--json"},
                                                 po);
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["prompt_tokens"].get<int>(), 512 + 128);
  EXPECT_GT(j["pot"]["cycles"].get<int>(), 0);
  // --positions auto is gaps on Gemma 3: positions keep the kept text's own distances and
  // shrink every cut, so they stay below the stream's (no reset to 0 .. 127).
  EXPECT_EQ(j["pot"]["positions"].get<std::string>(), "gaps");
  EXPECT_LT(j["pot"]["max_position"].get<int>(), j["prompt_tokens"].get<int>() - 1);
  const uint64_t entry = 2ull * 256 * 4;  // K and V of one token in one layer
  // the local store's compaction buffers: a layer's K copy, slot and delta lists, the delta
  // list's (cos, sin) table (128 float pairs per slot) and the 128 RoPE angle divisors (all 1)
  const uint64_t expected = 3 * 128 * entry + 15 * (512 + 128) * entry + (512 + 128) * (256 * 4 + 8 + 128 * 8) + 128 * 4;
  EXPECT_EQ(j["device_bytes"]["kv_cache"].get<uint64_t>(), expected);
}

}  // namespace
}  // namespace infinipot
