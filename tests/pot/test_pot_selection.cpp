// The memory pot's host-side decisions, no device: which KV entries survive a distillation
// (select_survivors, pot/selection.h), the policy names, and how MemoryPot::resolve checks a
// layout before any device work (pot/memory_pot.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "pot/memory_pot.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Scores of a small case, one row per head (stride = row length). Pinned slots carry a
// score far above the rest, so a selection that treated them as candidates would pick them
// a second time and lose a place.
struct Case {
  int pinned = 0, keep = 0, nuc_slots = 0, pool = 0;
  std::vector<std::vector<float>> mass, nuc;  // [head][slot]
  PotPolicy policy = PotPolicy::InfiniPot;

  std::vector<int> run() const {
    flat_mass.clear();
    flat_nuc.clear();
    for (const auto& row : mass) flat_mass.insert(flat_mass.end(), row.begin(), row.end());
    for (const auto& row : nuc) flat_nuc.insert(flat_nuc.end(), row.begin(), row.end());
    SelectionRequest r;
    r.n_heads = static_cast<int>(mass.size());
    r.size = static_cast<int>(mass[0].size());
    r.stride = r.size;
    r.pinned = pinned;
    r.keep = keep;
    r.nuc_slots = nuc_slots;
    r.pool = pool;
    r.policy = policy;
    r.mass = flat_mass.data();
    r.nuc = flat_nuc.empty() ? nullptr : flat_nuc.data();
    return select_survivors(r);
  }
  mutable std::vector<float> flat_mass, flat_nuc;
};

