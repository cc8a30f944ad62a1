// The memory pot on the device (pot/memory_pot.h): reading a stream through a pot that
// distills, its bookkeeping (sources, positions, stats), CR-RoPE re-rotation checked against
// a CPU rotation of the keys read back, every pot policy through the one pipeline (capacity
// never exceeded, catalyst entries never kept, values copied bit for bit), H2O's accumulated
// attention carried across cycles, TOVA's re-run of the last token, its memory budget and the
// fp16 KV store. Most tests use a tiny generated llama (milliseconds per forward); one uses
// the real SmolLM2-135M where random weights would prove nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model_loader/tiny_model.h"
#include "pot/policy_registry.h"
#include "runtime/device_memory.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

const std::string& tiny_model() {
  static test::TempDir dir;
  static const std::string path = [] {
    const std::string p = dir.file("tiny.gguf");
    TinyLlamaOptions o;  // 2 layers, 2 KV heads of 16 dims, n_rot 16
    o.tied_embeddings = false;
    write_tiny_llama(p, o);
    return p;
  }();
  return path;
}

std::unique_ptr<Engine> make_engine(const std::string& model, const std::string& kv_type = "f32",
                                    uint64_t device_mem = 0) {
  EngineOptions o;
  o.model_path = model, o.kv_type = kv_type, o.device_mem = device_mem;
  return std::make_unique<Engine>(o);
}

// A document of n sentences, each slightly different (numbers, names), so no two stretches
// of it tokenize alike.
std::string document(int n) {
  static const char* names[] = {"Anna", "Boris", "Clara", "Dmitri", "Elena", "Farid", "Greta"};
  static const char* things[] = {"a red boat", "the old mill", "seven lanterns", "a blue kite", "the river gate"};
  std::string s;
  for (int i = 0; i < n; ++i)
    s += std::string(names[i % 7]) + " saw " + things[(i * 3) % 5] + " on day " + std::to_string(17 + i * 13) + ". ";
  return s;
}

const char* kQuestion = "Who saw the river gate?";

// The pot policies of the registry (every policy but full).
std::vector<std::string> pot_policy_names() {
  std::vector<std::string> out;
  for (const auto& info : policies())
    if (info.make) out.push_back(info.name);
  return out;
}

// Shared heads and layers are the default; per_head: each (layer, KV head) chooses its own
// (the paper's choice), which exercises the per-head gather.
PotOptions pot_options(int capacity, int keep, const std::string& policy, bool cr_rope = true, float nuc_ratio = 0.5f,
                       bool per_head = false) {
  PotOptions o;
  o.capacity = capacity, o.keep = keep, o.policy = policy, o.cr_rope = cr_rope;
  o.params.nuc_ratio = nuc_ratio;
  o.params.per_head = o.params.per_layer = per_head;
  // The CCD policies' default recent window (32 entries) would fill every free place of the
  // small pots here, leaving nothing to the scores; 4 leaves most places to them.
  if (policy != "h2o" && (find_policy(policy).params & kParamRecent)) o.params.recent = 4;
  return o;
}

// The catalyst prompt a policy gets (empty for policies that measure none), and its rows.
struct Catalyst {
  std::vector<TokenId> tokens;
  int question_rows = 0;
};
Catalyst catalyst_for(const Engine& e, const PromptParts& parts, const PotOptions& po) {
  Catalyst c;
  if (MemoryPot::needs_of(po).catalyst) c.tokens = e.catalyst_prompt(parts, kQuestion, &c.question_rows);
  return c;
}

struct PotRun {
  GenerateResult result;
  PotStats stats;
  int kv_size = 0;
  std::vector<std::vector<int>> sources;  // [layer * n_kv_heads + head]
};

