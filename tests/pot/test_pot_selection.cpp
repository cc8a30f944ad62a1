// The memory pot's host-side decisions, no device: the selection steps every policy is built
// from (spread_scores, take_best, choose_survivors; pot/selection.h), checked against a
// brute-force reference on many random cases and on hand-worked ones, and how
// MemoryPot::resolve checks a layout before any device work (pot/memory_pot.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pot/memory_pot.h"
#include "pot/policy_registry.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Bit-for-bit float equality that treats NaN as equal to NaN.
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

std::vector<float> spread(const std::vector<float>& in, const std::vector<int>* unit, int lo, int hi, int back, int fwd) {
  std::vector<float> out(in.size(), -12345.0f);  // a sentinel: slots outside [lo, hi) must stay untouched
  spread_scores(in.data(), unit ? unit->data() : nullptr, lo, hi, back, fwd, out.data());
  return out;
}

::testing::AssertionResult same_floats(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], want[i]))
      return ::testing::AssertionFailure() << "slot " << i << ": got " << got[i] << ", want " << want[i];
  return ::testing::AssertionSuccess();
}

// ---- spread_scores, by hand ---------------------------------------------------------------

TEST(SpreadScores, BackLooksAtEarlierSlotsAndFwdAtLaterOnes) {
  //                          0  1  2  3  4  5  6  7
  const std::vector<float> in{0, 0, 0, 9, 0, 0, 0, 0};
  // back 2: slot j takes the best of [j-2, j]: the peak reaches the two slots AFTER it.
  EXPECT_TRUE(same_floats(spread(in, nullptr, 0, 8, 2, 0), {0, 0, 0, 9, 9, 9, 0, 0}));
  // fwd 2: slot j takes the best of [j, j+2]: the peak reaches the two slots BEFORE it.
  EXPECT_TRUE(same_floats(spread(in, nullptr, 0, 8, 0, 2), {0, 9, 9, 9, 0, 0, 0, 0}));
  // Both, unequal: one before, three after.
  EXPECT_TRUE(same_floats(spread(in, nullptr, 0, 8, 3, 1), {0, 0, 9, 9, 9, 9, 9, 0}));
  // No window: a copy.
  EXPECT_TRUE(same_floats(spread(in, nullptr, 0, 8, 0, 0), in));
}

TEST(SpreadScores, StaysInsideLoHiAndLeavesTheRestUntouched) {
  //                          0    1  2  3  4  5
  const std::vector<float> in{100, 1, 2, 0, 0, 50};
  // [1, 5): slot 0's 100 and slot 5's 50 are outside: never seen, never written.
  EXPECT_TRUE(same_floats(spread(in, nullptr, 1, 5, 2, 2), {-12345.0f, 2, 2, 2, 2, -12345.0f}));
  EXPECT_TRUE(same_floats(spread(in, nullptr, 1, 5, 1, 0), {-12345.0f, 1, 2, 2, 0, -12345.0f}));
  // Empty range: nothing written.
  EXPECT_TRUE(same_floats(spread(in, nullptr, 3, 3, 2, 2), std::vector<float>(6, -12345.0f)));
}

TEST(SpreadScores, NanOnlyWhereTheWholeWindowIsNan) {
  //                          0  1     2  3     4     5
  const std::vector<float> in{1, kNaN, 5, kNaN, kNaN, -kInf};
  EXPECT_TRUE(same_floats(spread(in, nullptr, 0, 6, 1, 0), {1, 1, 5, 5, kNaN, -kInf}));
  EXPECT_TRUE(same_floats(spread(in, nullptr, 0, 6, 0, 1), {1, 5, 5, kNaN, -kInf, -kInf}));
  // lo = 1 hides slot 0: slot 1's window [0, 1] is [1, 1] inside the range: NaN.
  EXPECT_TRUE(same_floats(spread(in, nullptr, 1, 6, 1, 0), {-12345.0f, kNaN, 5, 5, kNaN, -kInf}));
}

TEST(SpreadScores, UnitsWidenTheWindowToTheWholeRun) {
  // Slots 2..6 are one five-digit run (unit 12: the stream index where it starts); one of its
  // digits (slot 4) scores high, and every digit of the run takes that score.
  //                           0  1  2  3  4  5  6  7  8
  const std::vector<float> in{0, 1, 0, 0, 7, 0, 0, 2, 0};
  const std::vector<int> unit{10, 11, 12, 12, 12, 12, 12, 17, 18};
  EXPECT_TRUE(same_floats(spread(in, &unit, 0, 9, 0, 0), {0, 1, 7, 7, 7, 7, 7, 2, 0}));
  // back 1 around the run: slot 1 joins the run's window; the slot after the run (7) sees
  // slot 6's raw 0 and its own 2, not the run's 7.
  EXPECT_TRUE(same_floats(spread(in, &unit, 0, 9, 1, 0), {0, 1, 7, 7, 7, 7, 7, 2, 2}));
  // fwd 1: the run reaches slot 7's 2 (less than its 7); slot 1 sees slot 2's raw 0.
  EXPECT_TRUE(same_floats(spread(in, &unit, 0, 9, 0, 1), {1, 1, 7, 7, 7, 7, 7, 2, 0}));
  // A run is cut at lo and hi: with lo = 4 the run is slots 4..6 only; with hi = 4, 2..3.
  EXPECT_TRUE(same_floats(spread(in, &unit, 0, 4, 0, 0), {0, 1, 0, 0, -12345.0f, -12345.0f, -12345.0f, -12345.0f, -12345.0f}));
  EXPECT_TRUE(same_floats(spread(in, &unit, 4, 9, 0, 0), {-12345.0f, -12345.0f, -12345.0f, -12345.0f, 7, 7, 7, 2, 0}));
  // Equal unit values that are not adjacent are two runs (a unit is a run of adjacent slots).
  const std::vector<int> split{5, 5, 6, 5, 5};
  EXPECT_TRUE(same_floats(spread({9, 0, 0, 0, 1}, &split, 0, 5, 0, 0), {9, 9, 0, 1, 1}));
}

