// cross_entropy.cl (the running log-sum-exp and target logit over vocabulary tiles) against
// ref::cross_entropy in tests/support/cpu_ref.h.
#include <algorithm>
#include <cmath>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/ops/cross_entropy.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using testing_support::all_close;
using testing_support::random_floats;

// Cross-entropy: fp32 sums of up to `tile` exponentials in [0, 1] (relative error ~sqrt(tile) ulp,
// 2.3e-6 for 384) become the same absolute error after log, plus the rounding of lse itself
// (|lse| * 6e-8). |err| <= kCeTol * (1 + |value|) leaves ~4x headroom.
constexpr double kCeTol = 1e-5;

class LayerKernel : public testing_support::KernelTest {};

TEST_F(LayerKernel, CrossEntropyOverTilesMatchesReference) {
  const int n = 6, vocab = 1000, tile = 384;  // tiles of 384, 384 and 232
  std::vector<float> logits = random_floats(size_t(n) * vocab, 600, -10.0f, 10.0f);
  for (int v = 0; v < vocab; ++v) logits[size_t(4) * vocab + v] += 100.0f;  // exp(110) overflows fp32 unless shifted
  for (int v = 0; v < vocab; ++v) logits[size_t(5) * vocab + v] *= 5.0f;    // a peaked distribution
  const std::vector<int> targets = {0, 999, 383, 384, -1, 500};             // tile edges; row 4 unscored
  auto d_targets = upload(targets);
  auto m = ctx().memory().alloc(cl::MemCategory::Scratch, n * 4, "ce m");
  auto s = ctx().memory().alloc(cl::MemCategory::Scratch, n * 4, "ce s");
  auto tl = ctx().memory().alloc(cl::MemCategory::Scratch, n * 4, "ce tl");
  ops::ce_init(ctx(), m, s, tl, n);
  for (int v0 = 0; v0 < vocab; v0 += tile) {
    const int w = std::min(tile, vocab - v0);
    std::vector<float> t(size_t(n) * w);
    for (int r = 0; r < n; ++r)
      std::copy_n(logits.begin() + size_t(r) * vocab + v0, w, t.begin() + size_t(r) * w);
    auto d_t = upload(t);
    ops::ce_update(ctx(), d_t, n, w, v0, d_targets, m, s, tl);
  }
  const std::vector<float> hm = download_all(m), hs = download_all(s), htl = download_all(tl);
  const std::vector<ref::CrossEntropyRow> want = ref::cross_entropy(logits.data(), n, vocab, targets.data());
  std::vector<float> got_lse(n), want_lse(n), got_nll, want_nll;
  std::vector<double> nll_tol;
  for (int r = 0; r < n; ++r) {
    got_lse[r] = float(double(hm[r]) + std::log(double(hs[r])));
    want_lse[r] = float(want[r].lse);
    if (targets[r] < 0) continue;
    got_nll.push_back(float(double(got_lse[r]) - htl[r]));
    want_nll.push_back(float(want[r].nll));
    nll_tol.push_back(kCeTol * (1 + std::fabs(want[r].lse)));
  }
  EXPECT_TRUE(all_close("cross-entropy lse", got_lse, want_lse,
                        [&](size_t i) { return kCeTol * (1 + std::fabs(want_lse[i])); }));
  EXPECT_TRUE(all_close("cross-entropy nll", got_nll, want_nll, [&](size_t i) { return nll_tol[i]; }));
  EXPECT_EQ(htl[4], 0.0f) << "an unscored row's target logit stays at its initial 0";
}

}  // namespace
}  // namespace infinipot