// resolve + prepare_pot + generate (greedy), then what the pot holds.
// prepare = false: generate again on the pot already prepared.
PotRun run_pot(Engine& e, const PromptParts& parts, const Catalyst& catalyst, PotOptions po, int n_predict,
               bool prepare = true, bool whole_input = false) {
  po = MemoryPot::resolve(po, Engine::pot_layout(parts, catalyst.tokens, n_predict));
  if (prepare) e.prepare_pot(po);
  GenerateOptions g;
  g.n_predict = n_predict;
  PotRun run;
  run.result = e.generate(parts, catalyst.tokens, g, catalyst.question_rows, whole_input);
  run.stats = e.pot()->stats();
  run.kv_size = e.kv().size();
  for (int l = 0; l < e.config().n_layer; ++l)
    for (int h = 0; h < e.config().n_head_kv; ++h) run.sources.push_back(e.pot()->sources(l, h));
  return run;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// The first `pinned` stream indices, then the latest size - pinned of `read` tokens.
std::vector<int> pinned_and_latest(int pinned, int read, int size) {
  std::vector<int> s;
  for (int j = 0; j < pinned; ++j) s.push_back(j);
  for (int i = read - (size - pinned); i < read; ++i) s.push_back(i);
  return s;
}

// ---- (a) a pot that never fills is the plain cache ---------------------------------------

class NeverDistillingPot : public ::testing::TestWithParam<std::string> {};

// Every policy: a pot with room for everything reads and answers as the plain cache does.
TEST_P(NeverDistillingPot, GeneratesAsThePlainCache) {
  const std::string policy = GetParam();
  const bool whole = find_policy(policy).residency == Residency::WholeInput;
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(6), kQuestion);
  const int n_predict = 12;
  PotOptions po = pot_options(0, 0, policy);
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  // Room for prompt, catalyst and answer: read() never runs out of room (snapkv's one
  // selection keeps everything: keep >= what was read).
  po.capacity = int(parts.all().size() + catalyst.tokens.size()) + n_predict + 4;
  if (whole) po.keep = po.capacity - int(catalyst.tokens.size()) - 1;
  const PotRun pot = run_pot(*e, parts, catalyst, po, n_predict, true, whole);
  const auto pot_logits = e->forward().last_logits();  // of the last token decoded
  EXPECT_EQ(pot.stats.cycles, 0);
  EXPECT_EQ(pot.stats.tokens_read, (long long)parts.all().size());

  e->prepare(po.capacity);
  GenerateOptions g;
  g.n_predict = n_predict;
  const GenerateResult plain = e->generate(parts.all(), g);
  ASSERT_GE(plain.tokens.size(), 4u) << "too short an answer to compare";
  // Same tokens at the same positions, only chunked differently: greedy decoding must agree
  // token for token.
  EXPECT_EQ(pot.result.tokens, plain.tokens);
  EXPECT_EQ(pot.result.stop_reason, plain.stop_reason);
  EXPECT_EQ(pot.result.prompt_tokens, plain.prompt_tokens);
  // And the same logits after the same tokens, up to the summation order of differently
  // chunked products (fp32; logits of magnitude ~1-2): 1e-4 (measured: 0, bit-identical).
  const double diff = max_abs_diff(pot_logits, e->forward().last_logits());
  std::printf("%s pot vs plain cache: max |logit diff| %.2e\n", policy.c_str(), diff);
  EXPECT_LE(diff, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Policies, NeverDistillingPot, ::testing::ValuesIn(pot_policy_names()),
                         [](const auto& info) { return info.param; });

// ---- (b) bookkeeping of a distilling pot ---------------------------------------------------

// Checks every (layer, head)'s sources: the pinned prefix, then strictly ascending stream
// indices below `read`, kv_size of them.
void expect_sane_sources(const PotRun& run, int pinned, long long read) {
  for (size_t i = 0; i < run.sources.size(); ++i) {
    const auto& s = run.sources[i];
    ASSERT_EQ(int(s.size()), run.kv_size) << "layer-head " << i;
    for (int j = 0; j < pinned; ++j) ASSERT_EQ(s[j], j) << "layer-head " << i;
    for (size_t j = 1; j < s.size(); ++j) ASSERT_LT(s[j - 1], s[j]) << "layer-head " << i << " slot " << j;
    ASSERT_GE(s.front(), 0) << "layer-head " << i;
    ASSERT_LT(s.back(), read) << "layer-head " << i;
  }
}

class DistillingPot : public ::testing::TestWithParam<bool> {};  // param: cr_rope

TEST_P(DistillingPot, KeepsConsistentBookkeepingAndIsDeterministic) {
  const bool cr_rope = GetParam();
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(40), kQuestion);
  const PotOptions po = pot_options(0, 0, "infinipot", cr_rope);
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  const int pinned = int(parts.prefix.size());
  PotOptions sized = po;
  sized.capacity = pinned + int(catalyst.tokens.size()) + 48;
  const int capacity = sized.capacity;
  ASSERT_GT(parts.body.size(), 4u * capacity) << "the body must overflow the pot several times";
  // n_predict 1: the answer's first token is sampled from the prompt's last row, so the KV
  // store holds exactly what the pot read.
  const PotRun run = run_pot(*e, parts, catalyst, sized, 1);
  const long long read = (long long)parts.all().size();
  EXPECT_EQ(run.stats.tokens_read, read);
  EXPECT_GE(run.stats.cycles, 3);
  if (cr_rope)
    EXPECT_LT(run.stats.max_position, capacity) << "CR-RoPE keeps positions inside the pot";
  else
    EXPECT_EQ(run.stats.max_position, read - 1) << "without CR-RoPE keys keep their stream positions";
  expect_sane_sources(run, pinned, read);
  // The question and template tail are appended last and whole: the newest entries.
  const int final_n = int(parts.question.size() + parts.tail.size());
  for (const auto& s : run.sources)
    for (int j = 0; j < final_n; ++j) ASSERT_EQ(s[run.kv_size - final_n + j], read - final_n + j);
  EXPECT_EQ(run.result.tokens.size() + (run.result.stop_reason == "eos"), 1u);

  // Generation goes on past the pot's reading, and a second run gives the same everything,
  // on the same prepared pot and on a freshly prepared one.
  const PotRun a = run_pot(*e, parts, catalyst, sized, 10);
  const PotRun b = run_pot(*e, parts, catalyst, sized, 10, /*prepare=*/false);
  const PotRun c = run_pot(*e, parts, catalyst, sized, 10);
  EXPECT_FALSE(a.result.tokens.empty());
  for (TokenId t : a.result.tokens) EXPECT_LT(t, e->config().n_vocab);
  for (const PotRun* again : {&b, &c}) {
    EXPECT_EQ(a.result.tokens, again->result.tokens);
    EXPECT_EQ(a.sources, again->sources);
    EXPECT_EQ(a.stats.cycles, again->stats.cycles);
    EXPECT_EQ(a.stats.max_position, again->stats.max_position);
  }
}

INSTANTIATE_TEST_SUITE_P(CrRope, DistillingPot, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "CrRope" : "StreamPositions"; });

// After generate() decodes, the KV store also holds the answer's tokens; append() records
// their stream indices too (an earlier version left stale ones there, and the --pot-watch
// report counted them as kept text).
TEST(MemoryPot, SourcesAfterDecodingCoverTheAnswerTokens) {
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(40), kQuestion);
  PotOptions po = pot_options(0, 0, "infinipot");
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  po.capacity = int(parts.prefix.size() + catalyst.tokens.size()) + 48;
  const int n_predict = 10;
  const PotRun run = run_pot(*e, parts, catalyst, po, n_predict);
  ASSERT_GE(run.stats.cycles, 1);
  ASSERT_EQ(run.result.tokens.size(), size_t(n_predict)) << "needs an answer that did not stop early";
  // The n_predict - 1 decoded tokens (the last sampled one is never evaluated) follow the prompt.
  expect_sane_sources(run, int(parts.prefix.size()), run.stats.tokens_read + n_predict - 1);
  for (const auto& s : run.sources)
    for (int i = 0; i < n_predict - 1; ++i) EXPECT_EQ(s[run.kv_size - (n_predict - 1) + i], run.stats.tokens_read + i);
}

// ---- (c) the positional policies, known exactly ------------------------------------------

// streaming: the 4 sinks and the latest text; swa: the latest text only; truncate: the whole
// prefix, the document's first (keep - prefix) / 2 tokens and the latest text.
class PositionalPolicy : public ::testing::TestWithParam<std::string> {};

TEST_P(PositionalPolicy, HoldsExactlyItsWindowsInEveryLayerAndHead) {
  const std::string policy = GetParam();
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(30), kQuestion);
  const int prefix = int(parts.prefix.size());
  ASSERT_GT(prefix, 4) << "the streaming case needs a prefix longer than its 4 sinks";
  const int capacity = prefix + 40, keep = prefix + 15;
  PotOptions po = pot_options(capacity, keep, policy);
  const int pinned = MemoryPot::pinned_of(po, prefix);
  EXPECT_EQ(pinned, policy == "streaming" ? 4 : policy == "swa" ? 0 : prefix);
  po = MemoryPot::resolve(po, Engine::pot_layout(parts, {}, 1));
  e->prepare_pot(po);
  MemoryPot& pot = *e->pot();
  pot.begin(parts.prefix, {});
  EXPECT_EQ(pot.pinned(), pinned);
  pot.read(parts.body, -1);
  ASSERT_GE(pot.stats().cycles, 2);
  const int read = int(parts.prefix.size() + parts.body.size());
  ASSERT_EQ(pot.stats().tokens_read, read);
  // truncate's head: the first (keep - prefix) / 2 entries after the prefix, chosen at the
  // first cycle from the document's start, stay at the front ever after.
  const int head = policy == "truncate" ? (keep - pinned) / 2 : 0;
  auto expected = [&](int size) {
    std::vector<int> s = pinned_and_latest(pinned + head, read, size);
    return s;
  };
  for (int l = 0; l < e->config().n_layer; ++l)
    for (int h = 0; h < e->config().n_head_kv; ++h) ASSERT_EQ(pot.sources(l, h), expected(e->kv().size())) << l << "," << h;
  ASSERT_GT(e->kv().size(), keep);
  pot.distill();
  EXPECT_EQ(e->kv().size(), keep);
  EXPECT_EQ(e->kv().next_position(), keep) << "CR-RoPE: positions 0 .. keep-1";
  for (int l = 0; l < e->config().n_layer; ++l)
    for (int h = 0; h < e->config().n_head_kv; ++h) EXPECT_EQ(pot.sources(l, h), expected(keep)) << l << "," << h;
}

