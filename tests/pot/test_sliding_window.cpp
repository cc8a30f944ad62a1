// Sliding-window layers (gemma3) beside the full cache and the pot, on a tiny generated
// gemma3 (3 layers: two local with a 16-token window, one global):
//  - the local store (window + chunk entries, sliding) gives what the unbounded windowed
//    cache gives, chunked and token by token;
//  - the pot bounds the global layers only, whatever the input's length;
//  - a pot that never fills answers as the full cache does;
//  - the memory plan counts each kind exactly;
//  - pot snapshots hold the local store: a restored pot answers as the run that saved it;
//  - a catalyst longer than a prefill chunk is refused before any device work.
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
    if (info.reading != &reading_through_pot()) continue;
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

// positions=fit on a sliding-window model: the global store's positions stay inside a short
// trained context (160 here) while the input passes it several times; the local store keeps
// its own positions and window.
TEST(SlidingWindow, FitPositionsStayInsideTheTrainedContext) {
  test::TempDir dir;
  TinyLlamaOptions o;
  o.arch = "gemma3", o.name = "tiny-gemma3", o.n_layer = 3, o.swa_pattern = 3, o.rope_theta = 1e6f;
  o.sliding_window = kWindow, o.n_ctx = 160;
  const std::string short_ctx = dir.file("short-ctx.gguf");
  write_tiny_llama(short_ctx, o);
  EngineOptions eo;
  eo.model_path = short_ctx, eo.kv_type = "f32", eo.chunk = kPotChunk;
  Engine e(eo);
  const PromptParts parts = e.prompt_parts("", document(48), kQuestion);
  ASSERT_GT(int(parts.all().size()), 3 * o.n_ctx);
  PotOptions po = pot_options(96, 0, "infinipot");
  po.positions = PositionRule::Fit;
  const PotRun run = run_pot(e, parts, catalyst_for(e, parts, po), po, 6, true, false, /*ignore_eos=*/true);
  EXPECT_GT(run.stats.repositioned, 0);
  EXPECT_LT(run.stats.max_position, o.n_ctx);
  EXPECT_EQ(run.result.tokens.size(), 6u);
  EXPECT_LE(run.window_size, run.window_capacity);
  const std::vector<int> pos = e.pot()->positions(0, 0);
  EXPECT_GT(pos.back(), static_cast<int>(pos.size()) - 1) << "fit keeps squeezed gaps, reset would pack";
}

