// The kernels that read GGUF-encoded weights (embedding.cl, matvec.cl and its decode fusions,
// dequant.cl) and the packed GEMM (gemm.cl), each against its CPU reference in
// tests/support/cpu_ref.h (the fusions against a double reference here), for every weight type
// the device supports.
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

// The decode fusions (matvec_norm, matvec_glu) against a double reference of norm, products
// and activation. The norm's 1/rms scales each finished sum: its fp32 sum of K squares (~sqrt(K)
// ulp), the division and rsqrt (<= 2 ulp), plus 1/2 ulp per term for x * w, are relative
// errors of each product, bounded by kFusedNormRelTol = 1e-5 (84 ulp, > 3x the estimate for
// K = 768) of sum_k |W[o][k] xn[k]|, on top of kDotTol. One wrong weight or norm weight moves
// a result by ~sum/K, still > 30x the bound.
constexpr double kFusedNormRelTol = 1e-5;
// GLU out = act(g) u with g, u off by tol_g, tol_u: |act'| <= 1.13 (SiLU 1.1, GELU-tanh 1.13),
// so the error is <= 1.13 tol_g |u| + |act(g)| tol_u (second order dropped), plus the
// activation's own error (test_kernels_layers.cpp: 2e-6 relative, and 2 ulp of |g u| for
// GELU-tanh's cancellation at g << 0).
constexpr double kActSlope = 1.13;
constexpr double kActRelTol = 2e-6;
constexpr double kActAbsUlps = 2.0 / (1 << 23);

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
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: return 200;  // 25 groups of 8
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K: return 768;  // 3 super-blocks of 256
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

// The block scales are halves that the kernels convert with bit operations of their own
// (quant_formats.cl half_bits_to_float, not vload_half): every kind of half a scale can be
// (zeros, subnormals of both signs, the extremes of the normal range) must decode exactly in
// dequant_rows, and the decode product must match the reference over them.
TEST_P(WeightKernel, SpecialHalfScalesDecodeExactly) {
  const TensorType t = GetParam();
  if (t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) GTEST_SKIP() << "no block scales";
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x7bff, 0xfbff,
                               0x3c00, 0xb555, 0x0200, 0x1234};
  const int rows = 9, cols = test_cols(t);
  auto W = make_weight(t, rows, cols, 31);
  const auto& tr = quant::traits(t);
  // Offsets of the halves in a block: d (and the second scale: m, or dmin) where they sit.
  std::vector<size_t> at = {0};
  if (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K || t == TensorType::Q5_K) at.push_back(2);
  if (t == TensorType::Q6_K) at = {208};
  const size_t n_blocks = W.blocks.size() / tr.block_bytes;
  size_t next = 0;
  for (size_t b = 0; b < n_blocks; ++b)
    for (size_t off : at) {
      const uint16_t h = specials[next++ % std::size(specials)];
      W.blocks[b * tr.block_bytes + off] = uint8_t(h & 0xff);
      W.blocks[b * tr.block_bytes + off + 1] = uint8_t(h >> 8);
    }
  ASSERT_GE(next, std::size(specials)) << "too few blocks to place every special half";
  W.dequant = ref::dequantize_rows(t, W.blocks.data(), rows, cols);
  testing_support::write_weight(ctx(), W);

  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, W.dequant.size() * 4, "dequant out");
  ops::dequant_rows(ctx(), W.dev, out);
  EXPECT_TRUE(all_close(std::string("dequant_rows, special scales, ") + type_name(t), download_all(out), W.dequant,
                        kDequantTol));

  const std::vector<float> x = random_floats(size_t(cols), 33);
  auto d_x = upload(x);
  auto d_y = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(rows) * 4, "matvec out");
  ops::matvec(ctx(), W.dev, d_x, 1, d_y, rows, false);
  std::vector<float> expect(rows, 0.0f);
  ref::matvec(W.dequant.data(), rows, cols, x.data(), 1, expect.data(), rows, false);
  const std::vector<double> bound = dot_bounds(1, rows, cols, x, cols, W.dequant, cols, expect, rows, false);
  EXPECT_TRUE(all_close(std::string("matvec, special scales, ") + type_name(t), download_all(d_y), expect,
                        [&](size_t i) { return bound[i]; }));
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

