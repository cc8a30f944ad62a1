// --keep auto: each distillation keeps as many entries as its scores justify (the fewest
// holding a share of their mass, pot/selection.h keep_by_mass), between a quarter of the pot
// and `keep` (three quarters by default). The rule on hand-made scores, the settings that name
// it (resolve, policy entries, snapshots), and real runs through the binary.
#include <cmath>
#include <limits>

#include "pot/memory_pot.h"
#include "pot/policy_spec.h"
#include "pot/selection.h"
#include "tests/pot/cli_pot_fixture.h"

namespace infinipot {
namespace {

using namespace test_cli_pot;

// One layer, one head, `n` slots with the given novelty row; a plan of one novelty stage with
// no spread, so the mass is the row itself.
struct OneRow {
  std::vector<float> novelty;
  PotScores s;
  ChoicePlan plan;
  OneRow(std::vector<float> row, int pinned) : novelty(std::move(row)) {
    s.n_layers = s.n_heads = 1;
    s.stride = s.size = static_cast<int>(novelty.size());
    s.pinned = pinned;
    s.keep = s.size - 1;
    s.novelty = novelty.data();
    plan.stages = {{Measure::Novelty, 1}};
  }
};

TEST(KeepByMass, ConcentratedScoresKeepFewAndFlatScoresKeepMany) {
  // 2 pinned + 20 free slots. Two slots hold 90% of the mass: keep 2 + 2 = 4.
  std::vector<float> peaked(22, 0.1f);
  peaked[7] = 9.0f, peaked[15] = 9.0f;  // 18 of 18 + 18 * 0.1 = 19.8: 0.909
  OneRow a(peaked, 2);
  EXPECT_EQ(keep_by_mass(a.s, a.plan, 0.9f, 1, 21), 4);
  // Flat: 90% of the mass needs 18 of the 20 free slots.
  OneRow b(std::vector<float>(22, 1.0f), 2);
  EXPECT_EQ(keep_by_mass(b.s, b.plan, 0.9f, 1, 21), 20);
  // A share of 1 takes every free slot with mass; the bounds clamp either way.
  EXPECT_EQ(keep_by_mass(b.s, b.plan, 1.0f, 1, 21), 21);
  EXPECT_EQ(keep_by_mass(a.s, a.plan, 0.9f, 10, 21), 10);
  EXPECT_EQ(keep_by_mass(b.s, b.plan, 0.9f, 1, 12), 12);
}

TEST(KeepByMass, PinnedSlotsNaNAndNegativeScoresCarryNoMass) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // The pinned slots' huge scores and the NaN / negative ones count for nothing: the mass is
  // slots 5 (3) and 6 (1); 0.7 of it is slot 5 alone.
  OneRow r({100.f, 100.f, nan, -5.f, 0.f, 3.f, 1.f, nan}, 2);
  EXPECT_EQ(keep_by_mass(r.s, r.plan, 0.7f, 1, 7), 3);
  EXPECT_EQ(keep_by_mass(r.s, r.plan, 0.8f, 1, 7), 4);
  // No mass at all (every score NaN or zero), or a plan without stages: the most.
  OneRow none({1.f, nan, 0.f, nan}, 1);
  EXPECT_EQ(keep_by_mass(none.s, none.plan, 0.9f, 1, 3), 3);
  ChoicePlan empty;
  EXPECT_EQ(keep_by_mass(r.s, empty, 0.9f, 1, 6), 6);
  EXPECT_THROW(keep_by_mass(r.s, r.plan, 0.9f, 5, 4), std::invalid_argument);
}

TEST(KeepByMass, SpreadWidensAPeakToItsWindowAndStagesMixByTheirCounts) {
  // One peak at slot 10 of 20 free; with back 2 / fwd 1 the slots that see it are 9..12.
  std::vector<float> row(21, 0.0f);
  row[10] = 5.0f;
  OneRow r(row, 1);
  r.plan.shape.back = 2, r.plan.shape.fwd = 1;
  EXPECT_EQ(keep_by_mass(r.s, r.plan, 1.0f, 1, 20), 1 + 4);
  // Two stages: novelty on slot 3, the catalyst on slots 5 and 6, weighted 1 : 3. The mix is
  // 0.375 on each catalyst slot and 0.25 on the novelty slot: half or three quarters of it
  // takes the two catalyst slots, more takes all three.
  std::vector<float> nov(9, 0.0f), cat(9, 0.0f);
  nov[3] = 2.0f, cat[5] = 1.0f, cat[6] = 1.0f;
  PotScores s;
  s.n_layers = s.n_heads = 1, s.stride = s.size = 9, s.pinned = 1, s.keep = 8;
  s.novelty = nov.data(), s.catalyst = cat.data();
  ChoicePlan plan;
  plan.stages = {{Measure::Novelty, 1}, {Measure::Catalyst, 3}};
  EXPECT_EQ(keep_by_mass(s, plan, 0.5f, 1, 8), 1 + 2);
  EXPECT_EQ(keep_by_mass(s, plan, 0.75f, 1, 8), 1 + 2);
  EXPECT_EQ(keep_by_mass(s, plan, 0.8f, 1, 8), 1 + 3);
  // A stage the pot did not measure is refused.
  s.catalyst = nullptr;
  EXPECT_THROW(keep_by_mass(s, plan, 0.5f, 1, 8), std::invalid_argument);
}

TEST(KeepAuto, ResolveMakesKeepTheMostAndRefusesABadShare) {
  PotOptions o;
  o.capacity = 1024;
  o.keep_auto = true;
  EXPECT_EQ(MemoryPot::resolve(o, {24, 20, 100000, 40}).keep, 768);  // three quarters
  o.keep = 600;
  EXPECT_EQ(MemoryPot::resolve(o, {24, 20, 100000, 40}).keep, 600);  // an explicit most stays
  o.keep = 0;
  EXPECT_EQ(MemoryPot::resolve(o, {24, 20, 100000, 400}).keep, 1024 - 400);  // room for the answer
  o.keep_mass = 0.0f;
  EXPECT_THROW(MemoryPot::resolve(o, {24, 20, 100000, 40}), SettingError);
  o.keep_mass = 1.5f;
  EXPECT_THROW(MemoryPot::resolve(o, {24, 20, 100000, 40}), SettingError);
}

TEST(KeepAuto, PolicyEntriesNameItAndSnapshotsKeepIt) {
  const PolicySpec a = parse_policy_spec("infinipot:keep=auto", 256);
  EXPECT_TRUE(a.keep_auto);
  EXPECT_EQ(a.keep, 0);
  EXPECT_EQ(a.config(), "infinipot:pot=256:keep=auto");
  EXPECT_TRUE(a.options().keep_auto);
  const PolicySpec b = parse_policy_spec("infinipot:keep=auto:keep_mass=0.8", 256);
  EXPECT_FLOAT_EQ(b.keep_mass, 0.8f);
  EXPECT_EQ(b.config(), "infinipot:pot=256:keep=auto:keep_mass=0.8");
  EXPECT_EQ(parse_policy_spec(b.config()).config(), b.config());  // the canonical text reads back
  // --keep auto as the list's default, and a later keep=N overriding it.
  EXPECT_TRUE(parse_policy_spec("infinipot", 256, kKeepAuto).keep_auto);
  EXPECT_FALSE(parse_policy_spec("infinipot:keep=100", 256, kKeepAuto).keep_auto);
  EXPECT_FALSE(parse_policy_spec("full", 256, kKeepAuto).keep_auto);
  // keep_mass without auto, or out of (0, 1], is refused naming the fix.
  auto message = [](const std::string& entry) {
    try {
      (void)parse_policy_spec(entry, 256);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message("infinipot:keep_mass=0.8").find("add keep=auto"), std::string::npos);
  EXPECT_NE(message("infinipot:keep=auto:keep_mass=0").find("a share in (0, 1]"), std::string::npos);
  EXPECT_NE(message("infinipot:keep=often").find("or auto"), std::string::npos);
  // The snapshot's settings carry it; one written before it reads as a fixed keep.
  PotOptions o = b.options();
  o.keep = 192;
  const PotOptions back = MemoryPot::options_from_settings(MemoryPot::settings_json(o));
  EXPECT_TRUE(back.keep_auto);
  EXPECT_FLOAT_EQ(back.keep_mass, 0.8f);
  nlohmann::json old = MemoryPot::settings_json(o);
  old.erase("keep_auto");
  old.erase("keep_mass");
  EXPECT_FALSE(MemoryPot::options_from_settings(old).keep_auto);
}

TEST_F(CliPot, KeepAutoKeepsBetweenAQuarterAndThreeQuartersAndAnswers) {
  const json j = run_json({"-f", long_doc_, "-q", "Which bridge?", "--pot", "256", "--keep", "auto", "-n", "4"});
  ASSERT_TRUE(j.contains("pot")) << last_.describe();
  const json& pot = j["pot"];
  EXPECT_TRUE(pot.at("keep_auto").get<bool>());
  EXPECT_EQ(pot.at("keep").get<int>(), 192) << "the most a distillation keeps";
  ASSERT_GE(pot.at("cycles").get<int>(), 2) << last_.describe();
  const int least = pot.at("kept_least").get<int>(), most = pot.at("kept_most").get<int>();
  EXPECT_GE(least, 64);
  EXPECT_LE(most, 192);
  EXPECT_LE(least, most);
  const double mean = pot.at("kept_mean").get<double>();
  EXPECT_GE(mean, least);
  EXPECT_LE(mean, most);
  EXPECT_GT(j.at("generated_tokens").get<int>(), 0);
  // The fixed default reports itself as fixed, every cycle keeping half.
  const json f = run_json({"-f", long_doc_, "-q", "Which bridge?", "--pot", "256", "-n", "4"});
  ASSERT_TRUE(f.contains("pot")) << last_.describe();
  EXPECT_FALSE(f["pot"].at("keep_auto").get<bool>());
  EXPECT_EQ(f["pot"].at("kept_least").get<int>(), 128);
  EXPECT_EQ(f["pot"].at("kept_most").get<int>(), 128);
}

TEST_F(CliPot, KeepTakesACountOrAutoAndNothingElse) {
  for (const std::string bad : {"often", "0", "12x", "99999999999"})
    EXPECT_TRUE(fails_cleanly(run({"-f", long_doc_, "--pot", "256", "--keep", bad}, kQuick),
                              {"--keep", "1..16777216 or auto", bad}, 2, kQuick));
}

}  // namespace
}  // namespace infinipot
