// The position rules of a distillation (pot/positions.h): the plan on hand-worked numbers,
// and on the tiny model that fit equals stream while the input fits the trained context, and
// past it keeps every position inside that context with runs of text still consecutive.
#include "tests/pot/pot_fixture.h"

#include "pot/positions.h"

namespace infinipot {
namespace {

TEST(PositionPlan, ResetPacksStreamKeeps) {
  const PositionStep r = plan_positions(PositionRule::Reset, 5000, 600, 4096, 512);
  EXPECT_EQ(r.applied, PositionRule::Reset);
  EXPECT_EQ(r.next, 512);
  const PositionStep s = plan_positions(PositionRule::Stream, 5000, 600, 4096, 512);
  EXPECT_EQ(s.applied, PositionRule::Stream) << "stream leaves the window if the input does";
  EXPECT_EQ(s.next, 5000);
}

TEST(PositionPlan, FitKeepsStreamPositionsWhileTheNextCycleFits) {
  // 3496 + 600 = 4096: the next cycle's last position is 4095, inside a 4096 window.
  const PositionStep in = plan_positions(PositionRule::Fit, 3496, 600, 4096, 512);
  EXPECT_EQ(in.applied, PositionRule::Stream);
  EXPECT_EQ(in.next, 3496);
  // One more and it would reach 4096: squeeze every position by (4096 - 600) / 3497.
  const PositionStep out = plan_positions(PositionRule::Fit, 3497, 600, 4096, 512);
  EXPECT_EQ(out.applied, PositionRule::Fit);
  EXPECT_EQ(out.next, 3496);
  EXPECT_DOUBLE_EQ(out.scale, 3496.0 / 3497.0);
  const PositionStep far = plan_positions(PositionRule::Fit, 100000, 600, 4096, 512);
  EXPECT_DOUBLE_EQ(far.scale, 3496.0 / 100000.0);
  // No known window: nothing to fit into.
  EXPECT_EQ(plan_positions(PositionRule::Fit, 100000, 600, 0, 512).applied, PositionRule::Stream);
}

TEST(PositionPlan, FitPacksWhenTheKeptEntriesLeaveNoGap) {
  // window - room = 512 = keep: the kept entries can only sit side by side.
  const PositionStep p = plan_positions(PositionRule::Fit, 9000, 600, 1112, 512);
  EXPECT_EQ(p.applied, PositionRule::Reset);
  EXPECT_EQ(p.next, 512);
}

TEST(PositionPlan, SqueezeScalesGapsAndKeepsRunsConsecutive) {
  // floor(0.5 p): 0, 0 -> 1, 1 -> 2, 5, 5 -> 6, 20
  EXPECT_EQ(squeeze_positions({0, 1, 2, 10, 11, 40}, 0.5), (std::vector<int>{0, 1, 2, 5, 6, 20}));
  // A scale this small packs everything, as reset does.
  EXPECT_EQ(squeeze_positions({0, 300, 301, 9000}, 1e-6), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(squeeze_positions({7, 8, 9}, 1.0), (std::vector<int>{7, 8, 9}));
  EXPECT_TRUE(squeeze_positions({}, 0.5).empty());
  for (const auto& rule : {"reset", "stream", "fit", "gaps", "auto"}) EXPECT_EQ(position_rule_name(*parse_position_rule(rule)), std::string(rule));
  EXPECT_FALSE(parse_position_rule("cr-rope").has_value());
}

TEST(PositionPlan, CapGapsShrinksEveryCutAndKeepsRunsAndShortDistances) {
  int next = 0;
  // Distances 1, 1, 8, 1, 29 and 60 to the next token; a cap of 10: 1, 1, 8, 1, 10 and 10.
  EXPECT_EQ(cap_gaps({0, 1, 2, 10, 11, 40}, 100, 10, &next), (std::vector<int>{0, 1, 2, 10, 11, 21}));
  EXPECT_EQ(next, 31);
  // The first entry counts from position -1: 500 becomes 9 under a cap of 10.
  EXPECT_EQ(cap_gaps({500, 501}, 502, 10, &next), (std::vector<int>{9, 10}));
  EXPECT_EQ(next, 11);
  // A cap of 1 packs, as reset does; a cap wider than every cut changes nothing.
  EXPECT_EQ(cap_gaps({0, 7, 90}, 300, 1, &next), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(next, 3);
  EXPECT_EQ(cap_gaps({0, 7, 90}, 300, 1000, &next), (std::vector<int>{0, 7, 90}));
  EXPECT_EQ(next, 300);
  EXPECT_TRUE(cap_gaps({}, 5, 10, &next).empty());
  EXPECT_EQ(next, 5) << "nothing kept: the next token counts from -1, 6 < 10 away";
}

// A saved pot carries its rule; snapshots from before the rules name only cr_rope.
TEST(PositionPlan, SnapshotSettingsCarryTheRule) {
  PotOptions o;
  o.capacity = 64, o.keep = 32;
  for (PositionRule r : {PositionRule::Reset, PositionRule::Stream, PositionRule::Fit, PositionRule::Gaps}) {
    o.positions = r;
    EXPECT_EQ(MemoryPot::options_from_settings(MemoryPot::settings_json(o)).positions, r) << position_rule_name(r);
  }
  o.position_gap = 17;
  EXPECT_EQ(MemoryPot::options_from_settings(MemoryPot::settings_json(o)).position_gap, 17);
  nlohmann::json old = MemoryPot::settings_json(o);
  old.erase("positions");
  old["cr_rope"] = false;
  EXPECT_EQ(MemoryPot::options_from_settings(old).positions, PositionRule::Stream);
  old["cr_rope"] = true;
  EXPECT_EQ(MemoryPot::options_from_settings(old).positions, PositionRule::Reset);
  old["positions"] = "sideways";
  try {
    MemoryPot::options_from_settings(old);
    ADD_FAILURE() << "an unknown rule was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sideways"), std::string::npos) << e.what();
  }
}

// The unit rule too; snapshots from before it name two flags (and, older still, none).
TEST(PositionPlan, SnapshotSettingsCarryTheUnitRule) {
  PotOptions o;
  o.capacity = 64, o.keep = 32;
  for (UnitRule r : {UnitRule::Word, UnitRule::Plain, UnitRule::Alnum, UnitRule::Token}) {
    o.params.units = r;
    EXPECT_EQ(MemoryPot::options_from_settings(MemoryPot::settings_json(o)).params.units, r) << unit_rule_name(r);
  }
  nlohmann::json old = MemoryPot::settings_json(o);
  old["params"].erase("units");
  old["params"]["token_units"] = false;
  old["params"]["alnum_units"] = false;
  EXPECT_EQ(MemoryPot::options_from_settings(old).params.units, UnitRule::Plain) << "the word rule of its day";
  old["params"]["alnum_units"] = true;
  EXPECT_EQ(MemoryPot::options_from_settings(old).params.units, UnitRule::Alnum);
  old["params"].erase("alnum_units");
  EXPECT_EQ(MemoryPot::options_from_settings(old).params.units, UnitRule::Alnum) << "before word runs had marks";
  old["params"]["token_units"] = true;
  EXPECT_EQ(MemoryPot::options_from_settings(old).params.units, UnitRule::Token);
  old["params"]["units"] = "syllable";
  EXPECT_THROW(MemoryPot::options_from_settings(old), std::invalid_argument);
}

std::string tiny_model_with_context(int n_ctx) {
  static test::TempDir dir;
  const std::string p = dir.file("tiny-ctx" + std::to_string(n_ctx) + ".gguf");
  TinyLlamaOptions o;
  o.tied_embeddings = false;
  o.n_ctx = n_ctx;
  write_tiny_llama(p, o);
  return p;
}

PotRun run_with(Engine& e, const PromptParts& parts, PositionRule rule, int extra, int n_predict,
                int gap = kDefaultPositionGap) {
  PotOptions po = pot_options(0, 0, "infinipot");
  po.positions = rule;
  po.position_gap = gap;
  const Catalyst catalyst = catalyst_for(e, parts, po);
  po.capacity = int(parts.prefix.size() + catalyst.tokens.size()) + extra;
  return run_pot(e, parts, catalyst, po, n_predict);
}

// f(position distance, stream distance, "layer L head H slot J") for every pair of
// neighbouring entries the pot holds, in every layer and KV head.
template <class F>
void for_each_neighbour(Engine& e, F f) {
  for (int l = 0; l < e.kv().n_layers(); ++l)
    for (int h = 0; h < e.config().n_head_kv; ++h) {
      const std::vector<int> pos = e.pot()->positions(l, h), src = e.pot()->sources(l, h);
      ASSERT_EQ(pos.size(), src.size());
      for (size_t j = 1; j < pos.size(); ++j)
        f(pos[j] - pos[j - 1], src[j] - src[j - 1],
          "layer " + std::to_string(l) + " head " + std::to_string(h) + " slot " + std::to_string(j));
    }
}

TEST(PotPositions, FitInsideTheTrainedContextIsStreamBitForBit) {
  auto e = make_engine(tiny_model_with_context(1 << 20));
  const PromptParts parts = e->prompt_parts("", document(40), kQuestion);
  const PotRun stream = run_with(*e, parts, PositionRule::Stream, 48, 6);
  const uint64_t stream_digest = e->pot()->digest();
  const PotRun fit = run_with(*e, parts, PositionRule::Fit, 48, 6);
  ASSERT_GE(fit.stats.cycles, 3);
  EXPECT_EQ(e->pot()->digest(), stream_digest);
  EXPECT_EQ(fit.result.tokens, stream.result.tokens);
  EXPECT_EQ(fit.stats.max_position, stream.stats.max_position);
  EXPECT_EQ(fit.stats.repositioned, 0);
}

TEST(PotPositions, FitPastTheTrainedContextStaysInsideWithRunsTogether) {
  const int n_ctx = 256;
  auto e = make_engine(tiny_model_with_context(n_ctx));
  const PromptParts parts = e->prompt_parts("", document(60), kQuestion);
  ASSERT_GT(int(parts.all().size()), 3 * n_ctx) << "the input must pass the trained context several times";
  const PotRun run = run_with(*e, parts, PositionRule::Fit, 48, 8);
  EXPECT_GE(run.stats.repositioned, 3);
  EXPECT_LT(run.stats.max_position, n_ctx) << "every position the pot used stays inside the trained context";
  bool gap = false;
  for_each_neighbour(*e, [&](int d, int read, const std::string& where) {
    ASSERT_GE(d, 1) << where;
    if (read == 1) ASSERT_EQ(d, 1) << "text read side by side stays side by side, " << where;
    gap = gap || d > 1;
  });
  for (int l = 0; l < e->kv().n_layers(); ++l) EXPECT_LT(e->pot()->positions(l, 0).back(), n_ctx);
  EXPECT_TRUE(gap) << "fit keeps (squeezed) gaps where reset would pack";
  // reset on the same input packs: no gap, positions are the slots.
  run_with(*e, parts, PositionRule::Reset, 48, 8);
  const std::vector<int> packed = e->pot()->positions(0, 0);
  for (size_t j = 0; j < packed.size(); ++j) ASSERT_EQ(packed[j], int(j));
}

// gaps: every cut between kept neighbours shrinks to at most the gap, text read side by side
// stays side by side, and distances below the gap stay true; positions stay far below
// stream's, so the same input ends at a lower position.
TEST(PotPositions, GapsShrinkEveryCutAndKeepRunsTogether) {
  auto e = make_engine(tiny_model_with_context(1 << 20));
  const PromptParts parts = e->prompt_parts("", document(60), kQuestion);
  const PotRun stream = run_with(*e, parts, PositionRule::Stream, 48, 6);
  const PotRun run = run_with(*e, parts, PositionRule::Gaps, 48, 6, 5);
  ASSERT_GE(run.stats.cycles, 3);
  EXPECT_GE(run.stats.repositioned, 1);
  EXPECT_LT(run.stats.max_position, stream.stats.max_position);
  bool capped = false;
  for_each_neighbour(*e, [&](int d, int read, const std::string& where) {
    ASSERT_GE(d, 1) << where;
    ASSERT_LE(d, 5) << where;
    // Cuts narrower than the gap are never touched, however many distillations follow.
    if (read < 5) ASSERT_EQ(d, read) << "a short distance stays true, " << where;
    capped = capped || (read > 5 && d == 5);
  });
  EXPECT_TRUE(capped) << "some cut was wider than the gap and shrank to it";
}

}  // namespace
}  // namespace infinipot