// ---- take_best, by hand -------------------------------------------------------------------

std::vector<int> marked(const std::vector<char>& taken) {
  std::vector<int> out;
  for (size_t i = 0; i < taken.size(); ++i)
    if (taken[i]) out.push_back(static_cast<int>(i));
  return out;
}

TEST(TakeBest, HigherFirstNanLastTiesToTheLaterSlot) {
  //                             0  1     2  3  4     5  6
  const std::vector<float> score{3, kNaN, 1, 3, -kInf, 3, kNaN};
  std::vector<char> taken(7, 0);
  EXPECT_EQ(take_best(score.data(), 0, 7, 2, taken), 2);
  EXPECT_EQ(marked(taken), (std::vector<int>{3, 5}));  // three tie at 3: the two latest
  EXPECT_EQ(take_best(score.data(), 0, 7, 2, taken), 2);
  EXPECT_EQ(marked(taken), (std::vector<int>{0, 2, 3, 5}));  // then 0 (3), 2 (1)
  EXPECT_EQ(take_best(score.data(), 0, 7, 1, taken), 1);
  EXPECT_EQ(marked(taken), (std::vector<int>{0, 2, 3, 4, 5}));  // -inf before any NaN
  EXPECT_EQ(take_best(score.data(), 0, 7, 1, taken), 1);
  EXPECT_EQ(marked(taken), (std::vector<int>{0, 2, 3, 4, 5, 6}));  // NaNs: the later first
  // Fewer free than asked: takes what is left and says so.
  EXPECT_EQ(take_best(score.data(), 0, 7, 5, taken), 1);
  EXPECT_EQ(marked(taken), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(take_best(score.data(), 0, 7, 3, taken), 0);
}

TEST(TakeBest, OnlyLooksInsideLoHiAndNeverRetakes) {
  const std::vector<float> score{9, 9, 1, 2, 3, 9};
  std::vector<char> taken{0, 0, 0, 0, 1, 0};  // slot 4 already taken
  EXPECT_EQ(take_best(score.data(), 1, 5, 2, taken), 2);
  EXPECT_EQ(marked(taken), (std::vector<int>{1, 3, 4}));  // 0 and 5 are outside [1, 5)
  EXPECT_EQ(take_best(score.data(), 1, 5, 0, taken), 0);
  EXPECT_EQ(take_best(score.data(), 1, 5, -3, taken), 0);
  EXPECT_EQ(marked(taken), (std::vector<int>{1, 3, 4}));
}

// ---- choose_survivors, by hand ------------------------------------------------------------

// Scores of a small case, [n_layers][n_heads][stride], built by (layer, head).
struct Grid {
  int L, H, stride;
  std::vector<float> v;
  Grid(int l, int h, int s, float fill = 0) : L(l), H(h), stride(s), v(size_t(l) * h * s, fill) {}
  float* row(int l, int h) { return v.data() + (size_t(l) * H + h) * stride; }
  void set(int l, int h, const std::vector<float>& r) { std::copy(r.begin(), r.end(), row(l, h)); }
  void set_all(const std::vector<float>& r) {
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) set(l, h, r);
  }
};

PotScores scores(int L, int H, int stride, int size, int pinned, int keep) {
  PotScores s;
  s.n_layers = L, s.n_heads = H, s.stride = stride, s.size = size, s.pinned = pinned, s.keep = keep;
  return s;
}

// The survivors of (layer, head) in a choose_survivors result.
std::vector<int> of(const std::vector<int>& all, const PotScores& s, int l, int h) {
  const auto b = all.begin() + (size_t(l) * s.n_heads + h) * s.keep;
  return std::vector<int>(b, b + s.keep);
}

TEST(ChooseSurvivors, AFiveDigitRunWithOneHighDigitIsKeptWhole) {
  // "... key is 2 9 7 7 2 ..." read one digit per token: slots 5..9 are one digit run (unit
  // 5). The catalyst attends to the third digit only; with units the run survives whole.
  //      slot:             0  1  2  3  4  5  6  7  8  9  10 11
  const std::vector<float> cap{0, 0, 1, 0, 1, 0, 0, 8, 0, 0, 2, 0};
  std::vector<int> unit{0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 10, 11};
  PotScores s = scores(1, 1, 12, 12, 2, 7);  // 5 free places
  s.unit = unit.data();
  ChoiceShape shape;
  shape.units = true;
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 5}}, shape), (std::vector<int>{0, 1, 5, 6, 7, 8, 9}));
  // Single tokens: the high digit, then 10 (2), then 4 and 2 (1) and the latest 0: 11.
  shape.units = false;
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 5}}, shape), (std::vector<int>{0, 1, 2, 4, 7, 10, 11}));
  // Units asked for but none given: single tokens too.
  s.unit = nullptr;
  shape.units = true;
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 5}}, shape), (std::vector<int>{0, 1, 2, 4, 7, 10, 11}));
}

