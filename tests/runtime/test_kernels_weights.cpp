// The kernels that read GGUF-encoded weights (embedding.cl, matvec.cl, dequant.cl) and the
// packed GEMM (gemm.cl), each against its CPU reference in tests/support/cpu_ref.h, for every
// weight type the device supports.
#include <cmath>
#include <ostream>
#include <utility>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace gguf {
// Names weight types in gtest/ctest output ("Q6_K" rather than a byte dump).
void PrintTo(TensorType t, std::ostream* os) { *os << quant::traits(t).name; }
}  // namespace gguf

namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::random_floats;

// Decoding a weight is bit-exact: every supported format produces each value with at most
// one rounding (d*scale and q*d are products of <= 24 significant bits, hence exact), so any
// evaluation order or fma contraction gives the same float as quant::dequantize_row.
constexpr double kDequantTol = 0.0;

// A K-term fp32 dot product: the kernels re-associate the sum (8-lane partial sums, fma,
// -cl-mad-enable) while the reference sums in double. Rounding errors of K additions grow like a
// random walk, so we accept |err| <= kDotTol * sqrt(K) * sum_k |a_k b_k| (plus |C0| when
// accumulating): 2 float ulps (2^-23 = 1.2e-7) per sqrt(K) of the magnitude that was summed.
// PoCL stays below 5% of it; reading one wrong weight moves a result by ~sum/K, which is
// > 30x this bound for K <= 4096.
constexpr double kDotTol = 2.4e-7;

// Copies and zero padding move floats without arithmetic: bit-exact.
constexpr double kCopyTol = 0.0;

std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

// Per-element bound for C (+)= A B^T: kDotTol * sqrt(K) * (|A| |B|^T + |C0|).
std::vector<double> dot_bounds(int m, int n, int k, const std::vector<float>& A, int lda, const std::vector<float>& B,
                               int ldb, const std::vector<float>& C0, int ldc, bool accumulate) {
  std::vector<float> mag(C0.size(), 0.0f);
  if (accumulate) mag = abs_of(C0);
  ref::gemm_abt(m, n, k, abs_of(A).data(), lda, abs_of(B).data(), ldb, mag.data(), ldc, accumulate);
  std::vector<double> tol(mag.size());
  for (size_t i = 0; i < mag.size(); ++i) tol[i] = kDotTol * std::sqrt(double(k)) * mag[i];
  return tol;
}

const char* type_name(TensorType t) { return quant::traits(t).name; }

// Widths that are multiples of the block size but not powers of two.
int test_cols(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: return 200;  // 25 groups of 8
    case TensorType::Q4_K: case TensorType::Q6_K: return 768;  // 3 super-blocks of 256
    default: return 352;                                     // 11 blocks of 32
  }
}

class WeightKernel : public testing_support::KernelTest, public ::testing::WithParamInterface<TensorType> {};

TEST_P(WeightKernel, EmbedMatchesReference) {
  const TensorType t = GetParam();
  const int vocab = 37, cols = test_cols(t);
  auto table = make_weight(t, vocab, cols, 11);
  const std::vector<int> ids = {0, 36, 5, 5, 17, 1, 36};  // first, last and repeated rows
  auto d_ids = upload(ids);
  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, ids.size() * cols * 4, "embed out");
  ops::embed(ctx(), table.dev, d_ids, int(ids.size()), out);
  EXPECT_TRUE(all_close(std::string("embed ") + type_name(t), download_all(out),
                        ref::embed(t, table.blocks.data(), cols, ids), kDequantTol));
}

TEST_P(WeightKernel, DequantRowsMatchesReference) {
  const TensorType t = GetParam();
  auto W = make_weight(t, 21, test_cols(t), 12);
  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, W.dequant.size() * 4, "dequant out");
  ops::dequant_rows(ctx(), W.dev, out);
  EXPECT_TRUE(all_close(std::string("dequant_rows ") + type_name(t), download_all(out), W.dequant, kDequantTol));
}