INSTANTIATE_TEST_SUITE_P(Pot, PositionalPolicy, ::testing::Values("streaming", "swa", "truncate"),
                         [](const auto& info) { return info.param; });

// ---- (d) CR-RoPE: the keys after compaction, checked on the CPU ----------------------------

float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const float f = exp == 0 ? std::ldexp(float(man), -24)                  // zero, subnormal
                  : exp == 31 ? (man ? NAN : INFINITY)
                              : std::ldexp(float(man | 0x400), exp - 25);
  return (h & 0x8000) ? -f : f;
}

// One layer's K or V as floats: [n_kv_heads][capacity][head_dim].
std::vector<float> read_kv(Engine& e, cl::Buffer& buf) {
  const size_t n = buf.bytes() / (e.kv_half() ? 2 : 4);
  std::vector<float> out(n);
  if (!e.kv_half()) {
    e.context().read(buf, out.data(), buf.bytes());
  } else {
    std::vector<uint16_t> h(n);
    e.context().read(buf, h.data(), buf.bytes());
    for (size_t i = 0; i < n; ++i) out[i] = half_to_float(h[i]);
  }
  return out;
}

struct KvSnapshot {
  std::vector<std::vector<float>> k, v;               // per layer
  std::vector<std::vector<int>> sources;               // [layer * n_kv_heads + head]
};
KvSnapshot snapshot(Engine& e) {
  KvSnapshot s;
  for (int l = 0; l < e.config().n_layer; ++l) {
    s.k.push_back(read_kv(e, e.kv().keys(l)));
    s.v.push_back(read_kv(e, e.kv().values(l)));
    for (int h = 0; h < e.config().n_head_kv; ++h) s.sources.push_back(e.pot()->sources(l, h));
  }
  return s;
}

// Llama's "normal" RoPE pairing as tests/support/cpu_ref.h and cl_kernels/rope.cl use it:
// pair i is (x[2i], x[2i+1]), angle = delta * theta^(-2i/n_rot). In double.
std::vector<double> rotate(const float* x, int head_dim, int n_rot, int delta, double theta) {
  std::vector<double> y(x, x + head_dim);
  for (int i = 0; 2 * i < n_rot; ++i) {
    const double a = delta * std::pow(theta, -2.0 * i / n_rot);
    y[2 * i] = x[2 * i] * std::cos(a) - x[2 * i + 1] * std::sin(a);
    y[2 * i + 1] = x[2 * i] * std::sin(a) + x[2 * i + 1] * std::cos(a);
  }
  return y;
}

// After one distillation from `before` to `after`: each survivor j of (layer, head) came from
// the slot whose stream index it carries (so no catalyst entry, which has none, survived);
// its value is that slot's, bit for bit; its key is that slot's rotated by (j - old position),
// or unchanged without CR-RoPE. old_position(l, h, slot) gives the position the key had
// before. rerun_last: the last entry before the distillation was computed again in its slot
// (TOVA measures the last token's attention that way): its value may differ by rounding
// (a one-token pass instead of the chunk that read it), within 1e-6. Returns the number of
// rows checked.
template <class OldPosition>
int expect_moved(Engine& e, const KvSnapshot& before, const KvSnapshot& after, int keep, bool cr_rope,
                 OldPosition old_position, bool rerun_last = false) {
  const auto& c = e.config();
  const int cap = e.kv().capacity(), D = c.head_dim;
  // f32: the device rotates in f32 with f32 cos/sin of angles up to ~cap radians (~1e-6
  // relative), so 1e-4 of the row's largest component (measured 4e-7). f16: the rotated key
  // is rounded to half again, at most half an ulp = 2^-11 = 4.9e-4 of its magnitude (measured
  // 4.5e-4), so 1e-3.
  const double tol = e.kv_half() ? 1e-3 : 1e-4;
  int rows = 0, bad = 0;
  double worst = 0;  // largest error relative to the row's scale
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      const auto& src_before = before.sources[size_t(l) * c.n_head_kv + h];
      const auto& src_after = after.sources[size_t(l) * c.n_head_kv + h];
      EXPECT_EQ(int(src_after.size()), keep);
      for (int j = 0; j < keep; ++j) {
        const auto it = std::find(src_before.begin(), src_before.end(), src_after[j]);
        EXPECT_NE(it, src_before.end()) << "survivor " << src_after[j] << " was not in the pot";
        if (it == src_before.end()) return rows;
        const int slot = int(it - src_before.begin());
        const size_t o = (size_t(h) * cap + slot) * D, n = (size_t(h) * cap + j) * D;
        const bool rerun = rerun_last && slot + 1 == int(src_before.size());
        if (rerun) {
          for (int d = 0; d < D; ++d)
            EXPECT_NEAR(before.v[l][o + d], after.v[l][n + d], 1e-6) << "re-run value of layer " << l << " head " << h;
        } else {
          EXPECT_EQ(std::memcmp(&before.v[l][o], &after.v[l][n], D * sizeof(float)), 0)
              << "value of layer " << l << " head " << h << " slot " << slot << " -> " << j;
        }
        const int delta = cr_rope ? j - old_position(l, h, slot) : 0;
        const auto want = rotate(&before.k[l][o], D, c.n_rot, delta, c.rope_theta);
        double scale = 1e-6;
        for (double w : want) scale = std::max(scale, std::fabs(w));
        for (int d = 0; d < D; ++d) {
          const double err = std::fabs(after.k[l][n + d] - want[d]) / scale;
          worst = std::max(worst, err);
          if (!(err <= tol) && ++bad <= 5)  // the first few mismatches, not thousands
            ADD_FAILURE() << "key of layer " << l << " head " << h << " slot " << slot << " -> " << j << " (delta "
                          << delta << ") dim " << d << ": " << after.k[l][n + d] << ", want " << want[d];
        }
        if (delta == 0 && !rerun)  // the kernel leaves unmoved keys alone: bit-identical copies
          EXPECT_EQ(std::memcmp(&before.k[l][o], &after.k[l][n], D * sizeof(float)), 0);
        ++rows;
      }
    }
  EXPECT_EQ(bad, 0) << "keys off by more than " << tol << " of their row's scale";
  std::printf("%d rows moved, largest key error %.2e of the row's scale\n", rows, worst);
  return rows;
}