TEST(ChooseSurvivors, ALayerSharedChoiceIsTheSameInEveryLayerAndHead) {
  // Two layers x two heads disagree; one choice over all four sums their scores:
  //      slot:                0  1  2  3  4  5  6  7
  Grid g(2, 2, 8);
  g.set(0, 0, {0, 0, 4, 0, 0, 0, 0, 0});
  g.set(0, 1, {0, 0, 0, 3, 0, 0, 0, 0});
  g.set(1, 0, {0, 0, 0, 3, 0, 2, 0, 0});
  g.set(1, 1, {0, 0, 0, 0, 0, 2, 0, 1});
  // sums:                       4  6  0  4  0  1: slot 3 (6), then 2 and 5 tie at 4: 5.
  PotScores s = scores(2, 2, 8, 8, 2, 4);
  ChoiceShape shared;
  shared.per_layer = false;
  shared.per_head = false;
  const auto all = choose_survivors(s, {{g.v.data(), 2}}, shared);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) EXPECT_EQ(of(all, s, l, h), (std::vector<int>{0, 1, 3, 5})) << l << "," << h;
  // Per layer (heads shared): layer 0 sums 4, 3 -> {2, 3}; layer 1 sums 3, 4 (slot 5), 1 -> {3, 5}.
  ChoiceShape per_layer;
  const auto pl = choose_survivors(s, {{g.v.data(), 2}}, per_layer);
  EXPECT_EQ(of(pl, s, 0, 0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(of(pl, s, 0, 1), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(of(pl, s, 1, 0), (std::vector<int>{0, 1, 3, 5}));
  EXPECT_EQ(of(pl, s, 1, 1), (std::vector<int>{0, 1, 3, 5}));
  // Per head, one choice over the layers (per_layer false): head 0 sums 4, 3, 2 at 2, 3, 5
  // -> {2, 3}; head 1: 3 at 3, 2 at 5 -> {3, 5}; the same in both layers.
  ChoiceShape per_head_all_layers;
  per_head_all_layers.per_layer = false;
  per_head_all_layers.per_head = true;
  const auto ph = choose_survivors(s, {{g.v.data(), 2}}, per_head_all_layers);
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(of(ph, s, l, 0), (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(of(ph, s, l, 1), (std::vector<int>{0, 1, 3, 5}));
  }
  // Every (layer, head) on its own: (1, 1) has 2 at 5, 1 at 7.
  ChoiceShape each;
  each.per_head = true;
  const auto e = choose_survivors(s, {{g.v.data(), 2}}, each);
  EXPECT_EQ(of(e, s, 0, 0), (std::vector<int>{0, 1, 2, 7}));  // 4 at 2, then the latest 0
  EXPECT_EQ(of(e, s, 1, 1), (std::vector<int>{0, 1, 5, 7}));
}

TEST(ChooseSurvivors, BackAndFwdAreNotInterchangeable) {
  // A single peak at slot 5 ("pass key is"); the digits come after it. back 3 keeps the peak
  // and the three slots after it; fwd 3 the peak and the three before it.
  //      slot:             0  1  2  3  4  5  6  7  8  9
  const std::vector<float> cap{0, 0, 0, 0, 0, 9, 0, 0, 0, 0};
  PotScores s = scores(1, 1, 10, 10, 1, 5);
  ChoiceShape shape;
  shape.back = 3;
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 4}}, shape), (std::vector<int>{0, 5, 6, 7, 8}));
  shape.back = 0;
  shape.fwd = 3;
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 4}}, shape), (std::vector<int>{0, 2, 3, 4, 5}));
}

TEST(ChooseSurvivors, StagesFillInOrderAndTheLastFillsWhatIsLeft) {
  // Slot 3 is the best of both stages: the first takes it, the second goes to its next best.
  //      slot:             0  1  2  3  4  5  6  7
  const std::vector<float> nuc{0, 0, 1, 9, 2, 3, 4, 5};
  const std::vector<float> cap{0, 0, 1, 9, 8, 2, 7, 3};
  PotScores s = scores(1, 1, 8, 8, 2, 5);
  EXPECT_EQ(choose_survivors(s, {{nuc.data(), 1}, {cap.data(), 0}}, {}), (std::vector<int>{0, 1, 3, 4, 6}));
  // The first stage takes 2 (3 and 7); the last fills the remaining 1 by cap: 4.
  EXPECT_EQ(choose_survivors(s, {{nuc.data(), 2}, {cap.data(), 1}}, {}), (std::vector<int>{0, 1, 3, 4, 7}));
  // A first stage asking for more than there is stops at keep.
  EXPECT_EQ(choose_survivors(s, {{nuc.data(), 99}, {cap.data(), 0}}, {}), (std::vector<int>{0, 1, 3, 6, 7}));
  // No stages: the newest fill every free place.
  EXPECT_EQ(choose_survivors(s, {}, {}), (std::vector<int>{0, 1, 5, 6, 7}));
}

