// The pot's choice on the device (pot/device_choice.h, cl_kernels/pot_select.cl) against the host
// reference (pot/selection.h): spread_scores, take_best and choose_survivors on many random cases.
//
// Tolerance: exact. The integer results (taken marks, survivor slots) must be identical. The spread
// only moves floats, so its output must be the same bits (NaN compared as NaN: the payload is not
// part of the contract); group sums are added in the host's order, so the whole choice sees the
// same floats the host does.
//
// The cases stress what decides a choice: NaNs (few, many, all), many ties (scores drawn from a
// handful of values, +-0 and +-inf among them), unit runs (short, long, one over everything; equal
// labels that are not adjacent), windows back/fwd from 0 to past the row, the outright keeps
// (pinned, head, recent, overlapping), every grouping, 0, 1 and 2 stages, keep == size and
// keep == pinned, n = 1, n not a power of two and n = 65536, and work-groups of odd sizes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "pot/device_choice.h"
#include "pot/selection.h"
#include "runtime/cl_error.h"
#include "tests/runtime/kernel_fixture.h"

namespace infinipot {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kGuard = 512;  // elements after a row that a kernel must leave alone

struct Rng {
  std::mt19937 g;
  explicit Rng(uint32_t seed) : g(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }  // [lo, hi]
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; }
  template <typename T>
  T pick(const std::vector<T>& v) { return v[uniform(0, int(v.size()) - 1)]; }
};

// Scores with `nan_share` NaNs; `few` draws from a handful of values (ties everywhere), else
// continuous values with an occasional subnormal or huge one.
std::vector<float> random_scores(Rng& r, size_t n, double nan_share, bool few) {
  static const std::vector<float> kFew{-2.0f, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f, 3.0f, kInf, -kInf};
  std::vector<float> v(n);
  for (float& x : v) {
    if (r.chance(nan_share)) x = kNaN;
    else if (few) x = r.pick(kFew);
    else if (r.chance(0.02)) x = r.pick(std::vector<float>{1e-40f, -3e-42f, 3e38f, -1e30f});
    else x = std::uniform_real_distribution<float>(-4.0f, 4.0f)(r.g);
  }
  return v;
}

// Unit labels in runs of 1..max_run slots; labels come from {0, 1, 2}, so neighbouring runs
// sometimes merge and equal labels recur apart.
std::vector<int> random_units(Rng& r, size_t n, int max_run) {
  std::vector<int> u(n);
  for (size_t i = 0; i < n;) {
    const int len = r.uniform(1, max_run), label = r.uniform(0, 2);
    for (int k = 0; k < len && i < n; ++k) u[i++] = label;
  }
  return u;
}

double random_nan_share(Rng& r) { return r.pick(std::vector<double>{0.0, 0.0, 0.05, 0.3, 0.9, 1.0}); }

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, sizeof a) == 0;
}

class PotSelectKernel : public testing_support::KernelTest {
 protected:
  template <typename T>
  std::vector<T> read(const cl::Buffer& b, size_t n) {
    std::vector<T> v(n);
    ctx().read(b, v.data(), n * sizeof(T));
    return v;
  }
  cl::Buffer scratch(size_t bytes) { return ctx().memory().alloc(cl::MemCategory::Scratch, std::max<size_t>(bytes, 4), "test"); }
  // The largest work-group the row kernels allow on this device.
  int kernel_max_work_group() {
    size_t max_items = 0;
    cl::Kernel k = ctx().kernel("pot_select.cl", "pot_take_best");
    cl::check(clGetKernelWorkGroupInfo(k.get(), ctx().device().id, CL_KERNEL_WORK_GROUP_SIZE, sizeof max_items,
                                       &max_items, nullptr),
              "clGetKernelWorkGroupInfo");
    return int(max_items);
  }
  int random_work_group(Rng& r) {
    return r.pick(std::vector<int>{0, 0, 1, 2, 3, 7, 64, 100, 255, 256, kernel_max_work_group()});
  }
};

// ---- spread -------------------------------------------------------------------------------