struct RopeCase {
  std::string policy;
  const char* kv_type;
  bool cr_rope;
  bool per_head;
};

void PrintTo(const RopeCase& c, std::ostream* os) {
  *os << c.policy << " " << c.kv_type << (c.cr_rope ? " cr-rope" : " stream positions") << (c.per_head ? " per-head" : "");
}

class CrRope : public ::testing::TestWithParam<RopeCase> {};

// Fills the pot exactly (no distillation while reading), distills, and checks every surviving
// key and value; then reads more and distills a second time, when (with CR-RoPE) every
// position equals its slot again. Per head (infinipot), heads hold different tokens.
TEST_P(CrRope, SurvivingKeysAreReRotatedToTheirNewSlot) {
  const RopeCase pc = GetParam();
  auto e = make_engine(tiny_model(), pc.kv_type);
  const PromptParts parts = e->prompt_parts("", document(30), kQuestion);
  PotOptions po = pot_options(0, 0, pc.policy, pc.cr_rope, 0.5f, pc.per_head);
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  const int prefix = int(parts.prefix.size()), cat = int(catalyst.tokens.size());
  const int capacity = prefix + cat + 60, keep = prefix + 25;
  po.capacity = capacity, po.keep = keep;
  e->prepare_pot(MemoryPot::resolve(po, Engine::pot_layout(parts, catalyst.tokens, 1)));
  ASSERT_EQ(e->kv_half(), std::string(pc.kv_type) == "f16");
  MemoryPot& pot = *e->pot();
  pot.begin(parts.prefix, catalyst.tokens, catalyst.question_rows);
  const int fill = capacity - prefix - cat;  // exactly the room beside the catalyst
  ASSERT_GT(int(parts.body.size()), fill + 40);
  pot.read(std::vector<TokenId>(parts.body.begin(), parts.body.begin() + fill), parts.body[fill]);
  ASSERT_EQ(pot.stats().cycles, 0);
  ASSERT_EQ(e->kv().size(), capacity - cat);

  // First cycle: every key so far sits at position = slot = stream index.
  const KvSnapshot s0 = snapshot(*e);
  pot.distill();
  ASSERT_EQ(pot.stats().cycles, 1);
  ASSERT_EQ(e->kv().size(), keep);
  const KvSnapshot s1 = snapshot(*e);
  const bool rerun = pot.needs().last_query;  // TOVA runs the last token again
  EXPECT_EQ(expect_moved(*e, s0, s1, keep, pc.cr_rope, [](int, int, int slot) { return slot; }, rerun),
            e->config().n_layer * e->config().n_head_kv * keep);

  // Second cycle after more reading. With CR-RoPE the positions are the slots again; without,
  // each key's position is its stream index.
  pot.read(std::vector<TokenId>(parts.body.begin() + fill, parts.body.begin() + fill + 30), parts.body[fill + 30]);
  ASSERT_EQ(pot.stats().cycles, 1);
  EXPECT_EQ(e->kv().next_position(), pc.cr_rope ? keep + 30 : prefix + fill + 30);
  const KvSnapshot s2 = snapshot(*e);
  pot.distill();
  const KvSnapshot s3 = snapshot(*e);
  const int heads = e->config().n_head_kv;
  expect_moved(
      *e, s2, s3, keep, pc.cr_rope,
      [&](int l, int h, int slot) { return pc.cr_rope ? slot : s2.sources[size_t(l) * heads + h][slot]; }, rerun);
  if (pc.per_head) {  // the per-head gather was exercised: some layer's heads kept different tokens
    bool differ = false;
    for (int l = 0; l < e->config().n_layer; ++l) differ |= s3.sources[size_t(l) * heads] != s3.sources[size_t(l) * heads + 1];
    EXPECT_TRUE(differ);
  }
}

std::vector<RopeCase> rope_cases() {
  std::vector<RopeCase> out = {{"infinipot", "f32", true, true},
                               {"infinipot", "f16", true, true},
                               {"infinipot", "f32", false, true},
                               {"infinipot", "f32", true, false}};
  for (const auto& name : pot_policy_names())
    if (name != "infinipot") out.push_back({name, "f32", true, false});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Pot, CrRope, ::testing::ValuesIn(rope_cases()), [](const auto& info) {
  return info.param.policy + "_" + info.param.kv_type + (info.param.cr_rope ? "" : "_StreamPositions") +
         (info.param.per_head ? "_PerHead" : "");
});

// ---- (e) every pot policy over many cycles -------------------------------------------------

class EveryPolicy : public ::testing::TestWithParam<std::string> {};

// Reading a long document in uneven pieces: the pot never holds more than its capacity, always
// keeps room for the catalyst while more text is to come, and after every distillation holds
// exactly keep entries whose sources are tokens it read (catalyst entries have none).
TEST_P(EveryPolicy, NeverAboveCapacityAndHoldsOnlyTokensItRead) {
  const std::string policy = GetParam();
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(60), kQuestion);
  PotOptions po = pot_options(0, 0, policy);
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  const int prefix = int(parts.prefix.size()), cat = int(catalyst.tokens.size());
  po.capacity = prefix + cat + 40;
  po = MemoryPot::resolve(po, Engine::pot_layout(parts, catalyst.tokens, 1));
  e->prepare_pot(po);
  MemoryPot& pot = *e->pot();
  pot.begin(parts.prefix, catalyst.tokens, catalyst.question_rows);
  const int pinned = pot.pinned();
  const int L = e->config().n_layer, H = e->config().n_head_kv;
  size_t at = 0;
  int piece = 1, last_cycles = 0, checks = 0;
  while (at < parts.body.size()) {
    const size_t n = std::min<size_t>(piece, parts.body.size() - at);
    const TokenId next = at + n < parts.body.size() ? parts.body[at + n] : -1;
    // still_to_come: the rest of the body (everything left), so the pot knows more is coming.
    const int rest = int(parts.body.size() - at - n);
    pot.read(std::vector<TokenId>(parts.body.begin() + at, parts.body.begin() + at + n), next, rest);
    at += n;
    piece = piece % 13 + 3;  // 1, 4, 7, 10, 13, 3, 6, ...
    const int size = e->kv().size();
    ASSERT_LE(size, po.capacity);
    // Room for the catalyst is held back unless everything left fits without it.
    if (size + cat > po.capacity) ASSERT_LE(rest, po.capacity - size) << "no room left for the catalyst";
    ASSERT_LT(pot.stats().max_position, po.capacity) << "CR-RoPE keeps positions inside the pot";
    ASSERT_EQ(e->kv().next_position(), size) << "positions 0 .. size-1";
    const long long read = pot.stats().tokens_read;
    ASSERT_EQ(read, prefix + (long long)at);
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const std::vector<int> s = pot.sources(l, h);
        ASSERT_EQ(int(s.size()), size);
        for (int j = 0; j < pinned; ++j) ASSERT_EQ(s[j], j) << "pinned prefix lost";
        for (int j = 0; j < size; ++j) {
          ASSERT_GE(s[j], 0) << "a slot holds no token read (a catalyst entry?)";
          ASSERT_LT(s[j], read) << "a source past the stream";
          if (j) ASSERT_LT(s[j - 1], s[j]) << "sources not strictly ascending";
        }
        // Whatever was read since the last distillation follows, unbroken, at the end.
        ASSERT_EQ(s.back(), read - 1);
      }
    if (pot.stats().cycles != last_cycles) ++checks;
    last_cycles = pot.stats().cycles;
  }
  EXPECT_GE(pot.stats().cycles, 8) << "the document must overflow the pot many times";
  EXPECT_GE(checks, 6);
}

