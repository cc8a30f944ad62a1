// gemm.cl (the packed prefill GEMM: A packing, the product over dequantized panels and with the
// dequantization inside) against ref::pack_a and ref::gemm_abt in tests/support/cpu_ref.h, for
// every weight type the device supports and every tile height. The integer GEMM:
// test_gemm_native.cpp.
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/dequant.h"
#include "runtime/ops/gemm.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/runtime/weight_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::dot_bounds;
using testing_support::random_floats;
using testing_support::test_cols;
using testing_support::type_name;
using testing_support::weight_kernel_types;
using testing_support::weight_type_param_name;
using testing_support::WeightKernel;

// Copies and zero padding move floats without arithmetic: bit-exact.
constexpr double kCopyTol = 0.0;

// The weight formats feeding the prefill GEMM: dequantize to panels, pack the activations,
// multiply; compared with the product of the reference-dequantized weights.
TEST_P(WeightKernel, GemmOverDequantizedPanelsMatchesReference) {
  const TensorType t = GetParam();
  const int m = 19, n = 45, k = test_cols(t);
  auto W = make_weight(t, n, k, 17);
  const std::vector<float> X = random_floats(size_t(m) * k, 18);
  auto d_X = upload(X);
  auto Ap =
      ctx().memory().alloc(cl::MemCategory::Gemm, ops::packed_a_floats(m, k, ctx().tuning().gemm_tile_rows) * 4, "Ap");
  auto Bp = ctx().memory().alloc(cl::MemCategory::Gemm, ops::panel_floats(n, k) * 4, "Bp");
  auto C = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(m) * n * 4, "C");
  ops::pack_a(ctx(), d_X, m, k, k, Ap);
  ops::dequant_to_panels(ctx(), W.dev, Bp);
  ops::gemm_packed(ctx(), m, n, k, Ap, Bp, C, n, false);

  std::vector<float> expect(size_t(m) * n);
  ref::gemm_abt(m, n, k, X.data(), k, W.dequant.data(), k, expect.data(), n, false);
  const auto bound = dot_bounds(m, n, k, X, k, W.dequant, k, expect, n, false);
  EXPECT_TRUE(all_close(std::string("gemm over panels ") + type_name(t), download_all(C), expect,
                        [&](size_t i) { return bound[i]; }));
}

// The same product with the dequantization inside the GEMM (gemm.cl gemm_dequant): every row
// slice the forward pass asks for (whole matrix, an LM-head tile from an unaligned row0), m not
// a multiple of the tile, n not a multiple of 16, written from an offset into a wider C whose
// other elements must survive; with and without accumulation.
TEST_P(WeightKernel, GemmDequantMatchesReference) {
  const TensorType t = GetParam();
  const int rows = 45, k = test_cols(t);
  auto W = make_weight(t, rows, k, 21);
  for (int m : {1, 19}) {
    ASSERT_TRUE(ops::gemm_dequant_fits(ctx(), W.dev));
    const std::vector<float> X = random_floats(size_t(m) * k, 22 + m);
    auto d_X = upload(X);
    auto Ap = ctx().memory().alloc(cl::MemCategory::Gemm, ops::packed_a_floats(m, k, ctx().tuning().gemm_tile_rows) * 4,
                                   "Ap");
    ops::pack_a(ctx(), d_X, m, k, k, Ap);
    for (auto [row0, n] : {std::pair{0, 45}, std::pair{7, 29}}) {
      for (bool accumulate : {false, true}) {
        const int ldc = n + 5;
        const size_t c_off = 2;
        const std::vector<float> C0 = random_floats(c_off + size_t(m) * ldc, 23 + n);
        auto C = upload(C0);
        auto Bp = upload(random_floats(ops::panel_floats(n, k), 24));  // scratch: garbage before
        ops::gemm_dequant(ctx(), m, W.dev, row0, n, Ap, Bp, C, ldc, accumulate, c_off);
        const float* w = W.dequant.data() + size_t(row0) * k;
        std::vector<float> expect = C0;
        ref::gemm_abt(m, n, k, X.data(), k, w, k, expect.data() + c_off, ldc, accumulate);
        const std::vector<float> c0(C0.begin() + c_off, C0.end());
        const std::vector<float> wn(w, w + size_t(n) * k);
        const auto bound = dot_bounds(m, n, k, X, k, wn, k, c0, ldc, accumulate);
        auto tol = [&](size_t i) {
          return i < c_off || (i - c_off) % ldc >= size_t(n) ? 0.0 : bound[i - c_off];
        };
        EXPECT_TRUE(all_close(std::string("gemm_dequant ") + type_name(t) + " m=" + std::to_string(m) + " rows " +
                                  std::to_string(row0) + ".." + std::to_string(row0 + n) +
                                  (accumulate ? " accumulate" : ""),
                              download_all(C), expect, tol));
      }
    }
  }
  auto Bp = ctx().memory().alloc(cl::MemCategory::Gemm, ops::panel_floats(10, k) * 4, "Bp");
  auto Ap = ctx().memory().alloc(cl::MemCategory::Gemm, ops::packed_a_floats(1, k, ctx().tuning().gemm_tile_rows) * 4, "Ap");
  auto C = ctx().memory().alloc(cl::MemCategory::Scratch, 64 * 4, "C");
  EXPECT_THROW(ops::gemm_dequant(ctx(), 1, W.dev, 40, 10, Ap, Bp, C, 10, false), cl::ClError) << "rows past the matrix";
}