struct SpreadCase {
  int n, lo, back, fwd, max_run, work_group;  // max_run 0: no units
  double nan_share;
  bool few;
  std::string describe() const {
    std::ostringstream s;
    s << "n=" << n << " lo=" << lo << " back=" << back << " fwd=" << fwd << " max_run=" << max_run
      << " work_group=" << work_group << " nan_share=" << nan_share << " few=" << few;
    return s.str();
  }
};

void check_spread(cl::Context& c, const SpreadCase& k, uint32_t seed) {
  Rng r(seed);
  const std::vector<float> in = random_scores(r, k.n, k.nan_share, k.few);
  const std::vector<int> unit = k.max_run ? random_units(r, k.n, k.max_run) : std::vector<int>{};
  std::vector<float> want(k.n, -12345.0f);
  spread_scores(in.data(), k.max_run ? unit.data() : nullptr, k.lo, k.n, k.back, k.fwd, want.data());

  DeviceChoice choice(c, 1, 1, k.n + 5, ChoiceShape{}, k.work_group);
  cl::Buffer d_in = testing_support::upload(c, in);
  cl::Buffer d_unit = k.max_run ? testing_support::upload(c, unit) : cl::Buffer();
  cl::Buffer d_out = testing_support::upload(c, std::vector<float>(k.n + kGuard, -12345.0f));
  choice.spread(d_in, k.max_run ? &d_unit : nullptr, k.lo, k.n, k.back, k.fwd, d_out);
  std::vector<float> got(k.n + kGuard);
  c.read(d_out, got.data(), got.size() * sizeof(float));
  want.resize(got.size(), -12345.0f);  // nothing written outside [lo, hi)
  for (int j = 0; j < k.n + kGuard; ++j)
    if (!same_float(got[j], want[j])) {
      ADD_FAILURE() << "spread " << k.describe() << " seed=" << seed << ": slot " << j << " got " << got[j]
                    << " want " << want[j];
      return;
    }
}

TEST_F(PotSelectKernel, SpreadMatchesHostOnRandomRows) {
  Rng r(11);
  for (int i = 0; i < testing_support::full_or_small(150, 20); ++i) {
    SpreadCase k;
    k.n = r.pick(std::vector<int>{1, 2, 3, 5, 17, 64, 100, 257, 1000, 3001}) + (r.chance(0.3) ? r.uniform(0, 9) : 0);
    k.lo = r.chance(0.4) ? 0 : r.uniform(0, k.n);
    k.back = r.pick(std::vector<int>{0, 0, 1, 2, 5, 31, k.n, 1 << 30});
    k.fwd = r.pick(std::vector<int>{0, 0, 1, 3, 8, 40, k.n});
    k.max_run = r.pick(std::vector<int>{0, 0, 1, 3, 12, 200, k.n});
    k.work_group = random_work_group(r);
    k.nan_share = random_nan_share(r);
    k.few = r.chance(0.5);
    check_spread(ctx(), k, 1000 + i);
  }
}

TEST_F(PotSelectKernel, SpreadMatchesHostOnALongRow) {
  // 65536 slots (5000 small: still several per work-item): units from short runs to one run
  // over a quarter of the row, a wide window.
  const int n = testing_support::full_or_small(65536, 5000);
  check_spread(ctx(), SpreadCase{n, 3, 7, 2, n * 20000 / 65536, 0, 0.1, true}, 7);
  check_spread(ctx(), SpreadCase{n, 0, 1000, 1000, 0, 0, 0.3, false}, 8);
}

// ---- take_best ----------------------------------------------------------------------------

struct TakeCase {
  int n, lo, hi, count, work_group;
  double taken_share, nan_share;
  bool few;
  std::string describe() const {
    std::ostringstream s;
    s << "n=" << n << " lo=" << lo << " hi=" << hi << " count=" << count << " work_group=" << work_group
      << " taken_share=" << taken_share << " nan_share=" << nan_share << " few=" << few;
    return s.str();
  }
};