// Many explicit cycles, each checked entry by entry: survivors' values are bit-identical to
// the values of the entries they came from before the distillation (so no catalyst entry and
// no re-computed entry survived), and exactly keep remain.
TEST_P(EveryPolicy, EveryCycleKeepsOnlyEntriesThatWereThere) {
  const std::string policy = GetParam();
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(40), kQuestion);
  PotOptions po = pot_options(0, 0, policy);
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  const int prefix = int(parts.prefix.size()), cat = int(catalyst.tokens.size());
  po.capacity = prefix + cat + 36;
  po = MemoryPot::resolve(po, Engine::pot_layout(parts, catalyst.tokens, 1));
  e->prepare_pot(po);
  MemoryPot& pot = *e->pot();
  pot.begin(parts.prefix, catalyst.tokens, catalyst.question_rows);
  size_t at = 0;
  for (int cycle = 0; cycle < 6; ++cycle) {
    const int room = po.capacity - e->kv().size() - cat;
    ASSERT_GT(room, 0);
    ASSERT_LT(at + room, parts.body.size());
    pot.read(std::vector<TokenId>(parts.body.begin() + at, parts.body.begin() + at + room), parts.body[at + room]);
    at += room;
    ASSERT_EQ(pot.stats().cycles, cycle) << "read() distilled with room left";
    const KvSnapshot before = snapshot(*e);
    pot.distill();
    ASSERT_EQ(pot.stats().cycles, cycle + 1);
    ASSERT_EQ(e->kv().size(), po.keep);
    const KvSnapshot after = snapshot(*e);
    const int checked = expect_moved(
        *e, before, after, po.keep, true, [](int, int, int slot) { return slot; }, pot.needs().last_query);
    ASSERT_EQ(checked, e->config().n_layer * e->config().n_head_kv * po.keep) << "cycle " << cycle;
  }
}

INSTANTIATE_TEST_SUITE_P(Pot, EveryPolicy, ::testing::ValuesIn(pot_policy_names()),
                         [](const auto& info) { return info.param; });

// ---- (f) H2O: accumulated attention is carried through compactions -------------------------

// Two H2O cycles through the pot, replayed on a second engine with a plain KV store: the same
// reads (same chunks, so the same attention, bit for bit), the attention accumulated on the
// host, survivors chosen by the h2o policy, compacted and re-rotated as the pot does. What the
// pot chose at each cycle, and what the replay chooses at the second from:
//   carried:  each survivor's attention carried through the first compaction, entries read
//             since then starting from nothing (H2O: attention paid since the entry was read);
//   fresh:    the second period's attention alone (nothing carried);
//   inherited: as carried, but each new entry also starting from the attention left in its
//             slot by whatever entry sat there before the compaction.
struct H2oReplay {
  std::vector<std::vector<int>> pot_first, pot_second;  // [layer * heads + head] sources
  std::vector<std::vector<int>> carried, fresh, inherited;
  bool kv_identical_after_first = false;
};

H2oReplay replay_h2o(int recent = -1, int keep_after_prefix = 16) {
  const std::string model = tiny_model();
  auto a = make_engine(model);
  auto b = make_engine(model);
  const PromptParts parts = a->prompt_parts("", document(30), kQuestion);
  const int prefix = int(parts.prefix.size());
  const int capacity = prefix + 40, keep = prefix + keep_after_prefix;
  H2oReplay out;
  PotOptions po = pot_options(capacity, keep, "h2o");
  po.params.recent = recent;
  po = MemoryPot::resolve(po, {prefix, 0, 1000, 1});  // the pot is driven directly: no final part
  a->prepare_pot(po);
  b->prepare(capacity);
  EXPECT_EQ(a->forward().max_chunk(), b->forward().max_chunk());
  EXPECT_GE(b->forward().max_chunk(), capacity) << "each read below must be one chunk in both engines";
  MemoryPot& pot = *a->pot();
  const int L = a->config().n_layer, H = a->config().n_head_kv;
  const size_t slots = size_t(L) * H * capacity;
  cl::Buffer mass = b->context().memory().alloc(cl::MemCategory::PotScoring, slots * sizeof(float), "test.h2o_mass");
  b->context().fill_zero(mass, mass.bytes());
  auto replay = [&](const std::vector<TokenId>& tokens) {
    EvalOptions eo;
    eo.mass = &mass;
    b->forward().eval(tokens, eo);
  };
  auto at = [&](int l, int h) { return (size_t(l) * H + h) * capacity; };
  // The period's attention: read back, zeroed for the next period.
  auto period_mass = [&] {
    std::vector<float> m(slots);
    b->context().read(mass, m.data(), mass.bytes());
    b->context().fill_zero(mass, mass.bytes());
    return m;
  };
  std::vector<int> source(slots, -1);  // stream index per slot
  const auto policy = find_policy("h2o").make(po.params);
  auto choose = [&](const std::vector<float>& scores) {
    PotScores sc;
    sc.n_layers = L, sc.n_heads = H, sc.stride = capacity, sc.size = capacity, sc.pinned = prefix, sc.keep = keep;
    sc.accumulated = scores.data();
    sc.source = source.data();
    return policy->select(sc);
  };
  // The stream indices a choice keeps, per (layer, head).
  auto kept = [&](const std::vector<int>& chosen) {
    std::vector<std::vector<int>> rows;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        std::vector<int> r;
        for (int j = 0; j < keep; ++j) r.push_back(source[at(l, h) + chosen[(size_t(l) * H + h) * keep + j]]);
        rows.push_back(r);
      }
    return rows;
  };
  auto pot_sources = [&] {
    std::vector<std::vector<int>> rows;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) rows.push_back(pot.sources(l, h));
    return rows;
  };

  // Period 1: the prefix and the body up to a full pot; slot = stream index.
  pot.begin(parts.prefix, {});
  replay(parts.prefix);
  const int n1 = capacity - prefix;
  const std::vector<TokenId> part1(parts.body.begin(), parts.body.begin() + n1);
  pot.read(part1, parts.body[n1]);
  replay(part1);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < capacity; ++j) source[at(l, h) + j] = j;
  EXPECT_EQ(pot.stats().cycles, 0);
  pot.distill();
  const std::vector<float> acc1 = period_mass();
  const std::vector<int> first = choose(acc1);
  out.pot_first = pot_sources();
  EXPECT_EQ(out.pot_first, kept(first)) << "cycle 1";

  // Compact the replay as the pot does; carry the sources and both versions of the scores.
  std::vector<float> carried(slots, 0.0f), inherited = acc1;
  for (int l = 0; l < L; ++l) {
    const std::vector<int> layer(first.begin() + size_t(l) * H * keep, first.begin() + size_t(l + 1) * H * keep);
    b->kv().compact(l, layer, keep);
    std::vector<int> delta(size_t(H) * capacity, 0);
    for (int h = 0; h < H; ++h)
      for (int j = 0; j < keep; ++j) delta[size_t(h) * capacity + j] = j - layer[size_t(h) * keep + j];
    b->kv().rerotate(l, delta);
    for (int h = 0; h < H; ++h) {
      std::vector<int> s2(keep);
      for (int j = 0; j < keep; ++j) {
        const size_t from = at(l, h) + layer[size_t(h) * keep + j];
        carried[at(l, h) + j] = inherited[at(l, h) + j] = acc1[from];
        s2[j] = source[from];
      }
      std::copy(s2.begin(), s2.end(), source.begin() + at(l, h));
    }
  }
  b->kv().set_size(keep, keep);
  // The replay is faithful: both stores hold the same keys and values, bit for bit.
  out.kv_identical_after_first = true;
  for (int l = 0; l < L; ++l)
    out.kv_identical_after_first &= read_kv(*a, a->kv().keys(l)) == read_kv(*b, b->kv().keys(l)) &&
                                    read_kv(*a, a->kv().values(l)) == read_kv(*b, b->kv().values(l));

  // Period 2: the pot fills again.
  const int n2 = capacity - keep;
  const std::vector<TokenId> part2(parts.body.begin() + n1, parts.body.begin() + n1 + n2);
  pot.read(part2, parts.body[n1 + n2]);
  replay(part2);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int j = keep; j < capacity; ++j) source[at(l, h) + j] = prefix + n1 + (j - keep);
  EXPECT_EQ(pot.stats().cycles, 1);
  pot.distill();
  out.pot_second = pot_sources();
  const std::vector<float> m2 = period_mass();
  for (size_t i = 0; i < slots; ++i) carried[i] += m2[i], inherited[i] += m2[i];
  out.carried = kept(choose(carried));
  out.fresh = kept(choose(m2));
  out.inherited = kept(choose(inherited));
  return out;
}