using Rows = std::vector<std::vector<int>>;
std::vector<int> flatten(const Rows& rows) {
  std::vector<int> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

// Head A and head B rank the same slots in opposite ways; pinned slots 0 and 1 score 100.
//   slot:   0    1    2  3  4  5  6  7
const std::vector<float> kNucA{100, 100, 9, 8, 7, 1, 2, 3};
const std::vector<float> kMassA{100, 100, 1, 2, 3, 9, 8, 7};
const std::vector<float> kNucB{100, 100, 1, 2, 3, 9, 8, 7};
const std::vector<float> kMassB{100, 100, 9, 8, 7, 1, 2, 3};

Case two_heads(int nuc_slots) {
  Case c;
  c.pinned = 2;
  c.keep = 5;  // 3 free places
  c.nuc_slots = nuc_slots;
  c.nuc = {kNucA, kNucB};
  c.mass = {kMassA, kMassB};
  return c;
}

TEST(PotSelection, NucFirstThenCapPerHead) {
  // One NuC place: A takes its most novel slot 2, then its two highest-mass slots 5 and 6;
  // B takes its most novel slot 5, then its highest-mass slots 2 and 3.
  EXPECT_EQ(two_heads(1).run(), flatten({{0, 1, 2, 5, 6}, {0, 1, 2, 3, 5}}));
  // Two NuC places: A: 2, 3 by novelty, 5 by mass. B: 5, 6 by novelty, 2 by mass.
  EXPECT_EQ(two_heads(2).run(), flatten({{0, 1, 2, 3, 5}, {0, 1, 2, 5, 6}}));
}

TEST(PotSelection, CapOnlyAndNucOnly) {
  // nuc_slots = 0: all free places by mass; nuc may be absent.
  Case cap = two_heads(0);
  EXPECT_EQ(cap.run(), flatten({{0, 1, 5, 6, 7}, {0, 1, 2, 3, 4}}));
  cap.nuc.clear();
  EXPECT_EQ(cap.run(), flatten({{0, 1, 5, 6, 7}, {0, 1, 2, 3, 4}}));
  // nuc_slots = keep - pinned: all free places by novelty.
  EXPECT_EQ(two_heads(3).run(), flatten({{0, 1, 2, 3, 4}, {0, 1, 5, 6, 7}}));
}

TEST(PotSelection, CapFillsFromWhatNucLeft) {
  // Slot 3 is both the most novel and the highest-mass entry: NuC takes it, and CaP's two
  // places go to the next-highest mass (4 and 6), not to slot 3 again.
  Case c;
  c.pinned = 2;
  c.keep = 5;
  c.nuc_slots = 1;
  c.nuc = {{100, 100, 1, 9, 2, 3, 4, 5}};
  c.mass = {{100, 100, 1, 9, 8, 2, 7, 3}};
  EXPECT_EQ(c.run(), (std::vector<int>{0, 1, 3, 4, 6}));
}

TEST(PotSelection, PinnedAlwaysKeptEvenWithTheLowestScores) {
  Case c;
  c.pinned = 3;
  c.keep = 4;
  c.nuc_slots = 0;
  c.mass = {{-kInf, kNaN, -1e30f, 0, 1, 2}, {kNaN, kNaN, kNaN, 5, 4, 3}};
  EXPECT_EQ(c.run(), flatten({{0, 1, 2, 5}, {0, 1, 2, 3}}));
  c.keep = 3;  // keep == pinned: only the prefix
  EXPECT_EQ(c.run(), flatten({{0, 1, 2}, {0, 1, 2}}));
}

TEST(PotSelection, TiesGoToTheLaterSlot) {
  Case c;
  c.pinned = 1;
  c.keep = 3;
  c.mass = {{0, 1, 1, 1, 1, 1}};  // all equal: the two latest
  EXPECT_EQ(c.run(), (std::vector<int>{0, 4, 5}));
  c.mass = {{0, 5, 2, 2, 2, 1}};  // 1 is best; 2, 3, 4 tie for the last place: 4
  EXPECT_EQ(c.run(), (std::vector<int>{0, 1, 4}));
  // The same for NuC: 2 and 4 tie for the NuC place and 4 wins; mass then takes 2 (9).
  // Had NuC taken 2, mass would take 1 (5): {0, 1, 2}.
  c.nuc_slots = 1;
  c.nuc = {{0, 0, 7, 0, 7, 0}};
  c.mass = {{0, 5, 9, 0, 0, 0}};
  EXPECT_EQ(c.run(), (std::vector<int>{0, 2, 4}));
}

TEST(PotSelection, NanRanksBelowEveryNumber) {
  Case c;
  c.pinned = 1;
  c.keep = 3;
  c.mass = {{0, kNaN, kNaN, 0.1f, -5, kNaN}};
  EXPECT_EQ(c.run(), (std::vector<int>{0, 3, 4}));
  c.mass = {{0, kNaN, -kInf, kNaN, kNaN}};  // even -inf beats NaN
  c.keep = 2;
  EXPECT_EQ(c.run(), (std::vector<int>{0, 2}));
  // NuC: NaN novelty (tokens never scored) loses to any number.
  c.keep = 3;
  c.nuc_slots = 1;
  c.nuc = {{0, kNaN, kNaN, -3, kNaN}};
  c.mass = {{0, 9, 1, 0, 1}};
  EXPECT_EQ(c.run(), (std::vector<int>{0, 1, 3}));  // NuC 3, mass 1
}

TEST(PotSelection, PoolingKeepsTheNeighboursOfAPeakButNeverReachesIntoThePrefix) {
  // Slot 6 has a mass peak; the pinned slots have a higher one next to slot 2.
  //   slot:    0     1     2    3    4  5  6  7  8    9
  Case c;
  c.pinned = 2;
  c.keep = 5;
  c.mass = {{1000, 1000, 0.1f, 0.2f, 0, 0, 9, 0, 0.3f, 0}};
  // Without pooling: 6 (9), 8 (0.3), 3 (0.2).
  EXPECT_EQ(c.run(), (std::vector<int>{0, 1, 3, 6, 8}));
  // pool 1: slots 5, 6, 7 all pool to 9 (slot 2 pools to 0.2 only: the prefix's 1000 is
  // outside the candidates' window).
  c.pool = 1;
  EXPECT_EQ(c.run(), (std::vector<int>{0, 1, 5, 6, 7}));
  // NuC scores are pooled the same way.
  c.nuc_slots = 3;
  c.nuc = c.mass;
  c.mass = {std::vector<float>(10, 0.0f)};
  EXPECT_EQ(c.run(), (std::vector<int>{0, 1, 5, 6, 7}));
  // pool 2: 4..8 pool to 9; ties go to the later slots 6, 7, 8.
  c.pool = 2;
  EXPECT_EQ(c.run(), (std::vector<int>{0, 1, 6, 7, 8}));
}

TEST(PotSelection, RecentKeepsPrefixAndLatestWithoutScores) {
  SelectionRequest r;
  r.n_heads = 3;
  r.size = 10;
  r.stride = 12;
  r.pinned = 3;
  r.keep = 6;
  r.policy = PotPolicy::Recent;  // no mass, no nuc needed
  const auto got = select_survivors(r);
  EXPECT_EQ(got, flatten({{0, 1, 2, 7, 8, 9}, {0, 1, 2, 7, 8, 9}, {0, 1, 2, 7, 8, 9}}));
  r.pinned = 0;
  r.keep = 1;
  EXPECT_EQ(select_survivors(r), (std::vector<int>{9, 9, 9}));
}

TEST(PotSelection, InvalidRequestsAreRefused) {
  std::vector<float> mass(16, 1.0f), nuc(16, 1.0f);
  auto valid = [&] {
    SelectionRequest r;
    r.n_heads = 2;
    r.size = 8;
    r.stride = 8;
    r.pinned = 2;
    r.keep = 5;
    r.nuc_slots = 1;
    r.mass = mass.data();
    r.nuc = nuc.data();
    return r;
  };
  EXPECT_NO_THROW(select_survivors(valid()));
  auto refused = [&](auto&& change) {
    SelectionRequest r = valid();
    change(r);
    EXPECT_THROW(select_survivors(r), std::invalid_argument);
  };
  refused([](SelectionRequest& r) { r.keep = 9; });                          // keep > size
  refused([](SelectionRequest& r) { r.pinned = 6; });                        // pinned > keep
  refused([](SelectionRequest& r) { r.pinned = -1; });
  refused([](SelectionRequest& r) { r.nuc_slots = 4; });                     // > keep - pinned
  refused([](SelectionRequest& r) { r.nuc_slots = -1; });
  refused([](SelectionRequest& r) { r.pool = -1; });
  refused([](SelectionRequest& r) { r.mass = nullptr; });                    // infinipot needs mass
  refused([](SelectionRequest& r) { r.nuc = nullptr; });                     // ... and nuc for NuC places
  refused([](SelectionRequest& r) { r.n_heads = 0; });
  refused([](SelectionRequest& r) { r.stride = 7; });                        // rows shorter than size
  refused([](SelectionRequest& r) { r.policy = PotPolicy::Recent; r.keep = 9; });
}

// ---- randomized check against a brute-force reference ----------------------------------

// The documented order: higher score first, NaN below every number, ties to the later slot.
bool before(float x, int a, float y, int b) {
  const bool xn = std::isnan(x), yn = std::isnan(y);
  if (xn != yn) return yn;
  if (!xn && x != y) return x > y;
  return a > b;
}

// Max over the candidates [lo, hi) within w of j; NaN only if all of them are NaN.
float pooled(const float* s, int j, int lo, int hi, int w) {
  float best = kNaN;
  for (int k = std::max(lo, j - w); k <= std::min(hi - 1, j + w); ++k)
    if (!std::isnan(s[k]) && (std::isnan(best) || s[k] > best)) best = s[k];
  return best;
}

std::vector<int> reference(const SelectionRequest& r) {
  std::vector<int> out;
  for (int h = 0; h < r.n_heads; ++h) {
    std::vector<int> kept(r.pinned);
    std::iota(kept.begin(), kept.end(), 0);
    if (r.policy == PotPolicy::Recent) {
      for (int s = r.size - (r.keep - r.pinned); s < r.size; ++s) kept.push_back(s);
    } else {
      std::vector<float> m(r.size, kNaN), n(r.size, kNaN);
      for (int s = r.pinned; s < r.size; ++s) {
        const float* mrow = r.mass + size_t(h) * r.stride;
        const float* nrow = r.nuc ? r.nuc + size_t(h) * r.stride : nullptr;
        m[s] = r.pool ? pooled(mrow, s, r.pinned, r.size, r.pool) : mrow[s];
        if (nrow) n[s] = r.pool ? pooled(nrow, s, r.pinned, r.size, r.pool) : nrow[s];
      }
      std::vector<int> cand(r.size - r.pinned);
      std::iota(cand.begin(), cand.end(), r.pinned);
      std::sort(cand.begin(), cand.end(), [&](int a, int b) { return before(n[a], a, n[b], b); });
      kept.insert(kept.end(), cand.begin(), cand.begin() + r.nuc_slots);
      cand.erase(cand.begin(), cand.begin() + r.nuc_slots);
      std::sort(cand.begin(), cand.end(), [&](int a, int b) { return before(m[a], a, m[b], b); });
      kept.insert(kept.end(), cand.begin(), cand.begin() + (r.keep - r.pinned - r.nuc_slots));
    }
    std::sort(kept.begin(), kept.end());
    out.insert(out.end(), kept.begin(), kept.end());
  }
  return out;
}

TEST(PotSelection, MatchesBruteForceOnRandomRequests) {
  int checked = 0;
  for (uint32_t seed = 1; seed <= 600; ++seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    SelectionRequest r;
    r.n_heads = uni(1, 4);
    r.size = uni(1, 48);
    r.stride = r.size + uni(0, 5);
    r.pinned = uni(0, std::min(r.size, 6));
    r.keep = uni(r.pinned, r.size);
    r.nuc_slots = uni(0, r.keep - r.pinned);
    r.pool = std::max(0, uni(-3, 3));
    r.policy = uni(0, 7) == 0 ? PotPolicy::Recent : PotPolicy::InfiniPot;
    // Scores from a few levels, so ties are common; some NaN and infinities. Padding past
    // size holds huge values that no selection or pooling may see.
    std::vector<float> mass(size_t(r.n_heads) * r.stride, 1e30f), nuc(mass.size(), 1e30f);
    for (int h = 0; h < r.n_heads; ++h)
      for (int s = 0; s < r.size; ++s)
        for (auto* v : {&mass, &nuc}) {
          const int k = uni(0, 19);
          (*v)[size_t(h) * r.stride + s] = k == 0 ? kNaN : k == 1 ? -kInf : k == 2 ? kInf : float(uni(-3, 3)) * 0.5f;
        }
    r.mass = mass.data();
    r.nuc = (r.nuc_slots == 0 && uni(0, 1)) ? nullptr : nuc.data();
    const auto got = select_survivors(r);
    ASSERT_EQ(got.size(), size_t(r.n_heads) * r.keep) << "seed " << seed;
    for (int h = 0; h < r.n_heads; ++h) {
      const int* row = got.data() + size_t(h) * r.keep;
      for (int j = 0; j < r.keep; ++j) {
        ASSERT_TRUE(row[j] >= 0 && row[j] < r.size) << "seed " << seed;
        if (j < r.pinned) ASSERT_EQ(row[j], j) << "seed " << seed;
        if (j > 0) ASSERT_LT(row[j - 1], row[j]) << "seed " << seed << ": not ascending";
      }
    }
    ASSERT_EQ(got, reference(r)) << "seed " << seed << " heads " << r.n_heads << " size " << r.size << " pinned "
                                 << r.pinned << " keep " << r.keep << " nuc " << r.nuc_slots << " pool " << r.pool;
    ++checked;
  }
  EXPECT_EQ(checked, 600);
}

// ---- policy names -------------------------------------------------------------------------

TEST(PotPolicyName, ParsesBothPoliciesAndRefusesOthers) {
  EXPECT_EQ(parse_pot_policy("infinipot"), PotPolicy::InfiniPot);
  EXPECT_EQ(parse_pot_policy("recent"), PotPolicy::Recent);
  EXPECT_STREQ(pot_policy_name(PotPolicy::InfiniPot), "infinipot");
  EXPECT_STREQ(pot_policy_name(PotPolicy::Recent), "recent");
  for (const char* bad : {"", "Recent", "INFINIPOT", "snapkv", "recent ", "infinipot\n"}) {
    try {
      parse_pot_policy(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--pot-policy"), std::string::npos) << e.what();
    }
  }
}

// ---- MemoryPot::resolve -------------------------------------------------------------------

PotOptions pot(int capacity, int keep = 0, float nuc_ratio = 0.5f) {
  PotOptions o;
  o.capacity = capacity;
  o.keep = keep;
  o.nuc_ratio = nuc_ratio;
  return o;
}

// The message of the std::invalid_argument resolve throws ("" and a failure if none).
std::string refusal(const PotOptions& o, const PotLayout& l) {
  try {
    const PotOptions r = MemoryPot::resolve(o, l);
    ADD_FAILURE() << "accepted capacity " << o.capacity << " keep " << r.keep;
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(PotResolve, DefaultKeepIsHalfThePotButAboveThePrefix) {
  EXPECT_EQ(MemoryPot::resolve(pot(100), {10, 5, 1000, 10}).keep, 50);
  EXPECT_EQ(MemoryPot::resolve(pot(101), {10, 5, 1000, 10}).keep, 50);
  EXPECT_EQ(MemoryPot::resolve(pot(20), {12, 2, 100, 5}).keep, 13);  // capacity/2 = 10 <= pinned
  const PotOptions r = MemoryPot::resolve(pot(100, 40, 0.25f), {10, 5, 1000, 10});
  EXPECT_EQ(r.keep, 40);  // an explicit keep stays
  EXPECT_EQ(r.capacity, 100);
  EXPECT_EQ(r.nuc_ratio, 0.25f);
}

TEST(PotResolve, PotTooSmallForPrefixAndCatalyst) {
  const std::string msg = refusal(pot(16), {10, 5, 1000, 1});  // needs 10 + 5 + 2 = 17
  EXPECT_TRUE(has(msg, "chat prefix")) << msg;
  EXPECT_TRUE(has(msg, "catalyst prompt")) << msg;
  EXPECT_TRUE(has(msg, "--pot 17")) << msg;
  EXPECT_EQ(MemoryPot::resolve(pot(17), {10, 5, 1000, 1}).keep, 11);  // the smallest that works
  EXPECT_FALSE(refusal(pot(0), {0, 0, 10, 1}).empty());
  EXPECT_FALSE(refusal(pot(-5), {0, 0, 10, 1}).empty());
}

TEST(PotResolve, KeepMustLeaveRoomBothWays) {
  const PotLayout L{10, 5, 1000, 10};
  std::string msg = refusal(pot(100, 100), L);
  EXPECT_TRUE(has(msg, "must be below --pot 100")) << msg;
  EXPECT_TRUE(has(refusal(pot(100, 150), L), "must be below --pot")) << "keep above capacity";
  msg = refusal(pot(100, 10), L);  // keep == pinned
  EXPECT_TRUE(has(msg, "--keep 10")) << msg;
  EXPECT_TRUE(has(msg, "--keep 11")) << msg;
  EXPECT_FALSE(refusal(pot(100, 5), L).empty());  // keep < pinned
  EXPECT_EQ(MemoryPot::resolve(pot(100, 11), L).keep, 11);
  // keep + catalyst must stay below capacity: 70 + 30 = 100 does not, 69 + 30 does.
  const PotLayout big_catalyst{10, 30, 1000, 10};
  msg = refusal(pot(100, 70), big_catalyst);
  EXPECT_TRUE(has(msg, "catalyst")) << msg;
  EXPECT_TRUE(has(msg, "--keep 69")) << msg;
  EXPECT_EQ(MemoryPot::resolve(pot(100, 69), big_catalyst).keep, 69);
}

TEST(PotResolve, FinalPartMustFitAfterDistilling) {
  // keep 50 + final 51 > 100 when the body overflows the pot.
  const std::string msg = refusal(pot(100, 50), {10, 5, 1000, 51});
  EXPECT_TRUE(has(msg, "--pot 100")) << msg;
  EXPECT_TRUE(has(msg, "101")) << msg;  // the pot that would hold it
  EXPECT_EQ(MemoryPot::resolve(pot(100, 50), {10, 5, 1000, 50}).keep, 50);
  // A prompt that fits whole never distills: a large final part is fine then
  // (10 + 20 + 70 = 100 <= 100), but one more body token makes it overflow.
  EXPECT_EQ(MemoryPot::resolve(pot(100, 50), {10, 5, 20, 70}).keep, 50);
  EXPECT_FALSE(refusal(pot(100, 50), {10, 5, 21, 70}).empty());
}

TEST(PotResolve, NucRatioMustLieInZeroOne) {
  const PotLayout L{10, 5, 1000, 10};
  for (float bad : {-0.01f, 1.01f, kNaN, kInf}) {
    const std::string msg = refusal(pot(100, 0, bad), L);
    EXPECT_TRUE(has(msg, "--nuc-ratio")) << bad << ": " << msg;
  }
  EXPECT_NO_THROW(MemoryPot::resolve(pot(100, 0, 0.0f), L));
  EXPECT_NO_THROW(MemoryPot::resolve(pot(100, 0, 1.0f), L));
}

}  // namespace
}  // namespace infinipot