TEST(ChooseSurvivors, HeadAndRecentWindowsAreKeptOutright) {
  // Scores favour the middle; head 2 keeps the two after the prefix, recent 2 the newest two.
  //      slot:             0  1  2  3  4  5  6  7  8  9
  const std::vector<float> cap{9, 9, 0, 0, 5, 6, 7, 0, 0, 0};
  PotScores s = scores(1, 1, 10, 10, 2, 7);
  ChoiceShape shape;
  shape.head = 2;
  shape.recent = 2;
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 1}}, shape), (std::vector<int>{0, 1, 2, 3, 6, 8, 9}));
  // Windows larger than the free places: head first, then recent, nothing by score.
  shape.head = 4;
  shape.recent = 9;
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 1}}, shape), (std::vector<int>{0, 1, 2, 3, 4, 5, 9}));
  // keep == size: every slot, whatever the windows.
  PotScores t = scores(1, 1, 10, 6, 2, 6);
  shape.head = 3;
  shape.recent = 3;
  EXPECT_EQ(choose_survivors(t, {{cap.data(), 1}}, shape), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(ChooseSurvivors, PinnedAlwaysKeptAndNeverScored) {
  // Pinned slots with the lowest scores are kept; pinned slots with the highest do not
  // spread into the candidates.
  //      slot:             0      1     2  3  4  5  6  7
  const std::vector<float> cap{-kInf, kNaN, 100, 0, 0, 1, 0, 0};
  PotScores s = scores(1, 1, 8, 8, 3, 5);
  ChoiceShape shape;
  shape.back = 2;
  // Candidates 3..7 with back 2 (slot 2 hidden): 3 -> 0, 4 -> 0, 5 -> 1, 6 -> 1, 7 -> 1.
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 2}}, shape), (std::vector<int>{0, 1, 2, 6, 7}));
  s.keep = 3;  // keep == pinned: only the prefix
  EXPECT_EQ(choose_survivors(s, {{cap.data(), 2}}, shape), (std::vector<int>{0, 1, 2}));
}

TEST(ChooseSurvivors, NanSumsCountAsNothing) {
  // Group sums skip NaN; a slot is NaN only where every member is NaN, and ranks last.
  //      slot:          0  1     2     3     4
  Grid g(1, 2, 5);
  g.set(0, 0, {0, kNaN, 1, kNaN, kNaN});
  g.set(0, 1, {0, kNaN, kNaN, -2, kNaN});
  PotScores s = scores(1, 2, 5, 5, 1, 3);
  // Sums: 1: NaN, 2: 1, 3: -2, 4: NaN -> 2 and 3.
  EXPECT_EQ(of(choose_survivors(s, {{g.v.data(), 2}}, {}), s, 0, 0), (std::vector<int>{0, 2, 3}));
  s.keep = 4;  // then the later NaN
  EXPECT_EQ(of(choose_survivors(s, {{g.v.data(), 3}}, {}), s, 0, 1), (std::vector<int>{0, 2, 3, 4}));
}

TEST(ChooseSurvivors, InvalidRequestsAreRefused) {
  std::vector<float> score(32, 1.0f);
  auto ok = [] { return scores(2, 2, 8, 8, 2, 5); };
  EXPECT_NO_THROW(choose_survivors(ok(), {{score.data(), 1}}, {}));
  auto refused = [&](PotScores s, std::vector<ChoiceStage> stages = {}, ChoiceShape shape = {}) {
    if (stages.empty()) stages = {{score.data(), 1}};
    EXPECT_THROW(choose_survivors(s, stages, shape), std::invalid_argument);
  };
  PotScores s = ok();
  s.keep = 9;  // keep > size
  refused(s);
  s = ok(), s.pinned = 6;  // pinned > keep
  refused(s);
  s = ok(), s.pinned = -1;
  refused(s);
  s = ok(), s.n_heads = 0;
  refused(s);
  s = ok(), s.n_layers = 0;
  refused(s);
  s = ok(), s.stride = 7;  // rows shorter than size
  refused(s);
  s = ok(), s.size = -1;
  refused(s);
  refused(ok(), {{nullptr, 1}});  // a stage without scores
  refused(ok(), {{score.data(), -1}});
  for (int which = 0; which < 4; ++which) {
    ChoiceShape bad;
    (which == 0 ? bad.head : which == 1 ? bad.recent : which == 2 ? bad.back : bad.fwd) = -1;
    refused(ok(), {}, bad);
  }
}

// ---- randomized check against a brute-force reference ----------------------------------

// The documented order: higher score first, NaN below every number, ties to the later slot.
bool ranks_before(float x, int a, float y, int b) {
  const bool xn = std::isnan(x), yn = std::isnan(y);
  if (xn != yn) return yn;
  if (!xn && x != y) return x > y;
  return a > b;
}

struct RandomCase {
  PotScores s;
  ChoiceShape shape;
  std::vector<ChoiceStage> stages;
  std::vector<std::vector<float>> stage_scores;
  std::vector<int> unit, source;
  std::string describe() const {
    std::ostringstream o;
    o << "L " << s.n_layers << " H " << s.n_heads << " stride " << s.stride << " size " << s.size << " pinned "
      << s.pinned << " keep " << s.keep << " per_layer " << shape.per_layer << " per_head " << shape.per_head
      << " head " << shape.head << " recent " << shape.recent << " back " << shape.back << " fwd " << shape.fwd
      << " units " << shape.units << (s.unit ? "" : "(none given)") << " stages";
    for (const auto& st : stages) o << " " << st.count;
    return o.str();
  }
};