// ---- decode fusions (matvec.cl -DNORM, -DGLU) ----------------------------------------------

class FusedLaunchers : public testing_support::KernelTest {};

// Reference of the fused products, in double: xn[r] = x[r] / rms(x[r]) * nw (x itself when nw is
// empty), dot[r][o] = W[row0 + o] . xn[r] and mag[r][o] = sum_k |W[row0 + o][k] xn[r][k]|.
struct Dots {
  std::vector<double> dot, mag;  // [n_rows][n_out]
};
Dots normed_dots(const std::vector<float>& W, int cols, int row0, int n_out, const std::vector<float>& x, int n_rows,
                 const std::vector<float>& nw, float eps) {
  Dots d{std::vector<double>(size_t(n_rows) * n_out), std::vector<double>(size_t(n_rows) * n_out)};
  std::vector<double> xn(cols);
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x.data() + size_t(r) * cols;
    double ss = 0;
    for (int k = 0; k < cols; ++k) ss += double(xr[k]) * xr[k];
    const double inv = nw.empty() ? 1.0 : 1.0 / std::sqrt(ss / cols + double(eps));
    for (int k = 0; k < cols; ++k) xn[k] = double(xr[k]) * inv * (nw.empty() ? 1.0 : double(nw[k]));
    for (int o = 0; o < n_out; ++o) {
      const float* w = W.data() + size_t(row0 + o) * cols;
      double s = 0, m = 0;
      for (int k = 0; k < cols; ++k) {
        s += w[k] * xn[k];
        m += std::fabs(w[k] * xn[k]);
      }
      d.dot[size_t(r) * n_out + o] = s;
      d.mag[size_t(r) * n_out + o] = m;
    }
  }
  return d;
}

double dot_tol(double mag, int k, bool normed) {
  return (kDotTol * std::sqrt(double(k)) + (normed ? kFusedNormRelTol : 0.0)) * mag;
}

// matvec_norm: the attention norm taken into the q|k|v product. 45 outputs (not a multiple of
// the 4 per work-item), 1..4 rows, written from an offset into a wider y whose other elements
// must survive.
TEST_P(WeightKernel, MatvecNormMatchesReference) {
  const TensorType t = GetParam();
  const int rows = 45, cols = test_cols(t), ldy = rows + 3;
  const size_t y_off = 5;
  const float eps = 1e-5f;
  auto W = make_weight(t, rows, cols, 90);
  const std::vector<float> nw = random_floats(cols, 91, -1.5f, 1.5f);
  auto d_nw = upload(nw);
  for (int n_rows = 1; n_rows <= 4; ++n_rows) {
    const std::vector<float> x = random_floats(size_t(n_rows) * cols, 92 + n_rows, -2.0f, 2.0f);
    const std::vector<float> y0 = random_floats(y_off + size_t(n_rows) * ldy, 96 + n_rows);
    auto d_x = upload(x);
    auto d_y = upload(y0);
    ops::matvec_norm(ctx(), W.dev, d_x, {&d_nw, eps}, n_rows, d_y, ldy, y_off);
    const Dots ref = normed_dots(W.dequant, cols, 0, rows, x, n_rows, nw, eps);
    std::vector<float> expect = y0;
    std::vector<double> tol(expect.size(), 0.0);  // outside the outputs: untouched
    for (int r = 0; r < n_rows; ++r)
      for (int o = 0; o < rows; ++o) {
        const size_t i = y_off + size_t(r) * ldy + o, j = size_t(r) * rows + o;
        expect[i] = float(ref.dot[j]);
        tol[i] = dot_tol(ref.mag[j], cols, true);
      }
    EXPECT_TRUE(all_close(std::string("matvec_norm ") + type_name(t) + " rows=" + std::to_string(n_rows),
                          download_all(d_y), expect, [&](size_t i) { return tol[i]; }));
  }
}