INSTANTIATE_TEST_SUITE_P(AllDeviceTypes, WeightKernel, ::testing::ValuesIn(weight_kernel_types()),
                         weight_type_param_name);

class GemmKernel : public testing_support::KernelTest {};

// Both panel widths: 8 rows (4- and 8-row tiles) and 6 (6-row tiles).
TEST_F(GemmKernel, PackAMatchesReference) {
  for (int tile : {8, 6}) {
    std::unique_ptr<cl::Context> c;
    ASSERT_NO_THROW(c = testing_support::context_with_tuning("\"gemm_tile_rows\": " + std::to_string(tile)));
    const int panel = ops::a_panel_rows(tile);
    for (int m : {1, 5, 13, 16, 18}) {
      const int k = 40, ldx = k + 5;
      const std::vector<float> X = random_floats(size_t(m) * ldx, 30 + m);
      auto d_X = testing_support::upload(*c, X);
      // Pre-filled with garbage: the rows past m must come back as zeros.
      const size_t floats = ops::packed_a_floats(m, k, tile);
      ASSERT_EQ(floats, size_t((m + panel - 1) / panel * panel) * k);
      auto Ap = testing_support::upload(*c, random_floats(floats, 40 + m));
      ops::pack_a(*c, d_X, m, k, ldx, Ap);
      EXPECT_TRUE(all_close("pack_a m=" + std::to_string(m) + " panel " + std::to_string(panel),
                            testing_support::download(*c, Ap, floats), ref::pack_a(X.data(), m, k, ldx, panel),
                            kCopyTol));
    }
  }
  EXPECT_THROW((void)ops::a_panel_rows(5), cl::ClError) << "no kernel for 5-row tiles";
}

// Every tile height (tuning key gemm_tile_rows: 8 rows per work-item on AVX-512, 6 on AVX2,
// 4 on GPUs), whatever this machine's tuning picks.
class GemmTiles : public testing::TestWithParam<int> {};