TEST_P(WeightKernel, DequantToPanelsMatchesReference) {
  const TensorType t = GetParam();
  const int rows = 37, cols = test_cols(t);  // 37: the last panel is padded with 11 zero rows
  auto W = make_weight(t, rows, cols, 13);
  const size_t offset = 24;  // panels written from a float offset; what is before must survive
  const size_t n = offset + ops::panel_floats(rows, cols) + 8;
  std::vector<float> expect = random_floats(n, 14);
  auto Bp = upload(expect);
  ops::dequant_to_panels(ctx(), W.dev, Bp, offset);
  const std::vector<float> panels = ref::to_panels(W.dequant.data(), rows, cols);
  std::copy(panels.begin(), panels.end(), expect.begin() + offset);
  EXPECT_TRUE(all_close(std::string("dequant_to_panels ") + type_name(t), download_all(Bp), expect, kDequantTol));
}

// A slice of rows on its own (the LM head is dequantized one vocabulary tile at a time).
TEST_P(WeightKernel, DequantRowSliceToPanelsMatchesReference) {
  const TensorType t = GetParam();
  const int rows = 45, cols = test_cols(t);
  auto W = make_weight(t, rows, cols, 19);
  for (auto [row0, n] : {std::pair{0, 16}, std::pair{16, 29}, std::pair{7, 10}}) {  // aligned, tail, unaligned
    auto Bp = upload(random_floats(ops::panel_floats(n, cols), 20 + row0));  // padding must be written as zeros
    ops::dequant_rows_to_panels(ctx(), W.dev, row0, n, Bp);
    EXPECT_TRUE(all_close(std::string("dequant_rows_to_panels ") + type_name(t) + " rows " + std::to_string(row0) +
                              ".." + std::to_string(row0 + n),
                          download_all(Bp), ref::to_panels(W.dequant.data() + size_t(row0) * cols, n, cols),
                          kDequantTol));
  }
  auto Bp = ctx().memory().alloc(cl::MemCategory::Gemm, ops::panel_floats(10, cols) * 4, "Bp");
  EXPECT_THROW(ops::dequant_rows_to_panels(ctx(), W.dev, 40, 10, Bp), cl::ClError) << "rows past the matrix";
}

TEST_P(WeightKernel, MatvecMatchesReference) {
  const TensorType t = GetParam();
  const int rows = 45, cols = test_cols(t);  // 45 outputs: not a multiple of any work-group size
  auto W = make_weight(t, rows, cols, 15);
  const int ldy = rows + 3;
  const size_t y_off = 5;
  for (int n_rows = 1; n_rows <= 4; ++n_rows) {
    for (bool accumulate : {false, true}) {
      const std::vector<float> x = random_floats(size_t(n_rows) * cols, 16 + n_rows);
      const std::vector<float> y0 = random_floats(y_off + size_t(n_rows) * ldy, 20 + n_rows);
      auto d_x = upload(x);
      auto d_y = upload(y0);
      ops::matvec(ctx(), W.dev, d_x, n_rows, d_y, ldy, accumulate, y_off);

      std::vector<float> expect = y0;
      ref::matvec(W.dequant.data(), rows, cols, x.data(), n_rows, expect.data() + y_off, ldy, accumulate);
      // y rows as [n_rows][ldy]: the bound of y[r][o] is that of C = x W^T with ldc = ldy.
      const std::vector<float> c0(y0.begin() + y_off, y0.end());
      const std::vector<double> bound = dot_bounds(n_rows, rows, cols, x, cols, W.dequant, cols, c0, ldy, accumulate);
      // Elements before y_off and in columns rows..ldy must be untouched: tolerance 0.
      auto tol = [&](size_t i) {
        return i < y_off || (i - y_off) % ldy >= size_t(rows) ? 0.0 : bound[i - y_off];
      };
      EXPECT_TRUE(all_close(std::string("matvec ") + type_name(t) + " rows=" + std::to_string(n_rows) +
                                (accumulate ? " accumulate" : ""),
                            download_all(d_y), expect, tol));
    }
  }
}