// matvec_glu on a fused gate|up matrix (up rows from n_ff) and on separate gate and up weights
// (up rows from 0), with and without the FFN norm, for both activations. n_ff = 45: the last
// work-item has one live output of its two.
TEST_P(WeightKernel, MatvecGluMatchesReference) {
  const TensorType t = GetParam();
  const int n_ff = 45, cols = test_cols(t);
  const float eps = 1e-6f;
  auto gate_up = make_weight(t, 2 * n_ff, cols, 100);  // gate | up rows
  auto up = make_weight(t, n_ff, cols, 101);
  // Small inputs and norm weights keep the gate values O(1), where both activations curve.
  const std::vector<float> nw = random_floats(cols, 102, -0.15f, 0.15f);
  auto d_nw = upload(nw);
  for (bool fused : {true, false})
    for (bool normed : {true, false})
      for (ops::Glu act : {ops::Glu::Silu, ops::Glu::GeluTanh})
        for (int n_rows = 1; n_rows <= 4; ++n_rows) {
          const std::string what = std::string("matvec_glu ") + type_name(t) + (fused ? " fused" : " separate") +
                                   (normed ? " normed" : "") + (act == ops::Glu::Silu ? " silu" : " gelu_tanh") +
                                   " rows=" + std::to_string(n_rows);
          const std::vector<float> x = random_floats(size_t(n_rows) * cols, 103 + n_rows, -0.2f, 0.2f);
          auto d_x = upload(x);
          auto d_act = upload(random_floats(size_t(n_rows) * n_ff, 108));
          const testing_support::TestWeight& U = fused ? gate_up : up;
          const int up_row0 = fused ? n_ff : 0;
          ops::matvec_glu(ctx(), gate_up.dev, U.dev, up_row0, n_ff, act, d_x, {normed ? &d_nw : nullptr, eps},
                          n_rows, d_act);
          const std::vector<float> no_norm;
          const Dots g = normed_dots(gate_up.dequant, cols, 0, n_ff, x, n_rows, normed ? nw : no_norm, eps);
          const Dots u = normed_dots(U.dequant, cols, up_row0, n_ff, x, n_rows, normed ? nw : no_norm, eps);
          std::vector<float> expect(size_t(n_rows) * n_ff);
          std::vector<double> tol(expect.size());
          for (size_t i = 0; i < expect.size(); ++i) {
            const double gv = g.dot[i], uv = u.dot[i];
            const double a = act == ops::Glu::Silu
                                 ? gv / (1.0 + std::exp(-gv))
                                 : 0.5 * gv * (1.0 + std::tanh(0.7978845608028654 * (gv + 0.044715 * gv * gv * gv)));
            expect[i] = float(a * uv);
            tol[i] = kActSlope * dot_tol(g.mag[i], cols, normed) * std::fabs(uv) +
                     std::fabs(a) * dot_tol(u.mag[i], cols, normed) + kActRelTol * std::fabs(a * uv) +
                     kActAbsUlps * std::fabs(gv * uv);
          }
          EXPECT_TRUE(all_close(what, download_all(d_act), expect, [&](size_t i) { return tol[i]; }));
        }
}