TEST_P(GemmTiles, GemmPackedMatchesReference) {
  std::unique_ptr<cl::Context> c;
  ASSERT_NO_THROW(c = testing_support::context_with_tuning("\"gemm_tile_rows\": " + std::to_string(GetParam())))
      << "the kernel tests need an OpenCL device";
  ASSERT_EQ(c->tuning().gemm_tile_rows, GetParam());
  auto upload = [&](const std::vector<float>& v) { return testing_support::upload(*c, v); };
  struct Shape {
    int m, n, k;
  };
  // m not a multiple of 8, n not a multiple of 16, single tiles and many.
  for (Shape s : {Shape{1, 16, 64}, Shape{13, 50, 96}, Shape{37, 5, 200}, Shape{8, 16, 8}, Shape{24, 33, 576},
                  Shape{4, 16, 32}, Shape{6, 17, 24}}) {
    for (bool accumulate : {false, true}) {
      const std::string name = "gemm_packed " + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                               std::to_string(s.k) + (accumulate ? " accumulate" : "");
      const int ldc = s.n + 7;
      const size_t c_off = 3;
      const std::vector<float> A = random_floats(size_t(s.m) * s.k, 50 + s.m);
      const std::vector<float> B = random_floats(size_t(s.n) * s.k, 60 + s.n);
      const std::vector<float> C0 = random_floats(c_off + size_t(s.m) * ldc, 70 + s.k);
      auto Ap = upload(ref::pack_a(A.data(), s.m, s.k, s.k, ops::a_panel_rows(GetParam())));
      auto Bp = upload(ref::to_panels(B.data(), s.n, s.k));
      auto C = upload(C0);
      ops::gemm_packed(*c, s.m, s.n, s.k, Ap, Bp, C, ldc, accumulate, c_off);

      std::vector<float> expect = C0;
      ref::gemm_abt(s.m, s.n, s.k, A.data(), s.k, B.data(), s.k, expect.data() + c_off, ldc, accumulate);
      const std::vector<float> c0(C0.begin() + c_off, C0.end());
      const auto bound = dot_bounds(s.m, s.n, s.k, A, s.k, B, s.k, c0, ldc, accumulate);
      // Elements outside the m x n block (before c_off, columns n..ldc) must be untouched: tolerance 0.
      auto tol = [&](size_t i) {
        if (i < c_off || (i - c_off) % ldc >= size_t(s.n)) return 0.0;
        return bound[i - c_off];
      };
      EXPECT_TRUE(all_close(name + " tile " + std::to_string(GetParam()), testing_support::download(*c, C, C0.size()), expect, tol));
    }
  }
}

// gemm_dequant at every tile height: the tile product is gemm_packed's; a work-group's 16 items
// take every 16th tile of A (37 rows: fewer tiles than items, a partial tile at each height;
// 150 rows: 19-38 tiles, so items take two or three).
TEST_P(GemmTiles, GemmDequantMatchesReference) {
  std::unique_ptr<cl::Context> c;
  ASSERT_NO_THROW(c = testing_support::context_with_tuning("\"gemm_tile_rows\": " + std::to_string(GetParam())));
  const int n = 33, k = 96;
  auto W = testing_support::make_weight(*c, TensorType::Q4_1, n, k, 90);
  for (int m : {37, 150}) {
    const std::vector<float> X = random_floats(size_t(m) * k, 91 + m);
    auto d_X = testing_support::upload(*c, X);
    auto Ap = c->memory().alloc(cl::MemCategory::Gemm, ops::packed_a_floats(m, k, GetParam()) * 4, "Ap");
    auto Bp = c->memory().alloc(cl::MemCategory::Gemm, ops::panel_floats(n, k) * 4, "Bp");
    auto C = c->memory().alloc(cl::MemCategory::Scratch, size_t(m) * n * 4, "C");
    ops::pack_a(*c, d_X, m, k, k, Ap);
    ops::gemm_dequant(*c, m, W.dev, 0, n, Ap, Bp, C, n, false);
    std::vector<float> expect(size_t(m) * n);
    ref::gemm_abt(m, n, k, X.data(), k, W.dequant.data(), k, expect.data(), n, false);
    const auto bound = dot_bounds(m, n, k, X, k, W.dequant, k, expect, n, false);
    EXPECT_TRUE(all_close("gemm_dequant tile " + std::to_string(GetParam()) + " m=" + std::to_string(m),
                          testing_support::download(*c, C, size_t(m) * n), expect, [&](size_t i) { return bound[i]; }));
  }
}

INSTANTIATE_TEST_SUITE_P(RowsPerItem, GemmTiles, testing::Values(4, 6, 8));

}  // namespace
}  // namespace infinipot