// The pot's H2O choice is exact at both cycles and deterministic, and at the second it is
// the choice on attention carried through the first compaction, not on the second period's
// alone. (With h2o's default recent window, half the free places, the stale attention of the
// bug below does not change the choice: carried and inherited agree here.)
TEST(MemoryPot, H2oCarriesAccumulatedAttentionAcrossCycles) {
  const H2oReplay r = replay_h2o();
  EXPECT_TRUE(r.kv_identical_after_first) << "the replay did not compact as the pot did";
  EXPECT_NE(r.carried, r.fresh) << "this case would not notice scores that are not carried";
  EXPECT_EQ(r.pot_second, r.carried) << "the pot's second choice is not the one on carried attention";
  EXPECT_NE(r.pot_second, r.fresh) << "the pot chose on the second period's attention alone";
  const H2oReplay again = replay_h2o();
  EXPECT_EQ(r.pot_first, again.pot_first);
  EXPECT_EQ(r.pot_second, again.pot_second);
}

// Regression (fixed; the bug was in pot/memory_pot.cpp, MemoryPot::distill / carry): after a compaction only slots
// [0, keep) of acc_ are rewritten with the survivors' carried attention; slots [keep,
// capacity) keep the accumulated attention of the entries that sat there before. The tokens
// read next into those slots never reset it (eval_chunk does not touch acc_), so at the next
// cycle each new entry's "accumulated attention" includes an evicted (or moved) entry's. The
// pot's second choice then matches the `inherited` replay instead of `carried` (here with
// --pot-recent 0, so scores decide every place). Fix: zero acc_[keep, capacity) of every
// (layer, head) after carrying (or when eval_chunk fills a slot).
TEST(MemoryPot, H2oNewEntriesStartWithNoAccumulatedAttention) {
  const H2oReplay r = replay_h2o(/*recent=*/0, /*keep_after_prefix=*/16);
  ASSERT_TRUE(r.kv_identical_after_first);
  ASSERT_NE(r.carried, r.inherited) << "this case would not notice the stale attention";
  EXPECT_EQ(r.pot_second, r.carried) << "the pot's second H2O choice is not the one on carried attention";
  EXPECT_NE(r.pot_second, r.inherited) << "new entries inherited the attention left in their slots";
}

// ---- (g) TOVA re-runs the last token without changing it -----------------------------------

// TOVA measures the attention of the last token read by running it again in its own slot.
// The re-run must leave that slot's key and value as they were: with keep = size - 1 one
// entry goes, the last token survives (it attends to itself), every other survivor's value
// is a bit-identical copy of its value before the distillation (expect_moved), and the last
// one's is within 1e-6 of it: the re-run is a one-token pass, the first read a chunk, and
// the two sum their products in different orders (measured: 2.4e-7 on values of ~0.1-1).
TEST(MemoryPot, TovaReRunLeavesTheLastEntryUnchanged) {
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(20), kQuestion);
  const int prefix = int(parts.prefix.size());
  const int capacity = prefix + 30, keep = capacity - 1;
  // A one-token final part, so keep = capacity - 1 is a valid layout (this test calls the
  // pot directly and never appends a question).
  e->prepare_pot(MemoryPot::resolve(pot_options(capacity, keep, "tova"), {prefix, 0, 1000, 1}));
  MemoryPot& pot = *e->pot();
  ASSERT_TRUE(pot.needs().last_query);
  pot.begin(parts.prefix, {});
  const int fill = capacity - prefix;
  pot.read(std::vector<TokenId>(parts.body.begin(), parts.body.begin() + fill), parts.body[fill]);
  ASSERT_EQ(e->kv().size(), capacity);
  const KvSnapshot before = snapshot(*e);
  pot.distill();
  ASSERT_EQ(e->kv().size(), keep);
  const KvSnapshot after = snapshot(*e);
  int last_survived = 0;
  for (const auto& s : after.sources) last_survived += s.back() == capacity - 1;
  ASSERT_GT(last_survived, 0) << "the last token was dropped everywhere: nothing to compare";
  EXPECT_EQ(expect_moved(*e, before, after, keep, true, [](int, int, int slot) { return slot; }, /*rerun_last=*/true),
            e->config().n_layer * e->config().n_head_kv * keep);
  // And directly: the last token's value in its new slot against the value it was read with.
  const auto& c = e->config();
  const int D = c.head_dim;
  double worst = 0;
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      if (after.sources[size_t(l) * c.n_head_kv + h].back() != capacity - 1) continue;
      const size_t o = (size_t(h) * capacity + capacity - 1) * D, n = (size_t(h) * capacity + keep - 1) * D;
      for (int d = 0; d < D; ++d) worst = std::max(worst, double(std::fabs(before.v[l][o + d] - after.v[l][n + d])));
    }
  std::printf("last token kept in %d of %d layer-heads; its value moved by at most %.2e\n", last_survived,
              c.n_layer * c.n_head_kv, worst);
  EXPECT_LE(worst, 1e-6);
}