// The survivors of one group, written from the description in pot/selection.h: a plain
// sort for the ranking, and runs found by scanning outwards.
std::vector<int> reference_group(const RandomCase& c, const std::vector<std::pair<int, int>>& members) {
  const PotScores& s = c.s;
  const int n = s.size, lo = s.pinned;
  std::vector<bool> kept(n, false);
  for (int j = 0; j < s.pinned; ++j) kept[j] = true;
  int free_places = s.keep - s.pinned;
  for (int j = s.pinned; j < n && j < s.pinned + c.shape.head && free_places > 0; ++j) kept[j] = true, --free_places;
  const int recent = std::min(c.shape.recent, free_places);
  for (int j = n - recent; j < n; ++j)
    if (!kept[j]) kept[j] = true, --free_places;
  const int* unit = c.shape.units && s.unit ? s.unit + s.at(members[0].first, members[0].second) : nullptr;
  for (size_t k = 0; k < c.stages.size() && free_places > 0; ++k) {
    std::vector<float> sum(n, kNaN), best(n, kNaN);
    for (int j = 0; j < n; ++j)
      for (const auto& m : members) {
        const float v = c.stages[k].score[s.at(m.first, m.second) + j];
        if (!std::isnan(v)) sum[j] = std::isnan(sum[j]) ? v : sum[j] + v;
      }
    for (int j = lo; j < n; ++j) {
      int first = j, last = j;
      if (unit) {
        while (first - 1 >= lo && unit[first - 1] == unit[j]) --first;
        while (last + 1 < n && unit[last + 1] == unit[j]) ++last;
      }
      for (int i = lo; i < n; ++i)
        if (i >= first - c.shape.back && i <= last + c.shape.fwd && !std::isnan(sum[i]))
          best[j] = std::isnan(best[j]) ? sum[i] : std::max(best[j], sum[i]);
    }
    std::vector<int> cand;
    for (int j = lo; j < n; ++j)
      if (!kept[j]) cand.push_back(j);
    std::sort(cand.begin(), cand.end(), [&](int a, int b) { return ranks_before(best[a], a, best[b], b); });
    const int want = k + 1 == c.stages.size() ? free_places : std::min(c.stages[k].count, free_places);
    for (int i = 0; i < want && i < int(cand.size()); ++i) kept[cand[i]] = true, --free_places;
  }
  for (int j = n - 1; j >= 0 && free_places > 0; --j)
    if (!kept[j]) kept[j] = true, --free_places;
  std::vector<int> out;
  for (int j = 0; j < n; ++j)
    if (kept[j]) out.push_back(j);
  return out;
}

std::vector<int> reference(const RandomCase& c) {
  const PotScores& s = c.s;
  std::vector<int> out;
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_heads; ++h) {
      std::vector<std::pair<int, int>> members;  // (l, h)'s group, layer-major
      for (int l2 = 0; l2 < s.n_layers; ++l2)
        for (int h2 = 0; h2 < s.n_heads; ++h2)
          if ((!c.shape.per_layer || l2 == l) && (!c.shape.per_head || h2 == h)) members.push_back({l2, h2});
      const auto kept = reference_group(c, members);
      out.insert(out.end(), kept.begin(), kept.end());
    }
  return out;
}

// Half-integer scores from a few levels, so ties are common and group sums are exact in any
// order; some NaN and +inf. Padding past size holds huge values no step may see.
// Fills c in place: its PotScores and stages point into its own vectors.
void random_case(uint32_t seed, RandomCase& c) {
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  PotScores& s = c.s;
  s.n_layers = uni(1, 3);
  s.n_heads = uni(1, 3);
  s.size = uni(0, 40);
  s.stride = s.size + uni(0, 4);
  s.pinned = uni(0, std::min(s.size, 5));
  s.keep = uni(s.pinned, s.size);
  c.shape.per_layer = uni(0, 1);
  c.shape.per_head = uni(0, 1);
  c.shape.head = uni(0, 2) ? 0 : uni(0, 8);
  c.shape.recent = uni(0, 2) ? 0 : uni(0, 12);
  c.shape.back = uni(0, 4);
  c.shape.fwd = uni(0, 4);
  c.shape.units = uni(0, 2) > 0;
  const size_t slots = size_t(s.n_layers) * s.n_heads * s.stride;
  // Stream indices and word / digit runs: one set per group (members of a group hold the
  // same tokens, as in the pot), different between groups.
  c.source.assign(slots, 1 << 29);
  c.unit.assign(slots, 1 << 29);
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_heads; ++h) {
      const int gl = c.shape.per_layer ? l : 0, gh = c.shape.per_head ? h : 0;
      if (l != gl || h != gh) {  // a copy of the group's lead
        std::copy_n(c.source.begin() + s.at(gl, gh), s.stride, c.source.begin() + s.at(l, h));
        std::copy_n(c.unit.begin() + s.at(gl, gh), s.stride, c.unit.begin() + s.at(l, h));
        continue;
      }
      int src = 0, run = 0;
      for (int j = 0; j < s.size; ++j) {
        src += j == 0 ? 0 : uni(1, 3);
        if (j == 0 || uni(0, 2) == 0) run = src;  // a new run starts here
        c.source[s.at(l, h) + j] = src;
        c.unit[s.at(l, h) + j] = run;
      }
    }
  s.source = c.source.data();
  s.unit = uni(0, 5) == 0 ? nullptr : c.unit.data();
  const int n_stages = uni(0, 5) == 0 ? 0 : uni(1, 2);
  for (int k = 0; k < n_stages; ++k) {
    std::vector<float> v(std::max<size_t>(slots, 1), 1e30f);  // never empty: data() must not be null
    const int levels = uni(1, 4);
    for (int l = 0; l < s.n_layers; ++l)
      for (int h = 0; h < s.n_heads; ++h)
        for (int j = 0; j < s.size; ++j) {
          const int r = uni(0, 24);
          v[s.at(l, h) + j] = r == 0 ? kNaN : r == 1 ? kInf : float(uni(-levels, levels)) * 0.5f;
        }
    c.stage_scores.push_back(std::move(v));
  }
  for (int k = 0; k < n_stages; ++k) c.stages.push_back({c.stage_scores[k].data(), uni(0, s.keep - s.pinned + 2)});
}

