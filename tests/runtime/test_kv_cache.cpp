// kv_cache.cl (kv_gather, the pot's compaction of the KV store) against ref::kv_gather in
// tests/support/cpu_ref.h (attention over a gathered cache: test_attention.cpp).
#include <vector>
#include <gtest/gtest.h>

#include "runtime/ops/kv_cache.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using testing_support::all_close;
using testing_support::random_floats;

// Copies (kv_gather) are bit-exact.
constexpr double kExactTol = 0.0;

class LayerKernel : public testing_support::KernelTest {};

TEST_F(LayerKernel, KvGatherMatchesReference) {
  const int n_kv = 3, hd = 16, cap = 24, n_keep = 7;
  const std::vector<float> src = random_floats(size_t(n_kv) * cap * hd, 510);
  std::vector<float> dst = random_floats(src.size(), 511);  // slots >= n_keep must survive
  // Each head keeps its own entries (the pot compacts heads independently), in slot order.
  const std::vector<int> keep = {0, 2, 3, 9, 10, 20, 23,   //
                                 1, 4, 5, 6, 7, 8, 22,     //
                                 0, 1, 2, 3, 4, 5, 6};
  auto d_src = upload(src);
  auto d_dst = upload(dst);
  auto d_keep = upload(keep);
  ops::kv_gather(ctx(), d_src, d_dst, n_kv, cap, hd, d_keep, n_keep);
  ref::kv_gather(src.data(), dst.data(), n_kv, cap, hd, keep.data(), n_keep);
  EXPECT_TRUE(all_close("kv_gather", download_all(d_dst), dst, kExactTol));
}

}  // namespace
}  // namespace infinipot