// positions=auto (the default) is the model's rule: gaps on Gemma 3, reset on llama; the pot
// then runs exactly as with that rule named.
TEST(SlidingWindow, AutoPositionsAreGapsOnGemma3AndResetOnLlama) {
  test::TempDir dir;
  for (const bool gemma : {true, false}) {
    SCOPED_TRACE(gemma ? "gemma3" : "llama");
    TinyLlamaOptions o;
    if (gemma) o.arch = "gemma3", o.name = "tiny-gemma3", o.n_layer = 3, o.swa_pattern = 3, o.sliding_window = kWindow;
    const std::string path = dir.file(gemma ? "g.gguf" : "l.gguf");
    write_tiny_llama(path, o);
    EngineOptions eo;
    eo.model_path = path, eo.kv_type = "f32", eo.chunk = kPotChunk;
    Engine e(eo);
    const PromptParts parts = e.prompt_parts("", document(48), kQuestion);
    PotOptions po = pot_options(96, 0, "infinipot");
    po.positions = PotOptions{}.positions;  // the default (the fixture names reset)
    ASSERT_EQ(po.positions, PositionRule::Auto);
    run_pot(e, parts, catalyst_for(e, parts, po), po, 4, true, false, /*ignore_eos=*/true);
    const PositionRule expect = gemma ? PositionRule::Gaps : PositionRule::Reset;
    EXPECT_EQ(e.pot()->options().positions, expect);
    const uint64_t automatic = e.pot()->digest();
    po.positions = expect;
    run_pot(e, parts, catalyst_for(e, parts, po), po, 4, true, false, /*ignore_eos=*/true);
    EXPECT_EQ(e.pot()->digest(), automatic);
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
// plus the local store's compaction copy, slot and delta lists, the delta list's (cos, sin)
// table (n_rot/2 float pairs per slot and head) and the n_rot/2 RoPE angle divisors; counted
// from the shapes here, not from KvStore.
TEST(SlidingWindow, MemoryPlanCountsEachKind) {
  auto e = make_gemma(8);
  const LlamaConfig& c = e->config();
  ASSERT_EQ(c.n_global_layers(), 1);
  ASSERT_EQ(c.n_local_layers(), 2);
  const uint64_t entry = 2ull * c.n_head_kv * c.head_dim * 4;  // K and V of one token in one layer, f32
  const int window_cap = kWindow + 8;
  const uint64_t compaction =
      uint64_t(c.n_head_kv) * window_cap * (c.head_dim * 4 + 2 * sizeof(int) + c.n_rot / 2 * 8) + c.n_rot / 2 * 4;
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

// ---- Pot snapshots hold the sliding-window store ----------------------------------------

constexpr int kAnswer = 8;

// A pot saved after reading the document (GenerateOptions::after_read, where --save-pot
// writes it) and its run's answer and last logits.
struct Saved {
  PotSnapshot snap;
  GenerateResult result;
  std::vector<float> logits;
  uint64_t digest = 0;
  int cycles = 0;  // at the end of the run
  int window_size_at_save = -1;
};
Saved save_gemma_pot(const std::string& policy, const std::string& path, const PromptParts& parts,
                     const Catalyst& cat) {
  auto e = make_gemma(kPotChunk);
  const PotOptions po = MemoryPot::resolve(pot_options(96, 0, policy), Engine::pot_layout(parts, cat.tokens, kAnswer));
  e->prepare_pot(po);
  GenerateOptions g;
  g.n_predict = kAnswer;
  g.ignore_eos = true;
  Saved s;
  g.after_read = [&](const std::vector<TokenId>& stream) {
    write_pot_snapshot(path, e->pot()->capture(stream, e->model_id()));
    s.window_size_at_save = e->forward().window_store()->size();
  };
  s.result = e->generate(parts, cat.tokens, g, cat.question_rows);
  s.logits = e->forward().last_logits();
  s.digest = e->pot()->digest();
  s.cycles = e->pot()->stats().cycles;
  s.snap = read_pot_snapshot(path);
  return s;
}

// Restored into a fresh engine (as --load-pot does), the pot answers exactly as the run that
// saved it: the same greedy tokens, bit-identical last logits and the same pot at the end.
// Policies that measure differently: CaP + NuC with a catalyst (infinipot), the attention
// accumulated since the last cycle (h2o), recency only (streaming). The document slides the
// local store many times, so what is restored is a store in mid-stream.
TEST(SlidingWindow, RestoredPotAnswersAsTheRunThatSavedIt) {
  test::TempDir dir;
  for (const std::string policy : {"infinipot", "h2o", "streaming"}) {
    SCOPED_TRACE(policy);
    auto probe = make_gemma(kPotChunk);
    const PromptParts parts = probe->prompt_parts("", document(30), kQuestion);
    const Catalyst cat = catalyst_for(*probe, parts, pot_options(96, 0, policy));
    const Saved saved = save_gemma_pot(policy, dir.file(policy + ".pot"), parts, cat);
    EXPECT_GT(saved.snap.cycles, 1) << "the document must overflow the pot";
    EXPECT_EQ(saved.snap.layer_kinds, "LLG");
    EXPECT_EQ(saved.snap.window_capacity, kWindow + kPotChunk);
    EXPECT_EQ(saved.snap.window_size, saved.window_size_at_save);
    EXPECT_GT(saved.snap.window_size, kWindow) << "the local store must hold at least a window";
    EXPECT_LT(saved.snap.window_size, saved.snap.stream_pos) << "the local store must have slid";

    auto e = make_gemma(kPotChunk);
    e->prepare_pot(MemoryPot::options_from_settings(saved.snap.settings));
    GenerateOptions g;
    g.n_predict = kAnswer;
    g.ignore_eos = true;
    const GenerateResult loaded = e->generate_restored(parts, saved.snap, cat.tokens, g, cat.question_rows);
    EXPECT_EQ(loaded.tokens, saved.result.tokens);
    EXPECT_EQ(max_abs_diff(e->forward().last_logits(), saved.logits), 0.0);
    EXPECT_EQ(e->pot()->digest(), saved.digest);
    EXPECT_EQ(e->pot()->stats().cycles, saved.cycles);
  }
}

// The opposite check, so the one above can fail: a snapshot whose local store is emptied
// (the global pot intact) answers differently. Without the local store the restored pot
// would read on as if the document had no last window.
TEST(SlidingWindow, RestoredPotWithoutItsLocalStoreAnswersDifferently) {
  test::TempDir dir;
  auto probe = make_gemma(kPotChunk);
  const PromptParts parts = probe->prompt_parts("", document(30), kQuestion);
  const Catalyst cat = catalyst_for(*probe, parts, pot_options(96, 0, "streaming"));
  const Saved saved = save_gemma_pot("streaming", dir.file("s.pot"), parts, cat);
  PotSnapshot emptied = saved.snap;
  emptied.window_size = emptied.window_next_position = 0;
  emptied.window_kv.clear();
  auto e = make_gemma(kPotChunk);
  e->prepare_pot(MemoryPot::options_from_settings(emptied.settings));
  GenerateOptions g;
  g.n_predict = kAnswer;
  g.ignore_eos = true;
  // A saved pot answers a question: without one it is refused naming the setting.
  PromptParts no_question = parts;
  no_question.question.clear();
  no_question.tail.clear();
  try {
    e->generate_restored(no_question, emptied, cat.tokens, g, cat.question_rows);
    ADD_FAILURE() << "an answer from a saved pot without a question was not refused";
  } catch (const SettingError& err) {
    EXPECT_EQ(err.setting(), "question");
    EXPECT_NE(std::string(err.what()).find("{question}"), std::string::npos) << err.what();
  }
  e->generate_restored(parts, emptied, cat.tokens, g, cat.question_rows);
  EXPECT_GT(max_abs_diff(e->forward().last_logits(), saved.logits), 1e-3);
}

// --save-pot / --load-pot through answer() (what `run` calls); a damaged file, a snapshot
// whose layers are not the model's, one whose local store does not fit this run's chunk and a
// catalyst longer than this run's chunk are refused with a message naming the problem.
TEST(SlidingWindow, SaveAndLoadThroughAnswerAndEveryRefusal) {
  test::TempDir dir;
  const std::string path = dir.file("g.pot");
  AnswerOptions o;
  o.pot = pot_options(96, 0, "streaming");  // no catalyst: only the local store limits the chunk below
  o.n_predict = 6;
  o.ignore_eos = true;
  o.save_pot = path;
  const Answer saved = answer(*make_gemma(kPotChunk), document(30), kQuestion, o);
  AnswerOptions l;
  l.load_pot = path;
  l.n_predict = 6;
  l.ignore_eos = true;
  const Answer loaded = answer(*make_gemma(kPotChunk), "", kQuestion, l);
  EXPECT_EQ(loaded.result.tokens, saved.result.tokens);
  EXPECT_EQ(loaded.pot["cycles"], saved.pot["cycles"]);
  EXPECT_EQ(loaded.pot["digest"], saved.pot["digest"]);

  auto refusal = [&](Engine& e, const AnswerOptions& opts) -> std::string {
    try {
      answer(e, "", kQuestion, opts);
    } catch (const std::invalid_argument& err) {
      return err.what();
    }
    return "(accepted)";
  };
  auto expect_refused = [&](const std::string& file, const std::string& why) {
    AnswerOptions bad = l;
    bad.load_pot = file;
    const std::string msg = refusal(*make_gemma(kPotChunk), bad);
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  };
  const std::vector<uint8_t> bytes = test::read_file(path);
  const PotSnapshot snap = read_pot_snapshot(path);
  ASSERT_GT(snap.window_kv.size(), 0u);
  test::write_file(dir.file("cut.pot"), std::vector<uint8_t>(bytes.begin(), bytes.end() - snap.window_kv.size() / 2));
  expect_refused(dir.file("cut.pot"), "checksum");
  std::vector<uint8_t> flipped = bytes;
  flipped[bytes.size() - 8 - snap.window_kv.size() / 2] ^= 1;  // inside the local store's K/V
  test::write_file(dir.file("flipped.pot"), flipped);
  expect_refused(dir.file("flipped.pot"), "checksum");
  PotSnapshot other = snap;
  other.layer_kinds = "LGL";  // as many global layers, in another place
  write_pot_snapshot(dir.file("kinds.pot"), other);
  expect_refused(dir.file("kinds.pot"), "the snapshot's layers (LGL, G global, L sliding-window) are not this model's (LLG)");
  // A local store saved with chunk 32 (up to 48 entries) does not fit a chunk of 1 (17).
  ASSERT_GT(snap.window_size, kWindow + 1);
  const std::string msg = refusal(*make_gemma(1), l);
  EXPECT_NE(msg.find("sliding-window store holds " + std::to_string(snap.window_size)), std::string::npos) << msg;
  EXPECT_NE(msg.find("{chunk} 32"), std::string::npos) << msg;
}

// A catalyst prompt longer than one prefill chunk cannot run on a model with sliding-window
// layers: refused from its token count before any device work, naming --chunk. With the
// chunk given, not even the device context is opened (memory_report is empty) and no pot is
// made. The same for a saved pot loaded with a smaller chunk.
TEST(SlidingWindow, CatalystLongerThanAChunkIsRefusedBeforeAnyDeviceWork) {
  auto e = make_gemma(8);
  const PromptParts parts = e->prompt_parts("", document(20), kQuestion);
  const int catalyst = static_cast<int>(e->catalyst_prompt(parts, kQuestion).size());
  ASSERT_GT(catalyst, 8);
  AnswerOptions o;
  o.pot = pot_options(96, 0, "infinipot");
  o.n_predict = 4;
  const std::string want = "the catalyst prompt (" + std::to_string(catalyst) + " tokens) is longer than the prefill "
                           "chunk (8), which a model with sliding-window layers needs; use {chunk} " +
                           std::to_string(catalyst) + " or more";
  try {
    answer(*e, document(20), kQuestion, o);
    ADD_FAILURE() << "a catalyst longer than the chunk was accepted";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
  }
  EXPECT_EQ(e->pot(), nullptr);
  EXPECT_EQ(e->memory_report(), nlohmann::json::object()) << "the device context was opened";

  test::TempDir dir;
  AnswerOptions s = o;
  s.save_pot = dir.file("c.pot");
  answer(*make_gemma(kPotChunk), document(20), kQuestion, s);
  AnswerOptions l;
  l.load_pot = s.save_pot;
  l.n_predict = 4;
  auto loader = make_gemma(8);
  try {
    answer(*loader, "", kQuestion, l);
    ADD_FAILURE() << "a catalyst longer than the chunk was accepted";
  } catch (const std::invalid_argument& err) {
    EXPECT_NE(std::string(err.what()).find(want), std::string::npos) << err.what();
  }
  EXPECT_EQ(loader->memory_report(), nlohmann::json::object()) << "the device context was opened";
}

}  // namespace
}  // namespace infinipot