// The launchers refuse what the kernel cannot do rather than read past a buffer.
TEST_F(FusedLaunchers, RefuseMismatchedWeights) {
  auto gate = make_weight(TensorType::Q4_0, 8, 64, 110);
  auto up = make_weight(TensorType::Q8_0, 8, 64, 111);
  auto x = upload(random_floats(64, 112));
  auto out = upload(random_floats(8, 113));
  EXPECT_THROW(ops::matvec_glu(ctx(), gate.dev, up.dev, 0, 8, ops::Glu::Silu, x, {}, 1, out), cl::ClError)
      << "gate and up in different encodings";
  EXPECT_THROW(ops::matvec_glu(ctx(), gate.dev, gate.dev, 4, 8, ops::Glu::Silu, x, {}, 1, out), cl::ClError)
      << "up rows past the matrix";
  EXPECT_THROW(ops::matvec_norm(ctx(), gate.dev, x, {}, 1, out, 8), cl::ClError) << "no norm weight";
  // 8 rows are not q|k|v of 1 + 2 heads of 4, and a head of 6 rows splits RoPE pairs across work-items.
  auto cache = upload(random_floats(64, 114));
  EXPECT_THROW(ops::matvec_qkv_rope(ctx(), gate.dev, x, {}, 1, out, {1, 1, 4, 4, &x, &cache, &cache, 4, 0}),
               cl::ClError) << "rows do not match the heads";
  auto w6 = make_weight(TensorType::Q4_0, 18, 64, 115);
  EXPECT_THROW(ops::matvec_qkv_rope(ctx(), w6.dev, x, {}, 1, cache, {1, 1, 6, 6, &x, &cache, &cache, 4, 0}),
               cl::ClError) << "head_dim not a multiple of 4";
}

// matvec_qkv_rope: the q|k|v product with RoPE and the KV store as its epilogue, against the
// double products, then ref::rope_store_kv (angles in double). Each rotated component mixes the
// two sums of its pair (a rotation: errors add at most), plus the rotation's own error through
// the float angle table (test_kernels_layers.cpp: 4 ulp of the pair's length); a half KV store
// rounds once more (2^-11 relative). Slots other than slot0.. and the other heads' rows must be
// untouched. Heads of 8 rows, with n_rot 8 (all rotated) and 4 (rows 4..7 of each head not).
TEST_P(WeightKernel, MatvecQkvRopeMatchesReference) {
  const TensorType t = GetParam();
  const int n_head = 3, n_kv = 1, head_dim = 8, rows = (n_head + 2 * n_kv) * head_dim, cols = test_cols(t);
  const int cap = 9, slot0 = 3;
  const float eps = 1e-5f, theta = 10000.f;
  auto W = make_weight(t, rows, cols, 130);
  const std::vector<float> nw = random_floats(cols, 131, -1.5f, 1.5f);
  auto d_nw = upload(nw);
  for (int n_rot : {8, 4})
    for (bool half : {false, true})
      for (int n_rows = 1; n_rows <= 4; ++n_rows) {
        const std::string what = std::string("matvec_qkv_rope ") + type_name(t) + " n_rot=" + std::to_string(n_rot) +
                                 (half ? " half" : "") + " rows=" + std::to_string(n_rows);
        const std::vector<float> x = random_floats(size_t(n_rows) * cols, 132 + n_rows, -2.0f, 2.0f);
        std::vector<int> pos(n_rows);
        for (int r = 0; r < n_rows; ++r) pos[r] = 1000 + 7 * r;
        const size_t cache_n = size_t(n_kv) * cap * head_dim;
        // Whatever a half store holds is a half: start from values it represents exactly.
        std::vector<float> k0 = random_floats(cache_n, 140), v0 = random_floats(cache_n, 141);
        for (float& f : k0) f = std::round(f * 64) / 64;
        for (float& f : v0) f = std::round(f * 64) / 64;
        auto to_half = [&](const std::vector<float>& v) {
          std::vector<uint16_t> h(v.size());
          for (size_t i = 0; i < v.size(); ++i) h[i] = quant::fp32_to_fp16(v[i]);
          return h;
        };
        cl::Buffer d_k = half ? upload(to_half(k0)) : upload(k0), d_v = half ? upload(to_half(v0)) : upload(v0);
        auto d_x = upload(x);
        auto d_qkv = upload(random_floats(size_t(n_rows) * rows, 142));
        auto d_cs = upload(ops::rope_angles(pos, n_rot, theta));
        const ops::RopeKv rkv{n_head, n_kv, head_dim, n_rot, &d_cs, &d_k, &d_v, cap, slot0, half};
        ops::matvec_qkv_rope(ctx(), W.dev, d_x, {&d_nw, eps}, n_rows, d_qkv, rkv);

        const Dots d = normed_dots(W.dequant, cols, 0, rows, x, n_rows, nw, eps);
        std::vector<float> qkv(d.dot.begin(), d.dot.end()), k = k0, v = v0;
        ref::rope_store_kv(qkv.data(), rows, n_head, n_kv, head_dim, n_rot, pos.data(), theta, k.data(), v.data(), cap,
                           slot0, n_rows);
        std::vector<double> tol(qkv.size());
        for (size_t i = 0; i < qkv.size(); ++i) {
          const size_t in_head = i % rows % head_dim, mate = i ^ 1;  // the other row of its RoPE pair
          const bool rotated = i % rows < size_t((n_head + n_kv) * head_dim) && in_head < size_t(n_rot);
          tol[i] = dot_tol(d.mag[i], cols, true);
          if (rotated)
            tol[i] += dot_tol(d.mag[mate], cols, true) + 4 * std::ldexp(std::hypot(d.dot[i], d.dot[mate]), -23);
        }
        EXPECT_TRUE(all_close(what + " q|k|v", download_all(d_qkv), qkv, [&](size_t i) { return tol[i]; }));
        // Cache element (g, slot, e) came from qkv row slot - slot0, column (k: n_head, v: n_head + n_kv) + g heads.
        auto cache_tol = [&](int first_head, const std::vector<float>& want) {
          return [&, first_head](size_t i) {
            const int g = int(i / (size_t(cap) * head_dim)), slot = int(i / head_dim % cap), e = int(i % head_dim);
            if (slot < slot0 || slot >= slot0 + n_rows) return 0.0;
            const size_t src = size_t(slot - slot0) * rows + size_t(first_head + g) * head_dim + e;
            return tol[src] + (half ? std::ldexp(std::fabs(double(want[i])), -11) : 0.0);
          };
        };
        auto read_cache = [&](const cl::Buffer& b) {
          if (!half) return download(b, cache_n);
          std::vector<uint16_t> h(cache_n);
          ctx().read(b, h.data(), cache_n * 2);
          std::vector<float> f(cache_n);
          for (size_t i = 0; i < cache_n; ++i) f[i] = quant::fp16_to_fp32(h[i]);
          return f;
        };
        EXPECT_TRUE(all_close(what + " k_cache", read_cache(d_k), k, cache_tol(n_head, k)));
        EXPECT_TRUE(all_close(what + " v_cache", read_cache(d_v), v, cache_tol(n_head + n_kv, v)));
      }
}

