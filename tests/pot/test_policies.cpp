// The pot policies (pot/policies/*.cpp) and their registry (pot/policy_registry.h), no device:
// one hand-worked case per registered policy (tiny pots: 2 layers x 2 KV heads, rows of 16
// slots) with the survivors worked out in the comments, then invariants over every policy
// and random scores, and the registry's contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "pot/policy.h"
#include "pot/policy_registry.h"

namespace infinipot {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kL = 2, kH = 2, kStride = 16;

using Slots = std::vector<int>;

// Measurements of a 2-layer, 2-head pot, [layer][head][16], filled by (layer, head). Slots
// past the case's size hold huge values no policy may look at.
struct Measures {
  std::vector<float> catalyst, novelty, accumulated, last_query;
  std::vector<int> source, unit;
  Measures() {
    for (auto* v : {&catalyst, &novelty, &accumulated, &last_query}) v->assign(kL * kH * kStride, 1e30f);
    source.resize(kL * kH * kStride);
    unit.resize(kL * kH * kStride);
    for (int i = 0; i < kL * kH; ++i)
      for (int j = 0; j < kStride; ++j) source[i * kStride + j] = unit[i * kStride + j] = j;
  }
  static float* row(std::vector<float>& v, int l, int h) { return v.data() + (l * kH + h) * kStride; }
  static void set(std::vector<float>& v, int l, int h, const std::vector<float>& r) {
    std::copy(r.begin(), r.end(), row(v, l, h));
  }
  static void set_all(std::vector<float>& v, const std::vector<float>& r) {
    for (int l = 0; l < kL; ++l)
      for (int h = 0; h < kH; ++h) set(v, l, h, r);
  }
  void set_unit(const std::vector<int>& u) {
    for (int i = 0; i < kL * kH; ++i) std::copy(u.begin(), u.end(), unit.begin() + i * kStride);
  }
  // The PotScores a pot would hand the policy: only what it declared it needs.
  PotScores scores(const PotPolicy& p, int size, int pinned, int keep) const {
    const PolicyNeeds n = p.needs();
    PotScores s;
    s.n_layers = kL, s.n_heads = kH, s.stride = kStride, s.size = size, s.pinned = pinned, s.keep = keep;
    s.catalyst = n.catalyst ? catalyst.data() : nullptr;
    s.novelty = n.novelty ? novelty.data() : nullptr;
    s.accumulated = n.accumulated ? accumulated.data() : nullptr;
    s.last_query = n.last_query ? last_query.data() : nullptr;
    s.source = source.data();
    s.unit = unit.data();
    return s;
  }
};

std::unique_ptr<PotPolicy> make(const std::string& name, const PolicyParams& p = {}) {
  const PolicyInfo& info = find_policy(name);
  EXPECT_NE(info.make, nullptr) << name;
  return info.make(p);
}

// The survivors of every (layer, head), in order (0,0), (0,1), (1,0), (1,1).
std::vector<Slots> per_row(const std::vector<int>& all, int keep) {
  std::vector<Slots> out;
  for (int i = 0; i < kL * kH; ++i) out.emplace_back(all.begin() + i * keep, all.begin() + (i + 1) * keep);
  EXPECT_EQ(all.size(), size_t(kL * kH * keep));
  return out;
}
std::vector<Slots> everywhere(const Slots& s) { return std::vector<Slots>(kL * kH, s); }

// ---- one hand-worked case per policy -------------------------------------------------------

// The CCD case (infinipot, cap, nuc): 14 filled slots, prefix 2, keep 9, a recent window of 2,
// pool 1 back / 0 ahead. Slots 6, 7, 8 are one word or digit run.
//   slot:          0  1 | 2  3  4  5  6  7  8  9  10 11 12 13
//   novelty (all): 0  0 | 1  1  9  1  1  1  1  1  1  1  1  1
//   catalyst:      layer 1 head 1: 5 at slot 7; every head: 1 at slot 10; else 0
Measures ccd_case() {
  Measures m;
  Measures::set_all(m.novelty, {0, 0, 1, 1, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  Measures::set_all(m.catalyst, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  Measures::row(m.catalyst, 1, 1)[7] = 5;
  m.set_unit({0, 1, 2, 3, 4, 5, 6, 6, 6, 9, 10, 11, 12, 13});
  return m;
}
PolicyParams ccd_params(float nuc_ratio) {
  PolicyParams p;
  p.nuc_ratio = nuc_ratio, p.pool = 1, p.pool_ahead = 0, p.recent = 2;
  return p;
}

TEST(Policy, Infinipot) {
  const Measures m = ccd_case();
  // Free places 7: recent 2 (12, 13), then 5; NuC gets round(0.4 * 5) = 2, CaP 3.
  // One choice for all layers and heads (the default): scores summed over the 4 rows.
  // NuC, spread back 1: 4 -> 36, 5 -> 36 (sees 4), every other slot 4 (the run 6-8 sees
  //   5..8, all 1s): takes 4, 5.
  // CaP sums: slot 7: 5, slot 10: 4. Spread: the run 6-8 sees slots 5..8 -> 5 each;
  //   10 -> 4, 11 -> 4 (sees 10); else 0: takes 6, 7, 8: the run whole.
  auto p = make("infinipot", ccd_params(0.4f));
  const PotScores s = m.scores(*p, 14, 2, 9);
  EXPECT_EQ(per_row(p->select(s), 9), everywhere({0, 1, 4, 5, 6, 7, 8, 12, 13}));

  // Single tokens (--pot-units token): CaP: 7 -> 5, 8 -> 5 (sees 7), 6 -> 0; 10, 11 -> 4:
  // takes 7, 8 and of the tie 10/11 the later 11.
  PolicyParams tok = ccd_params(0.4f);
  tok.units = UnitRule::Token;
  EXPECT_EQ(per_row(make("infinipot", tok)->select(s), 9), everywhere({0, 1, 4, 5, 7, 8, 11, 12, 13}));

  // Per head and layer (the paper's): NuC is the same in every row (4, 5). CaP of rows
  // (0,0), (0,1), (1,0): 10 -> 1, 11 -> 1, then a tie at 0: the latest free, 9. Row (1,1)
  // has the 5 at slot 7: the run 6-8.
  PolicyParams each = ccd_params(0.4f);
  each.per_head = each.per_layer = true;
  const std::vector<Slots> want_each = {{0, 1, 4, 5, 9, 10, 11, 12, 13},
                                        {0, 1, 4, 5, 9, 10, 11, 12, 13},
                                        {0, 1, 4, 5, 9, 10, 11, 12, 13},
                                        {0, 1, 4, 5, 6, 7, 8, 12, 13}};
  EXPECT_EQ(per_row(make("infinipot", each)->select(s), 9), want_each);

  // The catalyst's scores are used: its peak moved from slot 7 to slot 3 (spread to 3, 4;
  // 4 is NuC's) takes 3, then 10 and 11.
  Measures moved = m;
  Measures::row(moved.catalyst, 1, 1)[7] = 0;
  Measures::row(moved.catalyst, 1, 1)[3] = 5;
  EXPECT_EQ(per_row(p->select(moved.scores(*p, 14, 2, 9)), 9), everywhere({0, 1, 3, 4, 5, 10, 11, 12, 13}));

  // The defaults: pool 4 back and 1 ahead; the recent window is at most an eighth of the 7
  // free places (none here); NuC lround(0.5 * 7) = 4 places, CaP 3.
  // NuC sums x4: slot 4 -> 36. Spread [j-4, j+1] (the run 6-8 as one: [2, 9]): 3, 4, 5 and the
  //   run 6-8 see 36; of those the 4 latest: 5, 6, 7, 8.
  // CaP sums: 7 -> 5, 10 -> 4. Spread: 9, 10, 11 see slot 7 (5); 12, 13 see 10 (4); 2-4 see
  //   nothing: takes 9, 10, 11.
  EXPECT_EQ(per_row(make("infinipot")->select(m.scores(*p, 14, 2, 9)), 9), everywhere({0, 1, 5, 6, 7, 8, 9, 10, 11}));
}

TEST(Policy, Cap) {
  const Measures m = ccd_case();
  // Catalyst only, 5 places after the recent 2: 6, 7, 8 (5), then 10, 11 (4).
  auto p = make("cap", ccd_params(0.9f));  // nuc_ratio is not cap's: ignored
  const PolicyNeeds n = p->needs();
  EXPECT_TRUE(n.catalyst);
  EXPECT_FALSE(n.novelty);
  EXPECT_EQ(per_row(p->select(m.scores(*p, 14, 2, 9)), 9), everywhere({0, 1, 6, 7, 8, 10, 11, 12, 13}));
}

TEST(Policy, Nuc) {
  const Measures m = ccd_case();
  // Novelty only, 5 places: 4, 5 (36), then a tie at 4 over 2, 3, 6..11: the latest 11, 10, 9.
  auto p = make("nuc", ccd_params(0.1f));  // nuc_ratio is not nuc's: ignored
  const PolicyNeeds n = p->needs();
  EXPECT_FALSE(n.catalyst);
  EXPECT_TRUE(n.novelty);
  EXPECT_EQ(per_row(p->select(m.scores(*p, 14, 2, 9)), 9), everywhere({0, 1, 4, 5, 9, 10, 11, 12, 13}));
}

TEST(Policy, Tova) {
  // 10 filled slots, prefix 2, keep 5: 3 places by the last token's attention.
  //   slot:        0 1 | 2  3  4  5  6  7  8  9
  //   layer 0 h0:  0 0 | 1  4  0  0  2  0  0  3
  //   layer 0 h1:  0 0 | 0  0  4  0  2  0  0  3
  //   layer 1 h0:  0 0 | 5  0  0  0  0  0  0  0
  //   layer 1 h1:  0 0 | 0  0  0  0  0  0  2  NaN
  Measures m;
  Measures::set(m.last_query, 0, 0, {0, 0, 1, 4, 0, 0, 2, 0, 0, 3});
  Measures::set(m.last_query, 0, 1, {0, 0, 0, 0, 4, 0, 2, 0, 0, 3});
  Measures::set(m.last_query, 1, 0, {0, 0, 5, 0, 0, 0, 0, 0, 0, 0});
  Measures::set(m.last_query, 1, 1, {0, 0, 0, 0, 0, 0, 0, 0, 2, kNaN});
  auto p = make("tova");
  // Per layer, heads summed. Layer 0: 9 (6), then 3, 4, 6 tie at 4: 6, 4. Layer 1: 2 (5),
  // 8 (2), then a tie at 0 (slot 9's NaN counts as nothing beside head 0's 0): 9.
  EXPECT_EQ(per_row(p->select(m.scores(*p, 10, 2, 5)), 5),
            (std::vector<Slots>{{0, 1, 4, 6, 9}, {0, 1, 4, 6, 9}, {0, 1, 2, 8, 9}, {0, 1, 2, 8, 9}}));
  // Per head: (0,0): 3, 9, 6. (0,1): 4, 9, 6. (1,0): 2, then the latest zeros 9, 8.
  // (1,1): 8, then the latest zeros 7, 6 (NaN ranks last).
  PolicyParams ph;
  ph.per_head = true;
  EXPECT_EQ(per_row(make("tova", ph)->select(m.scores(*p, 10, 2, 5)), 5),
            (std::vector<Slots>{{0, 1, 3, 6, 9}, {0, 1, 4, 6, 9}, {0, 1, 2, 8, 9}, {0, 1, 6, 7, 8}}));
}

TEST(Policy, H2o) {
  // 10 filled slots, prefix 2, keep 6: 4 places; by default half of them (2) are the recent
  // window (8, 9), the other 2 the heaviest accumulated attention, per (layer, head).
  //   slot:        0 1 | 2    3    4    5    6    7    8  9
  //   layer 0 h0:  0 0 | 5    1    1    7    1    1    0  0
  //   layer 0 h1:  0 0 | 1    1    1    1    1    1    0  0
  //   layer 1 h0:  0 0 | 0    3    NaN  3    0    0    9  9
  //   layer 1 h1:  0 0 | NaN  NaN  NaN  NaN  NaN  NaN  1  1
  Measures m;
  Measures::set(m.accumulated, 0, 0, {0, 0, 5, 1, 1, 7, 1, 1, 0, 0});
  Measures::set(m.accumulated, 0, 1, {0, 0, 1, 1, 1, 1, 1, 1, 0, 0});
  Measures::set(m.accumulated, 1, 0, {0, 0, 0, 3, kNaN, 3, 0, 0, 9, 9});
  Measures::set(m.accumulated, 1, 1, {0, 0, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, 1, 1});
  auto p = make("h2o");
  // (0,0): 5 (7), 2 (5). (0,1): all 1: the latest 7, 6. (1,0): 3 and 5 (3). (1,1): all NaN:
  // the latest 7, 6.
  EXPECT_EQ(per_row(p->select(m.scores(*p, 10, 2, 6)), 6),
            (std::vector<Slots>{{0, 1, 2, 5, 8, 9}, {0, 1, 6, 7, 8, 9}, {0, 1, 3, 5, 8, 9}, {0, 1, 6, 7, 8, 9}}));
  // --pot-recent 0: heavy hitters only. (0,0): 5, 2, then of the 1s the latest 7, 6 (8 and
  // 9 hold 0). (0,1): the 1s 7, 6, 5, 4. (1,0): 8, 9 (9), 3, 5. (1,1): 8, 9, then NaN 7, 6.
  PolicyParams none;
  none.recent = 0;
  EXPECT_EQ(per_row(make("h2o", none)->select(m.scores(*p, 10, 2, 6)), 6),
            (std::vector<Slots>{{0, 1, 2, 5, 6, 7}, {0, 1, 4, 5, 6, 7}, {0, 1, 3, 5, 8, 9}, {0, 1, 6, 7, 8, 9}}));
}

TEST(Policy, Streaming) {
  auto p = make("streaming");
  // 4 attention sinks: the first 4 tokens of the prefix, however long it is.
  EXPECT_EQ(p->pinned(6), 4);
  EXPECT_EQ(p->pinned(100), 4);
  EXPECT_EQ(p->pinned(2), 2);
  EXPECT_EQ(p->pinned(0), 0);
  const PolicyNeeds n = p->needs();
  EXPECT_FALSE(n.catalyst || n.novelty || n.accumulated || n.last_query);
  // 12 slots, sinks 0-3, keep 7: the newest 3 (9, 10, 11); prefix slots 4, 5 age out.
  Measures m;
  EXPECT_EQ(per_row(p->select(m.scores(*p, 12, p->pinned(6), 7)), 7), everywhere({0, 1, 2, 3, 9, 10, 11}));
}

TEST(Policy, Swa) {
  auto p = make("swa");
  EXPECT_EQ(p->pinned(6), 0);
  EXPECT_EQ(p->pinned(0), 0);
  const PolicyNeeds n = p->needs();
  EXPECT_FALSE(n.catalyst || n.novelty || n.accumulated || n.last_query);
  // 12 slots, keep 5: the newest 5, the prefix included in nothing.
  Measures m;
  EXPECT_EQ(per_row(p->select(m.scores(*p, 12, p->pinned(6), 5)), 5), everywhere({7, 8, 9, 10, 11}));
}

TEST(Policy, Truncate) {
  auto p = make("truncate");
  EXPECT_EQ(p->pinned(6), 6);
  const PolicyNeeds n = p->needs();
  EXPECT_FALSE(n.catalyst || n.novelty || n.accumulated || n.last_query);
  // 14 slots, prefix 2, keep 9: 7 free; the first 7 / 2 = 3 after the prefix (2, 3, 4: the
  // document's start) and the newest 4 (10..13).
  Measures m;
  EXPECT_EQ(per_row(p->select(m.scores(*p, 14, 2, 9)), 9), everywhere({0, 1, 2, 3, 4, 10, 11, 12, 13}));
  // An odd split the other way: keep 6, 4 free: head 2 (2, 3), newest 2 (12, 13).
  EXPECT_EQ(per_row(p->select(m.scores(*p, 14, 2, 6)), 6), everywhere({0, 1, 2, 3, 12, 13}));
}

TEST(Policy, Snapkv) {
  // 16 slots, prefix 2, keep 5: 3 places per (layer, head) by the observation window's
  // attention, max-pooled 3 slots each way (SnapKV's kernel of 7).
  //   (0,0): 5 at slot 9          -> 6..12 score 5: the latest 12, 11, 10
  //   (0,1): 2 at 3, 1 at 14      -> 2..6 score 2: 6, 5, 4
  //   (1,0): NaN but 1 at 15      -> 12..15 score 1: 15, 14, 13
  //   (1,1): 9 at 2, 8 at 15      -> 2..5 score 9: 5, 4, 3
  Measures m;
  Measures::set_all(m.catalyst, std::vector<float>(16, 0.0f));
  Measures::row(m.catalyst, 0, 0)[9] = 5;
  Measures::row(m.catalyst, 0, 1)[3] = 2;
  Measures::row(m.catalyst, 0, 1)[14] = 1;
  Measures::set(m.catalyst, 1, 0, std::vector<float>(16, kNaN));
  Measures::row(m.catalyst, 1, 0)[15] = 1;
  Measures::row(m.catalyst, 1, 1)[2] = 9;
  Measures::row(m.catalyst, 1, 1)[15] = 8;
  auto p = make("snapkv");
  EXPECT_EQ(p->pinned(2), 2);
  EXPECT_EQ(per_row(p->select(m.scores(*p, 16, 2, 5)), 5),
            (std::vector<Slots>{{0, 1, 10, 11, 12}, {0, 1, 4, 5, 6}, {0, 1, 13, 14, 15}, {0, 1, 3, 4, 5}}));
  // --pot-pool 0: raw scores. (0,0): 9, then the latest zeros 15, 14. (0,1): 3, 14, 15.
  // (1,0): 15, then the latest NaN 14, 13. (1,1): 2, 15, 14.
  PolicyParams raw;
  raw.pool = 0;
  EXPECT_EQ(per_row(make("snapkv", raw)->select(m.scores(*p, 16, 2, 5)), 5),
            (std::vector<Slots>{{0, 1, 9, 14, 15}, {0, 1, 3, 14, 15}, {0, 1, 13, 14, 15}, {0, 1, 2, 14, 15}}));
}

// ---- invariants over every policy and random scores -----------------------------------------

struct RandomPot {
  int L = 1, H = 1, stride = 1, size = 0, prefix = 0, pinned = 0, keep = 0;
  std::vector<float> catalyst, novelty, accumulated, last_query;
  std::vector<int> source, unit;
  size_t at(int l, int h) const { return (size_t(l) * H + h) * stride; }
  PotScores scores(const PolicyNeeds& n) const {
    PotScores s;
    s.n_layers = L, s.n_heads = H, s.stride = stride, s.size = size, s.pinned = pinned, s.keep = keep;
    s.catalyst = n.catalyst ? catalyst.data() : nullptr;
    s.novelty = n.novelty ? novelty.data() : nullptr;
    s.accumulated = n.accumulated ? accumulated.data() : nullptr;
    s.last_query = n.last_query ? last_query.data() : nullptr;
    s.source = source.data();
    s.unit = unit.data();
    return s;
  }
};

// Scores as the pot produces them: attention (catalyst, accumulated, last query) >= 0 per
// (layer, head); novelty >= 0 per token, the same in every row, NaN for unscored tokens;
// stream indices ascending, word / digit runs of adjacent slots. Rows hold the same tokens.
void fill_scores(std::mt19937& rng, RandomPot& r, std::vector<float>& v, bool per_row) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  v.assign(size_t(r.L) * r.H * r.stride, 1e30f);
  for (int l = 0; l < r.L; ++l)
    for (int h = 0; h < r.H; ++h)
      for (int j = 0; j < r.size; ++j) {
        if (!per_row && (l || h)) {
          v[r.at(l, h) + j] = v[j];
          continue;
        }
        const int k = uni(0, 19);
        v[r.at(l, h) + j] = k == 0 ? kNaN : float(uni(0, 6)) * 0.25f;
      }
}

RandomPot random_pot(uint32_t seed, const PotPolicy& policy) {
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomPot r;
  r.L = uni(1, 3), r.H = uni(1, 3), r.size = uni(1, 48), r.stride = r.size + uni(0, 3);
  r.prefix = uni(0, std::min(r.size, 10));
  r.pinned = policy.pinned(r.prefix);
  r.keep = uni(r.pinned, r.size);
  fill_scores(rng, r, r.catalyst, true);
  fill_scores(rng, r, r.accumulated, true);
  fill_scores(rng, r, r.last_query, true);
  fill_scores(rng, r, r.novelty, false);
  r.source.assign(size_t(r.L) * r.H * r.stride, -1);
  r.unit = r.source;
  int src = 0, run = 0;
  for (int j = 0; j < r.size; ++j) {
    src += j == 0 ? 0 : uni(1, 3);
    if (j == 0 || uni(0, 2) == 0) run = src;
    for (int i = 0; i < r.L * r.H; ++i) r.source[size_t(i) * r.stride + j] = src, r.unit[size_t(i) * r.stride + j] = run;
  }
  return r;
}

// Every pot policy in the registry (all but full).
std::vector<const PolicyInfo*> pot_policies() {
  std::vector<const PolicyInfo*> out;
  for (const auto& info : policies())
    if (info.make) out.push_back(&info);
  return out;
}

TEST(PolicyInvariants, SurvivorsAreAscendingExactlyKeepInRangeAndPinnedKept) {
  for (const PolicyInfo* info : pot_policies()) {
    SCOPED_TRACE(info->name);
    const auto policy = info->make(PolicyParams{});
    const PolicyNeeds needs = policy->needs();
    for (uint32_t seed = 1; seed <= 400; ++seed) {
      const RandomPot r = random_pot(seed, *policy);
      ASSERT_LE(r.pinned, r.prefix);
      // Undeclared needs are null: the policy must not touch them.
      const std::vector<int> all = policy->select(r.scores(needs));
      ASSERT_EQ(all.size(), size_t(r.L) * r.H * r.keep) << "seed " << seed;
      for (int i = 0; i < r.L * r.H; ++i) {
        const int* row = all.data() + size_t(i) * r.keep;
        for (int j = 0; j < r.keep; ++j) {
          ASSERT_TRUE(row[j] >= 0 && row[j] < r.size) << "seed " << seed << " row " << i;
          if (j > 0) ASSERT_LT(row[j - 1], row[j]) << "seed " << seed << " row " << i << ": not strictly ascending";
          if (j < r.pinned) ASSERT_EQ(row[j], j) << "seed " << seed << " row " << i << ": pinned slot lost";
        }
      }
      ASSERT_EQ(policy->select(r.scores(needs)), all) << "seed " << seed << ": not deterministic";
    }
  }
}

// Given every measurement (declared or not), a policy chooses as it does given only what it
// declared: it reads nothing it did not ask the pot to measure.
TEST(PolicyInvariants, UndeclaredMeasurementsAreNotRead) {
  PolicyNeeds all;
  all.catalyst = all.novelty = all.accumulated = all.last_query = true;
  for (const PolicyInfo* info : pot_policies()) {
    SCOPED_TRACE(info->name);
    const auto policy = info->make(PolicyParams{});
    for (uint32_t seed = 1; seed <= 200; ++seed) {
      const RandomPot r = random_pot(seed, *policy);
      ASSERT_EQ(policy->select(r.scores(all)), policy->select(r.scores(policy->needs()))) << "seed " << seed;
    }
  }
}

// A policy's plan (the choice as data, which the pot may run on the device) reads only the
// measurements the policy declared, and depends on the pot's counts only, never on scores.
TEST(PolicyInvariants, PlansReadOnlyDeclaredMeasurementsAndOnlyCounts) {
  PolicyNeeds none;
  for (const PolicyInfo* info : pot_policies()) {
    SCOPED_TRACE(info->name);
    const auto policy = info->make(PolicyParams{});
    const PolicyNeeds n = policy->needs();
    for (uint32_t seed = 1; seed <= 100; ++seed) {
      const RandomPot r = random_pot(seed, *policy);
      const ChoicePlan with = policy->plan(r.scores(n)), without = policy->plan(r.scores(none));
      ASSERT_EQ(with.stages.size(), without.stages.size()) << "seed " << seed;
      for (size_t k = 0; k < with.stages.size(); ++k) {
        const Measure m = with.stages[k].measure;
        EXPECT_TRUE(m == Measure::Catalyst     ? n.catalyst
                    : m == Measure::Novelty    ? n.novelty
                    : m == Measure::Accumulated ? n.accumulated
                                               : n.last_query)
            << "stage " << k << " reads an undeclared measurement";
        EXPECT_EQ(int(without.stages[k].measure), int(m));
        EXPECT_EQ(without.stages[k].count, with.stages[k].count);
        EXPECT_GE(with.stages[k].count, 0);
      }
      const ChoiceShape &a = with.shape, &b = without.shape;
      EXPECT_TRUE(a.per_head == b.per_head && a.per_layer == b.per_layer && a.head == b.head && a.recent == b.recent &&
                  a.back == b.back && a.fwd == b.fwd && a.units == b.units)
          << "seed " << seed;
    }
  }
}

// Every declared measurement is used: other values of it change the choice in some cases.
// (Small pools and recent windows, so scores decide most places.)
TEST(PolicyInvariants, DeclaredMeasurementsAreUsed) {
  PolicyParams params;
  params.pool = 1, params.pool_ahead = 0, params.recent = 0, params.nuc_ratio = 0.5f;
  std::set<std::string> with_needs;
  for (const PolicyInfo* info : pot_policies()) {
    SCOPED_TRACE(info->name);
    const auto policy = info->make(params);
    const PolicyNeeds n = policy->needs();
    const bool flags[] = {n.catalyst, n.novelty, n.accumulated, n.last_query};
    for (int which = 0; which < 4; ++which) {
      if (!flags[which]) continue;
      with_needs.insert(info->name);
      int changed = 0;
      for (uint32_t seed = 1; seed <= 200; ++seed) {
        RandomPot r = random_pot(seed, *policy);
        const std::vector<int> before = policy->select(r.scores(n));
        std::mt19937 rng(seed + 7777);
        auto& v = which == 0 ? r.catalyst : which == 1 ? r.novelty : which == 2 ? r.accumulated : r.last_query;
        fill_scores(rng, r, v, which != 1);
        changed += policy->select(r.scores(n)) != before;
      }
      EXPECT_GT(changed, 20) << "measurement " << which << " barely matters";
    }
  }
  // Every policy but the three positional ones measures something.
  EXPECT_EQ(with_needs, (std::set<std::string>{"infinipot", "cap", "nuc", "tova", "h2o", "snapkv"}));
}

// A flag the policy does not read (PolicyInfo::params) leaves its choice unchanged; that is
// why the CLI can refuse it as a usage error without changing anything the policy does.
TEST(PolicyInvariants, ParamsAPolicyDoesNotDeclareDoNotChangeItsChoice) {
  struct Variant {
    Setting setting;
    const char* name;
    void (*apply)(PolicyParams&);
  };
  const Variant variants[] = {
      {Setting::NucRatio, "nuc_ratio", [](PolicyParams& p) { p.nuc_ratio = 0.8f; }},
      {Setting::Pool, "pool", [](PolicyParams& p) { p.pool = 2; }},
      {Setting::Ahead, "pool_ahead", [](PolicyParams& p) { p.pool_ahead = 3; }},
      {Setting::Recent, "recent", [](PolicyParams& p) { p.recent = 1; }},
      {Setting::Heads, "per_head", [](PolicyParams& p) { p.per_head = true; }},
      {Setting::Layers, "per_layer", [](PolicyParams& p) { p.per_layer = true; }},
      {Setting::Units, "units", [](PolicyParams& p) { p.units = UnitRule::Token; }},
  };
  for (const PolicyInfo* info : pot_policies()) {
    const auto base = info->make(PolicyParams{});
    for (const Variant& v : variants) {
      if (info->accepts(v.setting)) continue;
      SCOPED_TRACE(std::string(info->name) + " with " + v.name);
      PolicyParams p;
      v.apply(p);
      const auto varied = info->make(p);
      for (uint32_t seed = 1; seed <= 150; ++seed) {
        const RandomPot r = random_pot(seed, *base);
        ASSERT_EQ(varied->select(r.scores(base->needs())), base->select(r.scores(base->needs()))) << "seed " << seed;
      }
    }
  }
}

// How the policies share a choice: one for every layer and head (infinipot by default and
// the positional ones), one per layer (tova), one per head (h2o, snapkv: different heads
// differ in some cases).
TEST(PolicyInvariants, ChoiceSharing) {
  auto groups_agree = [](const std::vector<int>& all, const RandomPot& r, bool across_layers, bool across_heads) {
    for (int l = 0; l < r.L; ++l)
      for (int h = 0; h < r.H; ++h) {
        const int l0 = across_layers ? 0 : l, h0 = across_heads ? 0 : h;
        if (!std::equal(all.begin() + (size_t(l) * r.H + h) * r.keep, all.begin() + (size_t(l) * r.H + h + 1) * r.keep,
                        all.begin() + (size_t(l0) * r.H + h0) * r.keep))
          return false;
      }
    return true;
  };
  for (const char* name : {"infinipot", "cap", "nuc", "streaming", "swa", "truncate"}) {
    const auto p = make(name);
    for (uint32_t seed = 1; seed <= 100; ++seed) {
      const RandomPot r = random_pot(seed, *p);
      ASSERT_TRUE(groups_agree(p->select(r.scores(p->needs())), r, true, true)) << name << " seed " << seed;
    }
  }
  const auto tova = make("tova");
  int tova_layers_differ = 0;
  for (uint32_t seed = 1; seed <= 100; ++seed) {
    const RandomPot r = random_pot(seed, *tova);
    const auto all = tova->select(r.scores(tova->needs()));
    ASSERT_TRUE(groups_agree(all, r, false, true)) << "tova seed " << seed;
    tova_layers_differ += !groups_agree(all, r, true, true);
  }
  EXPECT_GT(tova_layers_differ, 10);
  for (const char* name : {"h2o", "snapkv"}) {
    const auto p = make(name);
    int heads_differ = 0;
    for (uint32_t seed = 1; seed <= 100; ++seed) {
      const RandomPot r = random_pot(seed, *p);
      heads_differ += !groups_agree(p->select(r.scores(p->needs())), r, false, true);
    }
    EXPECT_GT(heads_differ, 10) << name;
  }
}

// ---- the registry -------------------------------------------------------------------------

TEST(PolicyRegistry, NamesAreUniqueAndEachIsFound) {
  std::set<std::string> names;
  for (const auto& info : policies()) {
    EXPECT_TRUE(names.insert(info.name).second) << "duplicate " << info.name;
    EXPECT_EQ(&find_policy(info.name), &info);
    EXPECT_NE(std::string(info.summary), "");
  }
  EXPECT_EQ(names, (std::set<std::string>{"infinipot", "cap", "nuc", "tova", "h2o", "streaming", "swa", "truncate",
                                          "snapkv", "full"}));
  EXPECT_EQ(policy_names(), "infinipot, cap, nuc, tova, h2o, streaming, swa, truncate, snapkv, full");
  EXPECT_EQ(policy_names("|"), "infinipot|cap|nuc|tova|h2o|streaming|swa|truncate|snapkv|full");
}

TEST(PolicyRegistry, UnknownNamesThrowNamingTheKnownOnes) {
  for (const char* bad : {"", "recent", "Infinipot", "INFINIPOT", "h2o ", " swa", "snap-kv", "full\n"}) {
    try {
      find_policy(bad);
      ADD_FAILURE() << "found '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("{policy} must be one of"), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + std::string(bad) + "'"), std::string::npos) << msg;
      for (const auto& info : policies()) EXPECT_NE(msg.find(info.name), std::string::npos) << msg;
    }
  }
}

TEST(PolicyRegistry, ReadingsSettingsAndFactories) {
  for (const auto& info : policies()) {
    SCOPED_TRACE(info.name);
    const std::string name = info.name;
    ASSERT_NE(info.reading, nullptr);
    EXPECT_EQ(info.required & ~info.settings, 0u) << "a required setting the policy does not read";
    if (name == "full") {
      EXPECT_EQ(info.make, nullptr);
      EXPECT_EQ(info.reading, &reading_full_cache());
      EXPECT_EQ(info.settings, bit(Setting::Ctx));
      EXPECT_FALSE(info.reading->reads_a_stream());
      continue;
    }
    ASSERT_NE(info.make, nullptr);
    EXPECT_EQ(info.reading, name == "snapkv" ? &reading_whole_input() : &reading_through_pot());
    EXPECT_EQ(info.reading->reads_a_stream(), name != "snapkv");
    EXPECT_TRUE(info.requires_setting(Setting::Pot));
    EXPECT_FALSE(info.accepts(Setting::Ctx));
    EXPECT_EQ(info.accepts(Setting::Keep), name != "snapkv") << "snapkv keeps what its pot size says";
    const auto p = info.make(PolicyParams{});
    ASSERT_NE(p, nullptr);
    // The catalyst settings are offered exactly to the policies that measure the catalyst.
    EXPECT_EQ(info.accepts(Setting::Catalyst), p->needs().catalyst);
    EXPECT_EQ(info.accepts(Setting::CapRows), p->needs().catalyst);
    // A pot measures at most one kind of attention per policy (MemoryPot has one buffer).
    const PolicyNeeds n = p->needs();
    EXPECT_LE(int(n.catalyst) + int(n.accumulated) + int(n.last_query), 1);
  }
}

}  // namespace
}  // namespace infinipot