// ---- (h) the choice on the real model ------------------------------------------------------

// Per head (the paper's choice), catalyst attention is measured per KV head, so heads keep
// different tokens; NuC and CaP are different criteria; the choice is not a contiguous
// window of the latest text; and it is deterministic.
TEST(MemoryPotRealModel, HeadsChooseDifferentlyAndDeterministically) {
  auto e = make_engine(test::real_model_path(), "f32");
  const PromptParts parts = e->prompt_parts("", document(24), kQuestion);
  const PotOptions cap_only = pot_options(0, 0, "infinipot", true, 0.0f, /*per_head=*/true);
  const Catalyst catalyst = catalyst_for(*e, parts, cap_only);
  const int pinned = int(parts.prefix.size());
  const int capacity = pinned + int(catalyst.tokens.size()) + 96;
  ASSERT_GT(parts.body.size(), 2u * capacity);
  PotOptions cap_sized = cap_only, nuc_sized = pot_options(capacity, 0, "infinipot", true, 1.0f, true);
  cap_sized.capacity = capacity;
  // n_predict 1: nothing is decoded, so the store holds exactly the prompt's entries.
  // The second CaP-only run reuses the prepared pot (begin() starts it afresh), so the model is
  // uploaded twice, not three times.
  const PotRun cap_a = run_pot(*e, parts, catalyst, cap_sized, 1);
  const PotRun cap_b = run_pot(*e, parts, catalyst, cap_sized, 1, /*prepare=*/false);
  const PotRun nuc = run_pot(*e, parts, catalyst, nuc_sized, 1);
  ASSERT_GE(cap_a.stats.cycles, 2);
  EXPECT_EQ(cap_a.sources, cap_b.sources);
  EXPECT_EQ(cap_a.result.tokens, cap_b.result.tokens);
  const int H = e->config().n_head_kv, read = int(cap_a.stats.tokens_read);
  const std::vector<int> latest = pinned_and_latest(pinned, read, cap_a.kv_size);
  int layers_with_differing_heads = 0, heads_not_latest = 0;
  for (int l = 0; l < e->config().n_layer; ++l) {
    bool differ = false;
    for (int h = 1; h < H; ++h) differ |= cap_a.sources[size_t(l) * H + h] != cap_a.sources[size_t(l) * H];
    layers_with_differing_heads += differ;
    for (int h = 0; h < H; ++h) heads_not_latest += cap_a.sources[size_t(l) * H + h] != latest;
  }
  std::printf("layers whose heads differ: %d of %d; heads not keeping the latest window: %d of %d\n",
              layers_with_differing_heads, e->config().n_layer, heads_not_latest, e->config().n_layer * H);
  EXPECT_GT(layers_with_differing_heads, 0);
  EXPECT_GT(heads_not_latest, 0);
  EXPECT_NE(cap_a.sources, nuc.sources) << "NuC-only and CaP-only chose the same entries everywhere";
}

// ---- (i) the memory budget -----------------------------------------------------------------

// The device plan of a pot is the plain cache's plus exactly the policy's scoring buffers:
// an attention-mass buffer for the policies that measure attention, compaction buffers for all.
TEST(MemoryPot, ScoringBytesPerPolicy) {
  auto probe = make_engine(tiny_model());
  const LlamaConfig& cfg = probe->config();
  const int capacity = 200;
  const uint64_t mass = uint64_t(cfg.n_layer) * cfg.n_head_kv * capacity * sizeof(float);
  for (const auto& name : pot_policy_names()) {
    PotOptions o;
    o.policy = name;
    const PolicyNeeds n = MemoryPot::needs_of(o);
    const bool measures = n.catalyst || n.accumulated || n.last_query;
    for (bool half : {false, true}) {
      o.device_select = false;  // the host choice: the mass and the compaction buffers only
      const uint64_t host = MemoryPot::scoring_bytes(cfg, capacity, half, o);
      EXPECT_EQ(host, (measures ? mass : 0) + KvStore::compaction_bytes(cfg, capacity, half))
          << name << (half ? " f16" : " f32");
      // The device choice adds its scratch and the rows it reads: survivors and word runs,
      // novelty and H2O's sums where the policy measures them.
      o.device_select = true;
      const uint64_t row = uint64_t(cfg.n_layer) * cfg.n_head_kv * capacity * 4;
      PotScores probe_scores;
      probe_scores.n_layers = cfg.n_layer, probe_scores.n_heads = cfg.n_head_kv;
      probe_scores.stride = probe_scores.size = capacity, probe_scores.keep = capacity / 2;
      const ChoiceShape shape = find_policy(name).make(o.params)->plan(probe_scores).shape;
      EXPECT_EQ(MemoryPot::scoring_bytes(cfg, capacity, half, o),
                host + DeviceChoice::bytes_needed(cfg.n_layer, cfg.n_head_kv, capacity, shape) +
                    row * (2 + int(n.novelty) + int(n.accumulated)))
          << name << (half ? " f16" : " f32") << " (device choice)";
    }
  }
  PotOptions full;
  full.policy = "full";
  EXPECT_THROW(MemoryPot::scoring_bytes(cfg, capacity, false, full), std::invalid_argument);
  full.policy = "bogus";
  EXPECT_THROW(MemoryPot::scoring_bytes(cfg, capacity, false, full), std::invalid_argument);
}

class PotBudget : public ::testing::TestWithParam<std::string> {};

