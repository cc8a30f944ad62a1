// Sliding-window layers (gemma3) beside the full cache and the pot, on a tiny generated
// gemma3 (3 layers: two local with a 16-token window, one global):
//  - the local store (window + chunk entries, sliding) gives what the unbounded windowed
//    cache gives, chunked and token by token;
//  - the pot bounds the global layers only, whatever the input's length;
//  - a pot that never fills answers as the full cache does;
//  - the memory plan counts each kind exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/answer.h"
#include "tests/pot/pot_fixture.h"

namespace infinipot {
namespace {

constexpr int kWindow = 16;

const std::string& tiny_gemma() {
  static test::TempDir dir;
  static const std::string path = [] {
    const std::string p = dir.file("tiny-gemma3.gguf");
    TinyLlamaOptions o;
    o.arch = "gemma3";
    o.name = "tiny-gemma3";
    o.n_layer = 3;  // pattern 3: layers 0, 1 local, layer 2 global
    o.sliding_window = kWindow;
    o.swa_pattern = 3;
    o.rope_theta = 1e6f;  // gemma's global base; the local layers keep 1e4
    o.n_ctx = 4096;
    write_tiny_llama(p, o);
    return p;
  }();
  return path;
}

std::unique_ptr<Engine> make_gemma(int chunk, uint64_t device_mem = 0) {
  EngineOptions o;
  o.model_path = tiny_gemma();
  o.kv_type = "f32";
  o.chunk = chunk;
  o.device_mem = device_mem;
  return std::make_unique<Engine>(o);
}

// NLL of every next token of `tokens` (the last row: -1, skipped), evaluated in chunks of
// `chunk`, and the last row's logits.
struct Scores {
  std::vector<float> nll, logits;
  int window_next_position = 0;  // where the local store's positions stand at the end
};
Scores score(Engine& e, const std::vector<TokenId>& tokens, int chunk) {
  Scores s;
  e.prepare(static_cast<int>(tokens.size()));
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    const size_t n = std::min<size_t>(chunk, tokens.size() - i);
    e.forward().eval(std::vector<TokenId>(tokens.begin() + i, tokens.begin() + i + n));
    std::vector<TokenId> targets(n);
    for (size_t r = 0; r < n; ++r) targets[r] = i + r + 1 < tokens.size() ? tokens[i + r + 1] : -1;
    const std::vector<float> nll = e.forward().token_nll(targets);
    s.nll.insert(s.nll.end(), nll.begin(), nll.end() - (i + n == tokens.size() ? 1 : 0));
    const KvStore* w = e.forward().window_store();
    EXPECT_NE(w, nullptr);
    EXPECT_LE(w->size(), w->capacity());
    EXPECT_EQ(w->capacity(), e.config().sliding_window + e.chunk());
  }
  s.logits = e.forward().last_logits();
  s.window_next_position = e.forward().window_store()->next_position();
  return s;
}

// One chunk of the whole input never slides the local store (it holds window + chunk
// entries), so every slot is its position: the windowed attention of an unbounded cache.
// Chunks of 8 and single tokens slide it every few chunks; the window mask and the
// re-rotated keys must give the same scores. Tolerance 2e-4 on NLL and logits (nats):
// measured 1.1e-5 / 2.9e-6 (token by token) and 7.6e-6 / 2.5e-6 (chunks of 8), from the
// summation order of the chunked GEMM vs the matvec and f32 RoPE angles at other positions;
// sliding without re-rotating the kept keys measured 2.1 nats.
TEST(SlidingWindow, LocalStoreMatchesTheUnboundedWindowedCache) {
  auto e = make_gemma(0);
  const std::vector<TokenId> tokens = e->tokenizer().encode(document(8), false, false);
  ASSERT_GT(tokens.size(), size_t(5 * kWindow)) << "the input must be several windows long";
  const int n = static_cast<int>(tokens.size());

  auto whole = make_gemma(n);
  const Scores ref = score(*whole, tokens, n);
  EXPECT_EQ(ref.window_next_position, n) << "one chunk of everything must not slide";

  for (int chunk : {8, 1}) {
    auto eng = make_gemma(chunk);
    const Scores got = score(*eng, tokens, chunk);
    EXPECT_LT(got.window_next_position, n) << "chunk " << chunk << ": the local store never slid";
    EXPECT_LE(got.window_next_position, kWindow + chunk) << "local positions stay below the store's capacity";
    std::printf("chunk %d: max |NLL diff| %.2e, max |logit diff| %.2e\n", chunk, max_abs_diff(got.nll, ref.nll),
                max_abs_diff(got.logits, ref.logits));
    EXPECT_LT(max_abs_diff(got.nll, ref.nll), 2e-4) << "chunk " << chunk;
    EXPECT_LT(max_abs_diff(got.logits, ref.logits), 2e-4) << "chunk " << chunk;
  }
}

// The opposite check, so the comparison above can fail: dropping the window (a local store
// that keeps fewer entries than the window) must change the scores. A model whose window
// covers everything is compared with the 16-token one.
TEST(SlidingWindow, TheWindowChangesTheScores) {
  auto e = make_gemma(0);
  const std::vector<TokenId> tokens = e->tokenizer().encode(document(8), false, false);
  const int n = static_cast<int>(tokens.size());
  test::TempDir dir;
  TinyLlamaOptions o;
  o.arch = "gemma3", o.name = "tiny-gemma3", o.n_layer = 3, o.swa_pattern = 3, o.rope_theta = 1e6f, o.n_ctx = 4096;
  o.sliding_window = 4 * n;
  const std::string wide = dir.file("wide.gguf");
  write_tiny_llama(wide, o);
  EngineOptions eo;
  eo.model_path = wide, eo.kv_type = "f32", eo.chunk = 8;
  Engine w(eo);
  auto narrow = make_gemma(8);
  EXPECT_GT(max_abs_diff(score(w, tokens, 8).nll, score(*narrow, tokens, 8).nll), 1e-2);
}

// Chunks of 32: the catalyst (21 tokens here) must fit one chunk on a sliding-window model.
constexpr int kPotChunk = 32;

// One run of the fixture's pot over the tiny gemma3: 6 answer tokens, whatever they are.
PotRun run_gemma_pot(const std::string& policy, int capacity, int doc_sentences) {
  auto e = make_gemma(kPotChunk);
  const PromptParts parts = e->prompt_parts("", document(doc_sentences), kQuestion);
  const PotOptions po = pot_options(capacity, 0, policy);
  return run_pot(*e, parts, catalyst_for(*e, parts, po), po, 6, /*prepare=*/true, /*whole_input=*/false,
                 /*ignore_eos=*/true);
}

// The pot bounds the global layers; the local store stays at window + chunk; the device's
// peak does not depend on the input's length. Every pot policy runs.
TEST(SlidingWindow, PotBoundsOnlyTheGlobalLayersForEveryPolicy) {
  for (const auto& info : policies()) {
    if (!info.make || info.residency != Residency::Pot) continue;
    SCOPED_TRACE(info.name);
    const PotRun shorter = run_gemma_pot(info.name, 96, 16), longer = run_gemma_pot(info.name, 96, 48);
    for (const PotRun* r : {&shorter, &longer}) {
      EXPECT_GT(r->stats.cycles, 0) << "the document must overflow the pot";
      EXPECT_LE(r->kv_size, 96);
      EXPECT_EQ(r->window_capacity, kWindow + kPotChunk);
      EXPECT_LE(r->window_size, r->window_capacity);
      EXPECT_EQ(r->result.tokens.size(), 6u);
    }
    EXPECT_GT(longer.stats.cycles, shorter.stats.cycles);
    EXPECT_EQ(shorter.peak, longer.peak) << "peak device bytes grew with the input";
  }
}

// SnapKV holds the whole input, then keeps --pot entries of the global layers once; the
// local store is the same window + chunk. With --watch the report covers the global layers.
TEST(SlidingWindow, SnapKvKeepsPotEntriesOfTheGlobalLayers) {
  auto e = make_gemma(kPotChunk);
  AnswerOptions o;
  o.pot = pot_options(72, 0, "snapkv");
  o.n_predict = 4;
  o.ignore_eos = true;
  o.watch = "Greta saw";
  const Answer a = answer(*e, document(30), kQuestion, o);
  EXPECT_EQ(a.result.tokens.size(), 4u);
  EXPECT_EQ(a.pot["cycles"].get<int>(), 1);
  EXPECT_LE(e->kv().size(), 72 + 4 + 30) << "kept entries plus the question, tail and answer";
  EXPECT_EQ(e->forward().window_store()->capacity(), kWindow + kPotChunk);
  EXPECT_EQ(a.pot["watch"]["kept_fraction_per_layer"].size(), size_t(e->config().n_global_layers()));
}

// A pot that never fills reads the prompt as the full cache does (no distillation), so the
// greedy answer is the same. Both read in chunks of 32; the pot's chunks start after the
// prefix, the full cache's at 0, so rows are summed in other groups: greedy tokens, not
// bits, are compared.
TEST(SlidingWindow, PotThatNeverFillsAnswersAsTheFullCache) {
  const int n_predict = 12;
  auto full = make_gemma(kPotChunk);
  const PromptParts parts = full->prompt_parts("", document(10), kQuestion);
  full->prepare(static_cast<int>(parts.all().size()) + n_predict);
  GenerateOptions g;
  g.n_predict = n_predict;
  g.ignore_eos = true;
  const GenerateResult ref = full->generate(parts.all(), g);

  auto e = make_gemma(kPotChunk);
  std::vector<TokenId> catalyst;
  int rows = 0;
  catalyst = e->catalyst_prompt(parts, kQuestion, &rows);
  const int capacity = static_cast<int>(parts.all().size()) + n_predict;
  const PotOptions po =
      MemoryPot::resolve(pot_options(capacity, 0, "infinipot"), Engine::pot_layout(parts, catalyst, n_predict));
  e->prepare_pot(po);
  const GenerateResult got = e->generate(parts, catalyst, g, rows);
  EXPECT_EQ(e->pot()->stats().cycles, 0);
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_GT(static_cast<int>(parts.all().size()), 2 * (kWindow + kPotChunk)) << "the local store must have slid";
}

// kv_cache = the global layers x the KV capacity + the local layers x (window + chunk),
// plus the local store's compaction copy; counted from the shapes here, not from KvStore.
TEST(SlidingWindow, MemoryPlanCountsEachKind) {
  auto e = make_gemma(8);
  const LlamaConfig& c = e->config();
  ASSERT_EQ(c.n_global_layers(), 1);
  ASSERT_EQ(c.n_local_layers(), 2);
  const uint64_t entry = 2ull * c.n_head_kv * c.head_dim * 4;  // K and V of one token in one layer, f32
  const int window_cap = kWindow + 8;
  const uint64_t compaction = uint64_t(c.n_head_kv) * window_cap * (c.head_dim * 4 + 2 * sizeof(int));
  for (int capacity : {40, 400}) {
    e->prepare(capacity);
    const uint64_t kv = e->context().memory().used(cl::MemCategory::KvCache);
    EXPECT_EQ(kv, 1 * capacity * entry + 2 * window_cap * entry + compaction) << "capacity " << capacity;
    EXPECT_EQ(KvStore::bytes_needed(c, capacity, false), 1 * capacity * entry);
    EXPECT_EQ(KvStore::bytes_needed(c, window_cap, false, KvKind::Local), 2 * window_cap * entry);
  }
  // The budget check uses the same plan: the smallest budget that fits prepares, one byte less does not.
  const int capacity = 100;
  e->prepare(capacity);
  const uint64_t peak = e->context().memory().peak_total();
  EXPECT_EQ(make_gemma(8, peak)->largest_full_cache(capacity), capacity);
  EXPECT_LT(make_gemma(8, peak - 1)->largest_full_cache(capacity), capacity);
}

// Snapshots do not hold the local store yet: refused before any device work, naming why.
TEST(SlidingWindow, PotSnapshotsAreRefusedForSlidingWindowModels) {
  auto e = make_gemma(kPotChunk);
  AnswerOptions o;
  o.pot = pot_options(96, 0, "infinipot");
  o.save_pot = "never-written.pot";
  try {
    answer(*e, document(20), "Who?", o);
    FAIL() << "expected a refusal";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find("sliding-window"), std::string::npos) << err.what();
  }
}

}  // namespace
}  // namespace infinipot