// The weight formats feeding the prefill GEMM: dequantize to panels, pack the activations,
// multiply; compared with the product of the reference-dequantized weights.
TEST_P(WeightKernel, GemmOverDequantizedPanelsMatchesReference) {
  const TensorType t = GetParam();
  const int m = 19, n = 45, k = test_cols(t);
  auto W = make_weight(t, n, k, 17);
  const std::vector<float> X = random_floats(size_t(m) * k, 18);
  auto d_X = upload(X);
  auto Ap = ctx().memory().alloc(cl::MemCategory::Gemm, ops::packed_a_floats(m, k) * 4, "Ap");
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

INSTANTIATE_TEST_SUITE_P(AllDeviceTypes, WeightKernel,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::Q4_0, TensorType::Q4_1,
                                           TensorType::Q5_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K),
                         [](const ::testing::TestParamInfo<TensorType>& info) { return type_name(info.param); });

// ---- gemm.cl on its own -----------------------------------------------------------------

class GemmKernel : public testing_support::KernelTest {};

TEST_F(GemmKernel, PackAMatchesReference) {
  for (int m : {1, 13, 16}) {
    const int k = 40, ldx = k + 5;
    const std::vector<float> X = random_floats(size_t(m) * ldx, 30 + m);
    auto d_X = upload(X);
    // Pre-filled with garbage: the rows past m must come back as zeros.
    auto Ap = upload(random_floats(ops::packed_a_floats(m, k), 40 + m));
    ops::pack_a(ctx(), d_X, m, k, ldx, Ap);
    EXPECT_TRUE(all_close("pack_a m=" + std::to_string(m), download_all(Ap), ref::pack_a(X.data(), m, k, ldx),
                          kCopyTol));
  }
}

// Both tile heights (tuning key gemm_tile_rows: 8 rows per work-item on AVX-512, 4 on AVX2),
// whatever this machine's tuning picks.
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
      auto Ap = upload(ref::pack_a(A.data(), s.m, s.k, s.k));
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

INSTANTIATE_TEST_SUITE_P(RowsPerItem, GemmTiles, testing::Values(4, 8));

// ---- work-group variants -----------------------------------------------------------------

// GPUs run matvec with work-groups of 64 (global size rounded up past n_out); the CPU tuning
// uses 1. Run the GPU setting here so its guards are tested on every machine.
TEST(MatvecWorkGroups, Local64MatchesReference) {
  std::unique_ptr<cl::Context> c;
  ASSERT_NO_THROW(c = testing_support::context_with_work_groups(64)) << "the kernel tests need an OpenCL device";
  ASSERT_EQ(c->tuning().matvec_local, 64);
  const int rows = 45, cols = 352, n_rows = 3;
  auto W = testing_support::make_weight(*c, TensorType::Q4_1, rows, cols, 80);
  const std::vector<float> x = random_floats(size_t(n_rows) * cols, 81);
  const std::vector<float> y0 = random_floats(size_t(n_rows) * rows, 82);
  auto d_x = testing_support::upload(*c, x);
  auto d_y = testing_support::upload(*c, y0);
  ops::matvec(*c, W.dev, d_x, n_rows, d_y, rows, true);
  std::vector<float> expect = y0;
  ref::matvec(W.dequant.data(), rows, cols, x.data(), n_rows, expect.data(), rows, true);
  const auto bound = dot_bounds(n_rows, rows, cols, x, cols, W.dequant, cols, y0, rows, true);
  EXPECT_TRUE(all_close("matvec local=64", testing_support::download(*c, d_y, y0.size()), expect,
                        [&](size_t i) { return bound[i]; }));
}

}  // namespace
}  // namespace infinipot