void check_take(cl::Context& c, const TakeCase& k, uint32_t seed) {
  Rng r(seed);
  const std::vector<float> score = random_scores(r, k.n, k.nan_share, k.few);
  std::vector<char> taken(k.n);
  for (char& t : taken) t = r.chance(k.taken_share);
  std::vector<unsigned char> d_taken_init(taken.begin(), taken.end());
  d_taken_init.resize(k.n + kGuard, 0xAB);  // bytes past the row must stay as they are
  take_best(score.data(), k.lo, k.hi, k.count, taken);

  DeviceChoice choice(c, 1, 1, std::max(k.n, 1), ChoiceShape{}, k.work_group);
  cl::Buffer d_score = testing_support::upload(c, score);
  cl::Buffer d_taken = testing_support::upload(c, d_taken_init);
  choice.take_best(d_score, k.lo, k.hi, k.count, d_taken);
  std::vector<unsigned char> got(k.n + kGuard);
  c.read(d_taken, got.data(), got.size());
  for (int j = k.n; j < k.n + kGuard; ++j)
    if (got[j] != 0xAB) {
      ADD_FAILURE() << "take_best " << k.describe() << " seed=" << seed << ": wrote past the row at " << j;
      return;
    }
  for (int j = 0; j < k.n; ++j)
    if (bool(got[j]) != bool(taken[j])) {
      ADD_FAILURE() << "take_best " << k.describe() << " seed=" << seed << ": slot " << j << " (score "
                    << score[j] << ") device " << int(got[j]) << " host " << int(taken[j]);
      return;
    }
}

TEST_F(PotSelectKernel, TakeBestMatchesHostOnRandomRows) {
  Rng r(23);
  for (int i = 0; i < testing_support::full_or_small(200, 20); ++i) {
    TakeCase k;
    k.n = r.pick(std::vector<int>{1, 2, 3, 7, 33, 100, 256, 511, 1000, 4099}) + (r.chance(0.3) ? r.uniform(0, 9) : 0);
    k.lo = r.chance(0.5) ? 0 : r.uniform(0, k.n);
    k.hi = r.chance(0.6) ? k.n : r.uniform(k.lo, k.n);
    const int span = k.hi - k.lo;
    k.count = r.pick(std::vector<int>{0, 1, 2, span / 3, span / 2, span - 1, span, span + 3});
    k.count = std::max(k.count, 0);
    k.work_group = random_work_group(r);
    k.taken_share = r.pick(std::vector<double>{0.0, 0.2, 0.7, 1.0});
    k.nan_share = random_nan_share(r);
    k.few = r.chance(0.6);
    check_take(ctx(), k, 2000 + i);
  }
}

TEST_F(PotSelectKernel, TakeBestMatchesHostOnALongRow) {
  const int n = testing_support::full_or_small(65536, 5000);
  check_take(ctx(), TakeCase{n, 5, n, n * 20000 / 65536, 0, 0.1, 0.1, true}, 9);
  check_take(ctx(), TakeCase{n, 0, n, n - 1, 0, 0.0, 0.0, false}, 10);
}