TEST(ChooseSurvivors, MatchesBruteForceOnRandomCases) {
  constexpr uint32_t kCases = 3000;
  int with_units = 0, with_stages = 0, shared = 0, checked = 0;
  for (uint32_t seed = 1; seed <= kCases; ++seed) {
    RandomCase c;
    random_case(seed, c);
    const PotScores& s = c.s;
    std::vector<int> got;
    ASSERT_NO_THROW(got = choose_survivors(s, c.stages, c.shape)) << "seed " << seed << ": " << c.describe();
    ASSERT_EQ(got.size(), size_t(s.n_layers) * s.n_heads * s.keep) << "seed " << seed;
    for (int l = 0; l < s.n_layers; ++l)
      for (int h = 0; h < s.n_heads; ++h) {
        const auto row = of(got, s, l, h);
        for (int j = 0; j < s.keep; ++j) {
          ASSERT_TRUE(row[j] >= 0 && row[j] < s.size) << "seed " << seed;
          if (j < s.pinned) ASSERT_EQ(row[j], j) << "seed " << seed << ": pinned slot lost";
          if (j > 0) ASSERT_LT(row[j - 1], row[j]) << "seed " << seed << ": not strictly ascending";
        }
        // Members of a group keep the same entries.
        const int gl = c.shape.per_layer ? l : 0, gh = c.shape.per_head ? h : 0;
        ASSERT_EQ(row, of(got, s, gl, gh)) << "seed " << seed << ": a group split";
      }
    ASSERT_EQ(got, reference(c)) << "seed " << seed << ": " << c.describe();
    with_units += c.shape.units && s.unit;
    with_stages += !c.stages.empty();
    shared += !c.shape.per_layer || !c.shape.per_head;
    ++checked;
  }
  EXPECT_EQ(checked, int(kCases));
  // The generator covers what it claims to.
  EXPECT_GT(with_units, int(kCases) / 3);
  EXPECT_GT(with_stages, int(kCases) * 2 / 3);
  EXPECT_GT(shared, int(kCases) / 2);
}

// The reference of spread_scores on its own (any lo, hi, back, fwd, units with NaN and ties).
TEST(SpreadScores, MatchesBruteForceOnRandomRows) {
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int n = uni(0, 30), lo = uni(0, n), hi = uni(lo, n), back = uni(0, 5), fwd = uni(0, 5);
    std::vector<float> in(n);
    std::vector<int> unit(n);
    int run = 0;
    for (int j = 0; j < n; ++j) {
      const int r = uni(0, 9);
      in[j] = r == 0 ? kNaN : r == 1 ? -kInf : float(uni(-3, 3));
      if (j == 0 || uni(0, 2) == 0) run = j;
      unit[j] = run;
    }
    const bool units = uni(0, 1);
    std::vector<float> want(n, -12345.0f);
    for (int j = lo; j < hi; ++j) {
      int first = j, last = j;
      while (units && first > lo && unit[first - 1] == unit[j]) --first;
      while (units && last + 1 < hi && unit[last + 1] == unit[j]) ++last;
      float best = kNaN;
      for (int i = lo; i < hi; ++i)
        if (i >= first - back && i <= last + fwd && !std::isnan(in[i])) best = std::isnan(best) ? in[i] : std::max(best, in[i]);
      want[j] = best;
    }
    ASSERT_TRUE(same_floats(spread(in, units ? &unit : nullptr, lo, hi, back, fwd), want))
        << "seed " << seed << " n " << n << " lo " << lo << " hi " << hi << " back " << back << " fwd " << fwd
        << " units " << units;
  }
}

// take_best against a full sort (the production code uses a partial one).
TEST(TakeBest, MatchesAFullSortOnRandomRows) {
  for (uint32_t seed = 1; seed <= 2000; ++seed) {
    std::mt19937 rng(seed);
    auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int n = uni(0, 30), lo = uni(0, n), hi = uni(lo, n), count = uni(-1, n + 1);
    std::vector<float> score(n);
    std::vector<char> taken(n);
    for (int j = 0; j < n; ++j) {
      const int r = uni(0, 7);
      score[j] = r == 0 ? kNaN : float(uni(-2, 2));
      taken[j] = uni(0, 4) == 0;
    }
    std::vector<int> cand;
    for (int j = lo; j < hi; ++j)
      if (!taken[j]) cand.push_back(j);
    std::sort(cand.begin(), cand.end(), [&](int a, int b) { return ranks_before(score[a], a, score[b], b); });
    std::vector<char> want = taken;
    const int expect = std::max(0, std::min<int>(count, cand.size()));
    for (int i = 0; i < expect; ++i) want[cand[i]] = 1;
    std::vector<char> got = taken;
    ASSERT_EQ(take_best(score.data(), lo, hi, count, got), expect) << "seed " << seed;
    ASSERT_EQ(got, want) << "seed " << seed;
  }
}