INSTANTIATE_TEST_SUITE_P(AllDeviceTypes, WeightKernel,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::Q4_0, TensorType::Q4_1,
                                           TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q4_K,
                                           TensorType::Q5_K, TensorType::Q6_K, TensorType::BF16),
                         [](const ::testing::TestParamInfo<TensorType>& info) { return type_name(info.param); });

// ---- gemm.cl on its own -----------------------------------------------------------------

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

// An accumulating matvec of a [rows][cols] weight of type t over n_rows random rows, in
// context c, against the reference.
void expect_matvec_matches(cl::Context& c, TensorType t, int rows, int cols, int n_rows, uint32_t seed,
                           const std::string& what) {
  auto W = testing_support::make_weight(c, t, rows, cols, seed);
  const std::vector<float> x = random_floats(size_t(n_rows) * cols, seed + 1);
  const std::vector<float> y0 = random_floats(size_t(n_rows) * rows, seed + 2);
  auto d_x = testing_support::upload(c, x);
  auto d_y = testing_support::upload(c, y0);
  ops::matvec(c, W.dev, d_x, n_rows, d_y, rows, true);
  std::vector<float> expect = y0;
  ref::matvec(W.dequant.data(), rows, cols, x.data(), n_rows, expect.data(), rows, true);
  const auto bound = dot_bounds(n_rows, rows, cols, x, cols, W.dequant, cols, y0, rows, true);
  EXPECT_TRUE(all_close(what, testing_support::download(c, d_y, y0.size()), expect, [&](size_t i) { return bound[i]; }));
}