TEST_P(PotBudget, BudgetCoversScoringBuffersAndTheMinimumWorks) {
  const std::string policy = GetParam();
  const std::string model = tiny_model();
  auto probe = make_engine(model);
  const PromptParts parts = probe->prompt_parts("", document(30), kQuestion);
  PotOptions po = pot_options(0, 0, policy);
  const Catalyst catalyst = catalyst_for(*probe, parts, po);
  const int capacity = int(parts.prefix.size() + catalyst.tokens.size()) + 48, n_predict = 4;
  po.capacity = capacity;
  po = MemoryPot::resolve(po, Engine::pot_layout(parts, catalyst.tokens, n_predict));

  auto minimum_of = [&](bool with_pot) -> uint64_t {
    auto small = make_engine(model, "f32", 16 << 10);
    try {
      with_pot ? small->prepare_pot(po) : small->prepare(capacity);
      ADD_FAILURE() << "a 16 KiB budget held the tiny model";
    } catch (const cl::BudgetError& err) {
      const std::string msg = err.what();
      EXPECT_NE(msg.find("--device-mem"), std::string::npos) << msg;
      if (with_pot) EXPECT_NE(msg.find("pot_scoring"), std::string::npos) << msg;
      return err.minimum_bytes();
    }
    return 0;
  };
  const uint64_t minimum = minimum_of(true);
  ASSERT_GT(minimum, 16u << 10);
  // The pot's plan is the plain cache's plus exactly its scoring buffers.
  EXPECT_EQ(minimum - minimum_of(false), MemoryPot::scoring_bytes(probe->config(), capacity, false, po));

  auto below = make_engine(model, "f32", minimum - 1);
  EXPECT_THROW(below->prepare_pot(po), cl::BudgetError) << "the minimum is not tight";

  auto exact = make_engine(model, "f32", minimum);
  exact->prepare_pot(po);
  GenerateOptions g;
  g.n_predict = n_predict;
  const auto r = exact->generate(parts, catalyst.tokens, g, catalyst.question_rows);
  EXPECT_GE(exact->pot()->stats().cycles, 1);
  EXPECT_FALSE(r.tokens.empty());
  const auto report = exact->memory_report();
  EXPECT_LE(report["peak"].get<uint64_t>(), minimum);
  const uint64_t scoring_peak = report["by_category"]["pot_scoring"]["peak"].get<uint64_t>();
  EXPECT_GT(scoring_peak, 0u);
  EXPECT_LE(scoring_peak, MemoryPot::scoring_bytes(exact->config(), capacity, false, po));
}

INSTANTIATE_TEST_SUITE_P(Pot, PotBudget, ::testing::Values("infinipot", "h2o", "tova", "streaming"),
                         [](const auto& info) { return info.param; });

// ---- (j) the fp16 KV store through a distilling run ----------------------------------------

TEST(MemoryPot, F16StoreDistillsLikeF32) {
  const std::string model = tiny_model();
  auto f32 = make_engine(model, "f32");
  auto f16 = make_engine(model, "f16");
  const PromptParts parts = f32->prompt_parts("", document(30), kQuestion);
  PotOptions po = pot_options(0, 0, "infinipot");
  const Catalyst catalyst = catalyst_for(*f32, parts, po);
  po.capacity = int(parts.prefix.size() + catalyst.tokens.size()) + 48;
  // n_predict 1: last_logits() is then the prompt's last row, the row the answer starts from.
  const PotRun a = run_pot(*f32, parts, catalyst, po, 1);
  const auto logits_a = f32->forward().last_logits();
  const PotRun b = run_pot(*f16, parts, catalyst, po, 1);
  const auto logits_b = f16->forward().last_logits();
  ASSERT_TRUE(f16->kv_half());
  ASSERT_GE(b.stats.cycles, 5);
  EXPECT_EQ(a.stats.cycles, b.stats.cycles);
  EXPECT_LT(b.stats.max_position, po.capacity);
  // fp16 K/V (11-bit mantissa) moves the NuC and CaP scores by ~1e-5 relative; on this model
  // no two candidates are that close at the selection boundary, so every head keeps the same
  // entries (a selection that read the fp16 store wrongly would not).
  EXPECT_EQ(a.sources, b.sources);
  // The prompt's last-row logits: measured max |diff| 2.6e-5 with a top-2 gap of 0.078, so a
  // 1e-3 bound leaves 40x room for other drivers' rounding and still implies the same first
  // answer token.
  const double diff = max_abs_diff(logits_a, logits_b);
  std::printf("f16 vs f32 pot: max |logit diff| %.2e\n", diff);
  EXPECT_LE(diff, 1e-3);
  ASSERT_EQ(a.result.tokens.size(), 1u);
  ASSERT_EQ(b.result.tokens.size(), 1u);
  EXPECT_EQ(a.result.tokens[0], b.result.tokens[0]);
  // A longer answer from the fp16 pot: valid tokens (later ones are not compared with f32:
  // their top-2 gaps were not measured and may be small on random weights).
  const PotRun longer = run_pot(*f16, parts, catalyst, po, 8);
  EXPECT_EQ(longer.result.tokens.front(), b.result.tokens[0]);
  for (TokenId t : longer.result.tokens) EXPECT_TRUE(t >= 0 && t < f16->config().n_vocab);
}

// ---- (k) shared choices ----------------------------------------------------------------------

// The default (shared heads and layers): every KV head of every layer holds the same tokens
// after each distillation, and they are not simply the latest text.
TEST(MemoryPot, SharedChoiceKeepsTheSameEntriesInEveryLayerAndHead) {
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(40), kQuestion);
  PotOptions po = pot_options(0, 0, "infinipot");
  ASSERT_FALSE(po.params.per_head);
  ASSERT_FALSE(po.params.per_layer);
  po.params.recent = 4;  // the default window (32) would cover most of this small pot
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  po.capacity = int(parts.prefix.size() + catalyst.tokens.size()) + 48;
  const PotRun run = run_pot(*e, parts, catalyst, po, 1);
  ASSERT_GE(run.stats.cycles, 2);
  const int H = e->config().n_head_kv;
  ASSERT_GE(H, 2) << "the tiny model needs several KV heads for this test";
  for (size_t i = 1; i < run.sources.size(); ++i) EXPECT_EQ(run.sources[i], run.sources[0]) << "layer-head " << i;
  const auto& s = run.sources[0];
  bool gap = false;  // the latest text alone would be a contiguous tail after the prefix
  for (size_t j = parts.prefix.size() + 1; j < s.size(); ++j) gap |= s[j] != s[j - 1] + 1;
  EXPECT_TRUE(gap) << "the pot kept a contiguous window of the latest text: scores were ignored";
}

// Per layer, heads shared (--pot-layers per-layer): every head of a layer holds the same
// tokens; the layers choose on their own attention and differ somewhere.
TEST(MemoryPot, PerLayerChoiceSharesHeadsWithinALayer) {
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(40), kQuestion);
  PotOptions po = pot_options(0, 0, "cap");
  po.params.per_layer = true;
  po.params.recent = 4;
  const Catalyst catalyst = catalyst_for(*e, parts, po);
  po.capacity = int(parts.prefix.size() + catalyst.tokens.size()) + 48;
  const PotRun run = run_pot(*e, parts, catalyst, po, 1);
  ASSERT_GE(run.stats.cycles, 2);
  const int L = e->config().n_layer, H = e->config().n_head_kv;
  bool layers_differ = false;
  for (int l = 0; l < L; ++l) {
    for (int h = 1; h < H; ++h) EXPECT_EQ(run.sources[size_t(l) * H + h], run.sources[size_t(l) * H]);
    layers_differ |= run.sources[size_t(l) * H] != run.sources[0];
  }
  EXPECT_TRUE(layers_differ);
}

}  // namespace
}  // namespace infinipot
