// The memory pot on the device (pot/memory_pot.h): reading a stream through a pot that
// distills, its bookkeeping (sources, positions, stats), CR-RoPE re-rotation checked against
// a CPU rotation of the keys read back, every pot policy through the one pipeline (capacity
// never exceeded, catalyst entries never kept, values copied bit for bit). The measurements
// (H2O, TOVA), the budget and fp16 are in test_pot_measures.cpp. The tests use a tiny
// generated llama (milliseconds per forward).
#include "tests/pot/pot_fixture.h"

#include <cmath>
#include <cstring>
#include <ostream>

namespace infinipot {
namespace {

// ---- (a) a pot that never fills is the plain cache ---------------------------------------

class NeverDistillingPot : public ::testing::TestWithParam<std::string> {};

// Every policy: a pot with room for everything reads and answers as the plain cache does.
TEST_P(NeverDistillingPot, GeneratesAsThePlainCache) {
  const std::string policy = GetParam();
  const bool whole = find_policy(policy).reading == &reading_whole_input();
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

// The catalyst that runs in the pass of the chunk before a distillation (fuse_catalyst) sees
// the same pot as the pass of its own it replaces: same slots and positions, and every row's
// products, attention and mass are computed alone, so the pot must end bit for bit the same
// (digest: every slot's source, position and NuC score), with the same answer.
TEST(MemoryPot, CatalystInTheChunkBeforeADistillationEqualsItsOwnPass) {
  auto e = make_engine(tiny_model());
  const PromptParts parts = e->prompt_parts("", document(40), kQuestion);
  for (const char* policy : {"infinipot", "cap"}) {
    SCOPED_TRACE(policy);
    PotOptions po = pot_options(0, 0, policy, true);
    const Catalyst catalyst = catalyst_for(*e, parts, po);
    po.capacity = int(parts.prefix.size()) + int(catalyst.tokens.size()) + 48;
    po.fuse_catalyst = true;
    const PotRun fused = run_pot(*e, parts, catalyst, po, 8, true, false, true);
    const uint64_t fused_digest = e->pot()->digest();
    po.fuse_catalyst = false;
    const PotRun alone = run_pot(*e, parts, catalyst, po, 8, true, false, true);
    EXPECT_GE(alone.stats.cycles, 3);
    EXPECT_EQ(alone.stats.catalyst_fused, 0);
    EXPECT_GE(fused.stats.catalyst_fused, alone.stats.cycles - 1) << "every distillation but the last one reads on after";
    EXPECT_EQ(fused.stats.cycles, alone.stats.cycles);
    EXPECT_EQ(fused_digest, e->pot()->digest());
    EXPECT_EQ(fused.sources, alone.sources);
    EXPECT_EQ(fused.result.tokens, alone.result.tokens);
  }
}

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


struct RopeCase {
  std::string policy;
  const char* kv_type;
  bool cr_rope;
  bool per_head;
  bool rope_factors = false;  // the model has Llama 3 RoPE frequency factors
};

void PrintTo(const RopeCase& c, std::ostream* os) {
  *os << c.policy << " " << c.kv_type << (c.cr_rope ? " cr-rope" : " stream positions") << (c.per_head ? " per-head" : "")
      << (c.rope_factors ? " rope factors" : "");
}

class CrRope : public ::testing::TestWithParam<RopeCase> {};

// Fills the pot exactly (no distillation while reading), distills, and checks every surviving
// key and value; then reads more and distills a second time, when (with CR-RoPE) every
// position equals its slot again. Per head (infinipot), heads hold different tokens.
TEST_P(CrRope, SurvivingKeysAreReRotatedToTheirNewSlot) {
  const RopeCase pc = GetParam();
  auto e = make_engine(pc.rope_factors ? tiny_model_with_rope_factors() : tiny_model(), pc.kv_type);
  ASSERT_EQ(e->config().rope_freq_factors.empty(), !pc.rope_factors);
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
                               {"infinipot", "f32", true, false},
                               {"infinipot", "f32", true, true, true}};
  for (const auto& name : pot_policy_names())
    if (name != "infinipot") out.push_back({name, "f32", true, false});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Pot, CrRope, ::testing::ValuesIn(rope_cases()), [](const auto& info) {
  return info.param.policy + "_" + info.param.kv_type + (info.param.cr_rope ? "" : "_StreamPositions") +
         (info.param.per_head ? "_PerHead" : "") + (info.param.rope_factors ? "_RopeFactors" : "");
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

}  // namespace
}  // namespace infinipot