// ---- MemoryPot::resolve -------------------------------------------------------------------

PotOptions pot(int capacity, int keep = 0, float nuc_ratio = 0.5f, const std::string& policy = "infinipot") {
  PotOptions o;
  o.capacity = capacity;
  o.keep = keep;
  o.policy = policy;
  o.params.nuc_ratio = nuc_ratio;
  return o;
}

// The message of the std::invalid_argument resolve throws ("" and a failure if none).
std::string refusal(const PotOptions& o, const PotLayout& l) {
  try {
    const PotOptions r = MemoryPot::resolve(o, l);
    ADD_FAILURE() << "accepted capacity " << o.capacity << " keep " << r.keep << " policy " << o.policy;
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
  EXPECT_EQ(r.params.nuc_ratio, 0.25f);
  EXPECT_EQ(r.policy, "infinipot");
}

TEST(PotResolve, PotTooSmallForPrefixAndCatalyst) {
  const std::string msg = refusal(pot(16), {10, 5, 1000, 1});  // needs 10 + 5 + 2 = 17
  EXPECT_TRUE(has(msg, "chat prefix")) << msg;
  EXPECT_TRUE(has(msg, "catalyst prompt")) << msg;
  EXPECT_TRUE(has(msg, "{pot} 17")) << msg;
  EXPECT_EQ(MemoryPot::resolve(pot(17), {10, 5, 1000, 1}).keep, 11);  // the smallest that works
  EXPECT_FALSE(refusal(pot(0), {0, 0, 10, 1}).empty());
  EXPECT_FALSE(refusal(pot(-5), {0, 0, 10, 1}).empty());
}

TEST(PotResolve, KeepMustLeaveRoomBothWays) {
  const PotLayout L{10, 5, 1000, 10};
  std::string msg = refusal(pot(100, 100), L);
  EXPECT_TRUE(has(msg, "must be below {pot} 100")) << msg;
  EXPECT_TRUE(has(refusal(pot(100, 150), L), "must be below {pot}")) << "keep above capacity";
  msg = refusal(pot(100, 10), L);  // keep == pinned
  EXPECT_TRUE(has(msg, "{keep} 10")) << msg;
  EXPECT_TRUE(has(msg, "{keep} 11")) << msg;
  EXPECT_FALSE(refusal(pot(100, 5), L).empty());  // keep < pinned
  EXPECT_EQ(MemoryPot::resolve(pot(100, 11), L).keep, 11);
  // keep + catalyst must stay below capacity: 70 + 30 = 100 does not, 69 + 30 does.
  const PotLayout big_catalyst{10, 30, 1000, 10};
  msg = refusal(pot(100, 70), big_catalyst);
  EXPECT_TRUE(has(msg, "catalyst")) << msg;
  EXPECT_TRUE(has(msg, "{keep} 69")) << msg;
  EXPECT_EQ(MemoryPot::resolve(pot(100, 69), big_catalyst).keep, 69);
}

// The refusal carries the setting at fault, the value given and what would work, so a
// front-end can point at its field (the server's `param`, infinipot_last_error_setting).
SettingError setting_refusal(const PotOptions& o, const PotLayout& L) {
  try {
    MemoryPot::resolve(o, L);
  } catch (const SettingError& e) {
    return e;
  }
  ADD_FAILURE() << "resolve accepted pot " << o.capacity << " keep " << o.keep;
  return SettingError("", "", "", "");
}

TEST(PotResolve, RefusalsNameTheSettingTheValueAndWhatWorks) {
  const PotLayout L{10, 5, 1000, 10};
  SettingError e = setting_refusal(pot(16), {10, 5, 1000, 1});
  EXPECT_EQ(e.setting(), "pot");
  EXPECT_EQ(e.have(), "16");
  EXPECT_EQ(e.need(), ">= 17");
  e = setting_refusal(pot(100, 100), L);
  EXPECT_EQ(e.setting(), "keep");
  EXPECT_EQ(e.have(), "100");
  EXPECT_EQ(e.need(), "< 100");
  e = setting_refusal(pot(100, 10), L);
  EXPECT_EQ(e.setting(), "keep");
  EXPECT_EQ(e.need(), ">= 11");
  e = setting_refusal(pot(100, 70), {10, 30, 1000, 10});
  EXPECT_EQ(e.need(), "<= 69");
  e = setting_refusal(pot(100, 50), {10, 5, 1000, 51});
  EXPECT_EQ(e.setting(), "pot");
  EXPECT_EQ(e.need(), ">= 101");
  e = setting_refusal(pot(100, 40, 1.5f), L);
  EXPECT_EQ(e.setting(), "nuc_ratio");
  EXPECT_EQ(e.need(), "in [0, 1]");
  PotOptions unknown = pot(100);
  unknown.policy = "nosuch";
  e = setting_refusal(unknown, L);
  EXPECT_EQ(e.setting(), "policy");
  EXPECT_EQ(e.have(), "nosuch");
  EXPECT_TRUE(has(e.need(), "infinipot")) << e.need();  // the names that work
}

TEST(PotResolve, FinalPartMustFitAfterDistilling) {
  // keep 50 + final 51 > 100 when the body overflows the pot.
  const std::string msg = refusal(pot(100, 50), {10, 5, 1000, 51});
  EXPECT_TRUE(has(msg, "{pot} 100")) << msg;
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
    EXPECT_TRUE(has(msg, "{nuc_ratio}")) << bad << ": " << msg;
  }
  EXPECT_NO_THROW(MemoryPot::resolve(pot(100, 0, 0.0f), L));
  EXPECT_NO_THROW(MemoryPot::resolve(pot(100, 0, 1.0f), L));
}