TEST_F(PotSelectKernel, TakeBestBreaksTiesToTheLaterSlot) {
  // The host's hand example (tests/pot/test_pot_selection.cpp), step by step on the device.
  //                             0  1     2  3  4     5  6
  const std::vector<float> score{3, kNaN, 1, 3, -kInf, 3, kNaN};
  DeviceChoice choice(ctx(), 1, 1, 7, ChoiceShape{});
  cl::Buffer d_score = upload(score);
  cl::Buffer d_taken = upload(std::vector<unsigned char>(7, 0));
  auto marked = [&] {
    std::vector<int> out;
    const auto t = read<unsigned char>(d_taken, 7);
    for (int i = 0; i < 7; ++i)
      if (t[i]) out.push_back(i);
    return out;
  };
  choice.take_best(d_score, 0, 7, 2, d_taken);
  EXPECT_EQ(marked(), (std::vector<int>{3, 5}));
  choice.take_best(d_score, 0, 7, 2, d_taken);
  EXPECT_EQ(marked(), (std::vector<int>{0, 2, 3, 5}));
  choice.take_best(d_score, 0, 7, 1, d_taken);
  EXPECT_EQ(marked(), (std::vector<int>{0, 2, 3, 4, 5}));
  choice.take_best(d_score, 0, 7, 1, d_taken);
  EXPECT_EQ(marked(), (std::vector<int>{0, 2, 3, 4, 5, 6}));
  choice.take_best(d_score, 0, 7, 5, d_taken);
  EXPECT_EQ(marked(), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  // -0 and +0 are the same score: the later slot wins.
  cl::Buffer zeros = upload(std::vector<float>{0.0f, -0.0f, 0.0f, -0.0f});
  cl::Buffer t4 = upload(std::vector<unsigned char>(4, 0));
  choice.take_best(zeros, 0, 4, 1, t4);
  EXPECT_EQ(read<unsigned char>(t4, 4), (std::vector<unsigned char>{0, 0, 0, 1}));
}

// ---- the whole choice ---------------------------------------------------------------------

struct ChooseCase {
  int L = 1, H = 1, n = 0, pad = 0, extra_cap = 0, pinned = 0, keep = 0;
  ChoiceShape shape;
  bool unit_rows = false;     // give units (shape.units decides whether they are used)
  int max_run = 1;
  std::vector<int> counts;    // one per stage
  double nan_share = 0;
  bool few = false;
  int work_group = 0;
  std::string describe() const {
    std::ostringstream s;
    s << "L=" << L << " H=" << H << " n=" << n << " stride=" << n + pad << " pinned=" << pinned << " keep=" << keep
      << " per_layer=" << shape.per_layer << " per_head=" << shape.per_head << " head=" << shape.head
      << " recent=" << shape.recent << " back=" << shape.back << " fwd=" << shape.fwd << " units=" << shape.units
      << "/" << unit_rows << " max_run=" << max_run << " stages=" << counts.size() << " [";
    for (int c : counts) s << c << " ";
    s << "] nan_share=" << nan_share << " few=" << few << " work_group=" << work_group;
    return s.str();
  }
};

void check_choose(cl::Context& c, const ChooseCase& k, uint32_t seed) {
  Rng r(seed);
  const int stride = k.n + k.pad;
  const size_t total = std::max<size_t>(size_t(k.L) * k.H * stride, 1);  // no empty buffers
  std::vector<std::vector<float>> score;
  for (size_t i = 0; i < k.counts.size(); ++i) score.push_back(random_scores(r, total, k.nan_share, k.few));
  std::vector<int> unit;
  for (int row = 0; row < k.L * k.H; ++row) {  // each row its own runs: a group reads its first member's
    const std::vector<int> u = random_units(r, stride, k.max_run);
    unit.insert(unit.end(), u.begin(), u.end());
  }
  unit.resize(total);

  PotScores s;
  s.n_layers = k.L, s.n_heads = k.H, s.stride = stride, s.size = k.n, s.pinned = k.pinned, s.keep = k.keep;
  s.unit = k.unit_rows ? unit.data() : nullptr;
  std::vector<ChoiceStage> stages;
  for (size_t i = 0; i < k.counts.size(); ++i) stages.push_back({score[i].data(), k.counts[i]});
  const std::vector<int> want = choose_survivors(s, stages, k.shape);

  std::vector<cl::Buffer> d_score;
  for (const auto& v : score) d_score.push_back(testing_support::upload(c, v));
  cl::Buffer d_unit = testing_support::upload(c, unit);
  DeviceScores ds;
  ds.n_layers = k.L, ds.n_heads = k.H, ds.stride = stride, ds.size = k.n, ds.pinned = k.pinned, ds.keep = k.keep;
  ds.unit = k.unit_rows ? &d_unit : nullptr;
  std::vector<DeviceStage> d_stages;
  for (size_t i = 0; i < k.counts.size(); ++i) d_stages.push_back({&d_score[i], k.counts[i]});
  const size_t out_n = size_t(k.L) * k.H * k.keep;
  cl::Buffer d_out = c.memory().alloc(cl::MemCategory::Scratch, std::max<size_t>(out_n, 1) * sizeof(int), "survivors");
  DeviceChoice choice(c, k.L, k.H, std::max(k.n + k.extra_cap, 1), k.shape, k.work_group);
  choice.choose(ds, d_stages, k.shape, d_out);
  std::vector<int> got(out_n);
  c.read(d_out, got.data(), out_n * sizeof(int));
  if (got != want) {
    size_t i = 0;
    while (got[i] == want[i]) ++i;
    ADD_FAILURE() << "choose " << k.describe() << " seed=" << seed << ": first difference at (layer, head, i) = ("
                  << i / (size_t(k.H) * k.keep) << ", " << i / k.keep % k.H << ", " << i % k.keep << "): device "
                  << got[i] << " host " << want[i];
  }
}

ChooseCase random_choose_case(Rng& r, int work_group) {
  ChooseCase k;
  k.L = r.uniform(1, 3);
  k.H = r.uniform(1, 3);
  k.n = r.pick(std::vector<int>{0, 1, 1, 2, 5, 16, 31, 100, 255, 600, 1500}) + (r.chance(0.3) ? r.uniform(0, 9) : 0);
  k.pad = r.pick(std::vector<int>{0, 0, 1, 7});
  k.extra_cap = r.pick(std::vector<int>{0, 0, 3});
  k.keep = r.pick(std::vector<int>{0, 1, k.n / 4, k.n / 2, k.n - 1, k.n, k.n});
  k.keep = std::clamp(k.keep, 0, k.n);
  k.pinned = r.pick(std::vector<int>{0, 0, 1, 4, k.keep / 3, k.keep});
  k.pinned = std::clamp(k.pinned, 0, k.keep);
  k.shape.per_layer = r.chance(0.5);
  k.shape.per_head = r.chance(0.5);
  k.shape.head = r.pick(std::vector<int>{0, 0, 1, 3, k.n});
  k.shape.recent = r.pick(std::vector<int>{0, 0, 2, 8, k.n / 2, k.n});
  k.shape.back = r.pick(std::vector<int>{0, 0, 1, 2, 6, k.n});
  k.shape.fwd = r.pick(std::vector<int>{0, 0, 1, 3, k.n});
  k.shape.units = r.chance(0.6);
  k.unit_rows = r.chance(0.8);
  k.max_run = r.pick(std::vector<int>{1, 3, 8, 50, std::max(k.n, 1)});
  const int stages = r.pick(std::vector<int>{0, 1, 1, 2, 2, 2});
  for (int i = 0; i < stages; ++i) k.counts.push_back(r.pick(std::vector<int>{0, 1, 2, k.keep / 2, k.keep, 1000}));
  k.nan_share = random_nan_share(r);
  k.few = r.chance(0.5);
  k.work_group = work_group;
  return k;
}

TEST_F(PotSelectKernel, ChooseMatchesHostOnRandomCases) {
  Rng r(37);
  for (int i = 0; i < testing_support::full_or_small(250, 25); ++i)
    check_choose(ctx(), random_choose_case(r, 0), 3000 + i);
}

TEST_F(PotSelectKernel, ChooseMatchesHostWithAnyWorkGroupSize) {
  Rng r(41);
  for (int i = 0; i < testing_support::full_or_small(60, 10); ++i)
    check_choose(ctx(), random_choose_case(r, random_work_group(r)), 4000 + i);
}

TEST_F(PotSelectKernel, ChooseMatchesHostOnEdgeCases) {
  auto base = [] {
    ChooseCase k;
    k.L = 2, k.H = 2, k.n = 40, k.pinned = 4, k.keep = 20, k.counts = {6, 0}, k.unit_rows = true, k.max_run = 4;
    k.shape.units = true, k.shape.back = 1, k.shape.fwd = 1, k.few = true, k.nan_share = 0.2;
    return k;
  };
  uint32_t seed = 5000;
  ChooseCase k = base();
  k.keep = k.n;  // keep == size: everything survives
  check_choose(ctx(), k, seed++);
  k = base();
  k.keep = k.pinned;  // keep == pinned: only the prefix
  check_choose(ctx(), k, seed++);
  k = base();
  k.counts = {};  // no stages: the newest fill the free places
  k.shape.head = 3;
  check_choose(ctx(), k, seed++);
  k = base();
  k.shape.recent = 30, k.shape.head = 10;  // recent overlaps the head and the prefix
  check_choose(ctx(), k, seed++);
  k = base();
  k.n = 1, k.pinned = 0, k.keep = 1, k.counts = {1};
  check_choose(ctx(), k, seed++);
  k = base();
  k.nan_share = 1.0;  // every score NaN: the latest free slots
  check_choose(ctx(), k, seed++);
  for (bool per_layer : {false, true})
    for (bool per_head : {false, true}) {
      k = base();
      k.shape.per_layer = per_layer, k.shape.per_head = per_head;
      check_choose(ctx(), k, seed++);
    }
}

TEST_F(PotSelectKernel, GroupSumsAddInTheHostsOrder) {
  // One group over 2 layers x 2 heads. Slot 2's rows are 2^24, 1, -2^24, 1: in the host's
  // order (layer-major) 2^24 + 1 rounds back to 2^24 and the sum is 1; heads-first it would be
  // 2. Slot 3 sums to 1.5 either way. With one free place the host keeps slot 3.
  const int L = 2, H = 2, n = 4;
  std::vector<float> score(L * H * n, kNaN);
  const float big = 16777216.0f;
  const float slot2[] = {big, 1.0f, -big, 1.0f}, slot3[] = {0.5f, 0.5f, 0.25f, 0.25f};
  for (int row = 0; row < L * H; ++row) score[row * n + 2] = slot2[row], score[row * n + 3] = slot3[row];
  PotScores s;
  s.n_layers = L, s.n_heads = H, s.stride = n, s.size = n, s.pinned = 1, s.keep = 2;
  ChoiceShape shared;
  shared.per_layer = false;
  const std::vector<int> want = choose_survivors(s, {{score.data(), 1}}, shared);
  ASSERT_EQ(want, (std::vector<int>{0, 3, 0, 3, 0, 3, 0, 3}));

  cl::Buffer d_score = upload(score);
  cl::Buffer d_out = scratch(want.size() * sizeof(int));
  DeviceScores ds;
  ds.n_layers = L, ds.n_heads = H, ds.stride = n, ds.size = n, ds.pinned = 1, ds.keep = 2;
  DeviceChoice choice(ctx(), L, H, n, shared);
  choice.choose(ds, {{&d_score, 1}}, shared, d_out);
  EXPECT_EQ(read<int>(d_out, want.size()), want);
}

TEST_F(PotSelectKernel, ChooseMatchesHostOnALongRow) {
  ChooseCase k;
  const bool small = testing_support::small_shapes();  // 6000 slots: still several per work-item
  k.L = 2, k.H = 2, k.n = small ? 6000 : 65536, k.pinned = 13, k.keep = small ? 900 : 9000;
  k.counts = {small ? 300 : 3000, 1};
  k.shape.per_layer = true, k.shape.per_head = false, k.shape.units = true, k.unit_rows = true, k.max_run = 9;
  k.shape.head = 5, k.shape.recent = 64, k.shape.back = 2, k.shape.fwd = 1;
  k.nan_share = 0.05, k.few = true;
  check_choose(ctx(), k, 6000);
}

// ---- errors and planning ------------------------------------------------------------------

TEST_F(PotSelectKernel, ScratchIsPlannedInKvSelection) {
  ChoiceShape per_head;
  per_head.per_head = true;
  const uint64_t before = ctx().memory().used(cl::MemCategory::KvSelection);
  {
    DeviceChoice choice(ctx(), 3, 2, 100, per_head);
    EXPECT_EQ(ctx().memory().used(cl::MemCategory::KvSelection) - before, DeviceChoice::bytes_needed(3, 2, 100, per_head));
  }
  EXPECT_EQ(ctx().memory().used(cl::MemCategory::KvSelection), before);
  ChoiceShape shared;
  shared.per_layer = false;
  EXPECT_EQ(DeviceChoice::n_groups(3, 2, per_head), 6);
  EXPECT_EQ(DeviceChoice::n_groups(3, 2, shared), 1);
  EXPECT_LT(DeviceChoice::bytes_needed(3, 2, 100, shared), DeviceChoice::bytes_needed(3, 2, 100, per_head));
}

TEST_F(PotSelectKernel, BadArgumentsAreRefused) {
  const int L = 2, H = 2, n = 10;
  ChoiceShape shape;
  DeviceChoice choice(ctx(), L, H, n, shape);
  cl::Buffer score = upload(std::vector<float>(L * H * n, 1.0f));
  cl::Buffer out = scratch(L * H * n * sizeof(int));
  DeviceScores s;
  s.n_layers = L, s.n_heads = H, s.stride = n, s.size = n, s.pinned = 2, s.keep = 5;
  const std::vector<DeviceStage> stages{{&score, 2}};
  EXPECT_NO_THROW(choice.choose(s, stages, shape, out));

  auto bad = [&](DeviceScores t, std::vector<DeviceStage> st, ChoiceShape sh) { choice.choose(t, st, sh, out); };
  DeviceScores t = s;
  t.stride = n - 1;  // stride < size
  EXPECT_THROW(bad(t, stages, shape), std::invalid_argument);
  t = s, t.n_layers = 0;
  EXPECT_THROW(bad(t, stages, shape), std::invalid_argument);
  t = s, t.pinned = 6;  // pinned > keep
  EXPECT_THROW(bad(t, stages, shape), std::invalid_argument);
  t = s, t.keep = n + 1;  // keep > size
  EXPECT_THROW(bad(t, stages, shape), std::invalid_argument);
  ChoiceShape sh = shape;
  sh.back = -1;
  EXPECT_THROW(bad(s, stages, sh), std::invalid_argument);
  sh = shape, sh.recent = -1;
  EXPECT_THROW(bad(s, stages, sh), std::invalid_argument);
  EXPECT_THROW(bad(s, {{nullptr, 2}}, shape), std::invalid_argument);
  EXPECT_THROW(bad(s, {{&score, -1}}, shape), std::invalid_argument);

  // The device's own limits: more slots or groups than the scratch holds, buffers too small.
  t = s, t.stride = n + 1, t.size = n + 1;
  cl::Buffer big = upload(std::vector<float>(L * H * (n + 1), 1.0f));
  EXPECT_THROW(bad(t, {{&big, 2}}, shape), cl::ClError);
  sh = shape, sh.per_head = true;  // 4 groups; the scratch was planned for 2 (per layer)
  EXPECT_THROW(bad(s, stages, sh), cl::ClError);
  cl::Buffer short_score = upload(std::vector<float>(L * H * n - 1, 1.0f));
  EXPECT_THROW(bad(s, {{&short_score, 2}}, shape), cl::ClError);
  sh = shape, sh.units = true;
  cl::Buffer short_unit = upload(std::vector<int>(n, 0));
  t = s, t.unit = &short_unit;
  EXPECT_THROW(bad(t, stages, sh), cl::ClError);
  cl::Buffer short_out = scratch(L * H * s.keep * sizeof(int) - 4);
  EXPECT_THROW(choice.choose(s, stages, shape, short_out), cl::ClError);

  // The primitives and the constructor.
  cl::Buffer taken = upload(std::vector<unsigned char>(n, 0));
  cl::Buffer row = upload(std::vector<float>(n, 0.0f));
  EXPECT_THROW(choice.take_best(row, 3, 2, 1, taken), std::invalid_argument);
  EXPECT_THROW(choice.take_best(row, 0, n, -1, taken), std::invalid_argument);
  EXPECT_THROW(choice.take_best(row, 0, n + 1, 1, taken), cl::ClError);
  EXPECT_THROW(choice.spread(row, nullptr, 0, n, -1, 0, row), std::invalid_argument);
  EXPECT_THROW(choice.spread(row, nullptr, 0, n + 1, 0, 0, row), cl::ClError);
  EXPECT_THROW(DeviceChoice(ctx(), 0, 1, 10, shape), std::invalid_argument);
  EXPECT_THROW(DeviceChoice(ctx(), 1, 1, 0, shape), std::invalid_argument);
  EXPECT_THROW(DeviceChoice(ctx(), 1, 1, 10, shape, -1), std::invalid_argument);
}

}  // namespace
}  // namespace infinipot