// matvec_prefetch: the decode products with and without their software prefetch (the CPU
// tuning prefetches, the others do not), each compared with the reference; 64 bytes ahead
// reaches past the end of the matrix's last rows, which a prefetch may do (it never faults).
TEST(MatvecPrefetch, EveryDistanceMatchesReference) {
  for (int bytes : {0, 64, 4096}) {
    std::unique_ptr<cl::Context> c;
    ASSERT_NO_THROW(c = testing_support::context_with_tuning("\"matvec_prefetch\": " + std::to_string(bytes)));
    ASSERT_EQ(c->tuning().matvec_prefetch, bytes);
    for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0, TensorType::Q6_K})
      expect_matvec_matches(*c, t, 45, test_cols(t), 2, 83,
                            std::string("matvec ") + type_name(t) + " prefetch " + std::to_string(bytes));
  }
}

// ---- work-group variants -----------------------------------------------------------------

// GPUs run matvec with work-groups of 64 (global size rounded up past n_out); the CPU tuning
// uses 1. Run the GPU setting here so its guards are tested on every machine.
TEST(MatvecWorkGroups, Local64MatchesReference) {
  std::unique_ptr<cl::Context> c;
  ASSERT_NO_THROW(c = testing_support::context_with_work_groups(64)) << "the kernel tests need an OpenCL device";
  ASSERT_EQ(c->tuning().matvec_local, 64);
  expect_matvec_matches(*c, TensorType::Q4_1, 45, 352, 3, 80, "matvec local=64");
}

// The GPU work-group setting for the fused variants: the GLU kernel's grid is n_ff / 2 items.
TEST(MatvecWorkGroups, Local64FusedMatchesReference) {
  std::unique_ptr<cl::Context> c;
  ASSERT_NO_THROW(c = testing_support::context_with_work_groups(64)) << "the kernel tests need an OpenCL device";
  const int n_ff = 45, cols = 352, n_rows = 3;
  const float eps = 1e-5f;
  auto W = testing_support::make_weight(*c, TensorType::Q4_1, 2 * n_ff, cols, 120);
  const std::vector<float> x = random_floats(size_t(n_rows) * cols, 121);
  const std::vector<float> nw = random_floats(cols, 122);
  auto d_x = testing_support::upload(*c, x);
  auto d_nw = testing_support::upload(*c, nw);
  auto d_y = testing_support::upload(*c, random_floats(size_t(n_rows) * 2 * n_ff, 123));
  ops::matvec_norm(*c, W.dev, d_x, {&d_nw, eps}, n_rows, d_y, 2 * n_ff);
  const Dots d = normed_dots(W.dequant, cols, 0, 2 * n_ff, x, n_rows, nw, eps);
  std::vector<float> expect(d.dot.begin(), d.dot.end());
  EXPECT_TRUE(all_close("matvec_norm local=64", testing_support::download(*c, d_y, expect.size()), expect,
                        [&](size_t i) { return dot_tol(d.mag[i], cols, true); }));
  auto d_act = testing_support::upload(*c, random_floats(size_t(n_rows) * n_ff, 124));
  ops::matvec_glu(*c, W.dev, W.dev, n_ff, n_ff, ops::Glu::Silu, d_x, {&d_nw, eps}, n_rows, d_act);
  std::vector<float> act(size_t(n_rows) * n_ff);
  std::vector<double> tol(act.size());
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < n_ff; ++o) {
      const size_t gi = size_t(r) * 2 * n_ff + o, ui = gi + n_ff, i = size_t(r) * n_ff + o;
      const double g = d.dot[gi], u = d.dot[ui], a = g / (1.0 + std::exp(-g));
      act[i] = float(a * u);
      tol[i] = kActSlope * dot_tol(d.mag[gi], cols, true) * std::fabs(u) + std::fabs(a) * dot_tol(d.mag[ui], cols, true) +
               kActRelTol * std::fabs(a * u);
    }
  EXPECT_TRUE(all_close("matvec_glu local=64", testing_support::download(*c, d_act, act.size()), act,
                        [&](size_t i) { return tol[i]; }));
}

}  // namespace
}  // namespace infinipot