TEST(PotResolve, NucStrideMustLieInOneToSixtyFour) {
  const PotLayout L{10, 5, 1000, 10};
  for (int bad : {0, -1, 65}) {
    PotOptions o = pot(100, 0, 0.5f);
    o.params.nuc_stride = bad;
    const std::string msg = refusal(o, L);
    EXPECT_TRUE(has(msg, "nuc_stride must lie in 1..64")) << bad << ": " << msg;
  }
  for (int good : {1, 4, 64}) {
    PotOptions o = pot(100, 0, 0.5f);
    o.params.nuc_stride = good;
    EXPECT_NO_THROW(MemoryPot::resolve(o, L));
  }
}

// The prefix a layout pins is the policy's: streaming pins 4 sinks, swa nothing, the others
// all of it; every check that counts the prefix counts what the policy pins.
TEST(PotResolve, UsesThePolicysPinnedCount) {
  const PotLayout L{10, 0, 1000, 10};  // no catalyst (streaming, swa, truncate, h2o, tova)
  const PotLayout L1{10, 0, 1000, 1};  // the same with a one-token final part, for tiny pots
  // --keep 6 leaves room beside 4 sinks, not beside a 10-token prefix.
  EXPECT_EQ(MemoryPot::resolve(pot(40, 6, 0.5f, "streaming"), L).keep, 6);
  EXPECT_TRUE(has(refusal(pot(40, 6, 0.5f, "truncate"), L), "pins 10 entries"));
  std::string msg = refusal(pot(40, 4, 0.5f, "streaming"), L);  // keep == the 4 sinks
  EXPECT_TRUE(has(msg, "pins 4 entries")) << msg;
  EXPECT_TRUE(has(msg, "{keep} 5")) << msg;
  EXPECT_EQ(MemoryPot::resolve(pot(40, 1, 0.5f, "swa"), L).keep, 1);  // swa pins nothing
  // The smallest pot: pinned + catalyst + 2.
  msg = refusal(pot(5, 0, 0.5f, "streaming"), L1);
  EXPECT_TRUE(has(msg, "chat prefix (4 tokens)")) << msg;
  EXPECT_TRUE(has(msg, "{pot} 6")) << msg;
  EXPECT_EQ(MemoryPot::resolve(pot(6, 0, 0.5f, "streaming"), L1).keep, 5);
  EXPECT_EQ(MemoryPot::resolve(pot(2, 0, 0.5f, "swa"), L1).keep, 1);
  EXPECT_TRUE(has(refusal(pot(11, 0, 0.5f, "h2o"), L1), "{pot} 12"));
  // Default keep: half the pot, clamped above what the policy pins.
  EXPECT_EQ(MemoryPot::resolve(pot(8, 0, 0.5f, "streaming"), L1).keep, 5);
  EXPECT_EQ(MemoryPot::resolve(pot(8, 0, 0.5f, "swa"), L1).keep, 4);
  // pinned_of agrees with the policy object.
  for (const auto& info : policies()) {
    if (!info.make) continue;
    PotOptions o = pot(100, 0, 0.5f, info.name);
    for (int prefix : {0, 3, 4, 10})
      EXPECT_EQ(MemoryPot::pinned_of(o, prefix), info.make(o.params)->pinned(prefix)) << info.name << " " << prefix;
  }
}

TEST(PotResolve, UnknownPolicyThrowsNamingTheKnownOnes) {
  for (const char* bad : {"", "recent", "Recent", "INFINIPOT", "infinipot ", "snap-kv"}) {
    const std::string msg = refusal(pot(100, 0, 0.5f, bad), {10, 5, 1000, 10});
    EXPECT_TRUE(has(msg, "{policy} must be one of")) << bad << ": " << msg;
    for (const auto& info : policies()) EXPECT_TRUE(has(msg, info.name)) << bad << ": " << msg;
  }
  EXPECT_THROW(find_policy("recent"), std::invalid_argument);  // the old baseline is gone
}

TEST(PotResolve, FullKeepsNoPot) {
  const std::string msg = refusal(pot(100, 0, 0.5f, "full"), {10, 5, 1000, 10});
  EXPECT_TRUE(has(msg, "{policy} full")) << msg;
  EXPECT_TRUE(has(msg, "no pot")) << msg;
  EXPECT_THROW(MemoryPot::needs_of(pot(100, 0, 0.5f, "full")), std::invalid_argument);
  EXPECT_THROW(MemoryPot::pinned_of(pot(100, 0, 0.5f, "full"), 10), std::invalid_argument);
}

}  // namespace
}  // namespace infinipot
