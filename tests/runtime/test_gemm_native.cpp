// The prefill products in the CPU's integer dot (cl_kernels/gemm_native.cl, tuning
// gemm_native_types): the input quantized to 16 bits per 32-block, the weights' integers
// multiplied in vpdpwssd. Against a double reference of the same quantized input (so a bound
// of float rounding), against the float product of the unquantized input (bounded by what
// 16-bit input rounding can move), and through GemmLayer beside the float GEMM on one input.
// They run only where the device has AVX-512 VNNI (DeviceInfo::native_dot == 1: a PoCL device
// on such a CPU); elsewhere the path does not exist (gemm_native_fits is false, asserted) and
// the tests say so and skip.
#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/gemm_layer.h"
#include "runtime/ops/gemm_native.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::random_floats;

// The 16-bit input as the kernel makes it (the same float arithmetic, round half to even).
struct Quantized {
  std::vector<double> value;  // [m][k]: d * q, exactly
  std::vector<double> step;   // [m][k]: the block's d (the input moved by at most d / 2)
};

// What the kernel's float arithmetic rounds against for Q4_1, beside sum |w x|: it evaluates
// a block as dw dx sum(qw qx) + mw sx, two terms that may each be far larger than their sum
// (an input outlier on a weight near 0: dw qw close to -mw). Per output row o and input row r:
// sum_b |dw| dx sum|qw qx| + |mw| dx |sum qx|. Other types' blocks have no second term (0).
double split_magnitude(const testing_support::TestWeight& W, int row, const Quantized& q, int r, int k) {
  if (W.dev.type != TensorType::Q4_1) return 0.0;
  double mag = 0;
  for (int b = 0; b < k / 32; ++b) {
    const uint8_t* blk = W.blocks.data() + size_t(row) * W.dev.row_bytes + b * 20;  // GGUF: d, m, qs[16]
    const double dw = std::fabs(quant::fp16_to_fp32(uint16_t(blk[0] | blk[1] << 8)));
    const double mw = std::fabs(quant::fp16_to_fp32(uint16_t(blk[2] | blk[3] << 8)));
    double qq = 0, sx = 0;
    for (int j = 0; j < 32; ++j) {
      const int qw = j < 16 ? blk[4 + j] & 15 : blk[4 + j - 16] >> 4;
      const double xv = q.value[size_t(r) * k + 32 * b + j];  // dx qx
      qq += std::fabs(qw * xv);
      sx += xv;
    }
    mag += dw * qq + mw * std::fabs(sx);
  }
  return mag;
}
Quantized quantize16(const std::vector<float>& x, int m, int k) {
  Quantized q{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (int r = 0; r < m; ++r)
    for (int b = 0; b < k / 32; ++b) {
      const float* xb = x.data() + size_t(r) * k + 32 * b;
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
      const float d = amax / 32767.0f, id = d == 0.0f ? 0.0f : 1.0f / d;
      for (int j = 0; j < 32; ++j) {
        const size_t i = size_t(r) * k + 32 * b + j;
        q.value[i] = double(d) * std::nearbyint(xb[j] * id);
        q.step[i] = d;
      }
    }
  return q;
}

class GemmNative : public ::testing::TestWithParam<TensorType> {
 protected:
  void SetUp() override {
    try {
      ctx_ = testing_support::context_with_tuning(
          "\"matvec_native_dot\": [\"avx512_vnni\"], \"gemm_native_types\": [\"Q4_0\", \"Q4_1\", \"Q8_0\"]");
    } catch (const std::exception& e) {
      FAIL() << "cannot create an OpenCL context; the kernel tests need a device: " << e.what();
    }
    if (ctx_->device().native_dot != 1) {
      auto W = testing_support::make_weight(*ctx_, GetParam(), 4, 64, 1);
      ASSERT_FALSE(ops::gemm_native_fits(*ctx_, W.dev)) << "no AVX-512 VNNI here, yet the products would take it";
      GTEST_SKIP() << ctx_->device().name << " has no AVX-512 VNNI that PoCL kernels may use: prefill products "
                   << "stay in the float GEMM here";
    }
  }
  cl::Context& ctx() { return *ctx_; }
  std::unique_ptr<cl::Context> ctx_;
};

// Shapes: K of 1, 3, 5, 18 and 48 blocks; M not a multiple of the 8-row tile (and 1); N not a
// multiple of the 16-row panel; rows taken from row0 > 0; C with a leading dimension past N and
// an offset; plain and accumulating.
TEST_P(GemmNative, MatchesTheReferenceOfItsQuantizedInput) {
  const TensorType t = GetParam();
  for (int k : {32, 96, 160, 576, 1536})
    for (auto [m, n] : {std::pair{1, 16}, std::pair{13, 37}, std::pair{64, 301}}) {
      const int rows = n + 5, row0 = 3, ldc = n + 7;
      const size_t c_off = 11;
      auto W = testing_support::make_weight(ctx(), t, rows, k, 100 + k + n);
      ASSERT_TRUE(ops::gemm_native_fits(ctx(), W.dev));
      const std::vector<float> x = testing_support::quantization_test_input(m, k, 200 + k + m);
      auto d_x = testing_support::upload(ctx(), x);
      auto xq = ctx().memory().alloc(cl::MemCategory::Scratch, ops::gemm_native_input_bytes(m, k), "xq");
      auto bp = ctx().memory().alloc(cl::MemCategory::Scratch, ops::gemm_native_panel_bytes(n, k), "bp");
      ops::gemm_native_quantize(ctx(), d_x, m, k, k, xq);
      const Quantized q = quantize16(x, m, k);
      for (bool accumulate : {false, true}) {
        const std::vector<float> c0 = random_floats(c_off + size_t(m) * ldc, 300 + m);
        auto d_c = testing_support::upload(ctx(), c0);
        ops::gemm_native(ctx(), m, W.dev, row0, n, xq, bp, d_c, ldc, accumulate, c_off);
        std::vector<float> want = c0;
        std::vector<double> tol(c0.size(), 0.0);  // outside the outputs: untouched, bit for bit
        for (int r = 0; r < m; ++r)
          for (int o = 0; o < n; ++o) {
            double sum = 0, mag = 0;
            for (int j = 0; j < k; ++j) {
              const double p = double(W.dequant[size_t(row0 + o) * k + j]) * q.value[size_t(r) * k + j];
              sum += p;
              mag += std::fabs(p);
            }
            mag += split_magnitude(W, row0 + o, q, r, k);
            const size_t i = c_off + size_t(r) * ldc + o;
            const double base = accumulate ? c0[i] : 0.0;
            want[i] = float(base + sum);
            // Each block's integer sum is exact; its conversion, the scales' products and the
            // fmas round (a few float ulps of the block's magnitude), and the blocks add up in
            // one chain: 8 ulps per sqrt(blocks) of the whole magnitude, plus the addend's ulp.
            // One wrong weight or block moves a result by ~mag / blocks, far above it.
            tol[i] = 8 * 6e-8 * std::sqrt(double(k / 32)) * mag + 1.2e-7 * std::fabs(base);
          }
        const std::string what = std::string("gemm_native ") + quant::traits(t).name + " K=" + std::to_string(k) +
                                 " M=" + std::to_string(m) + " N=" + std::to_string(n) + (accumulate ? " accumulate" : "");
        EXPECT_TRUE(all_close(what, testing_support::download(ctx(), d_c, c0.size()), want,
                              [&](size_t i) { return tol[i]; }));
      }
    }
}

// Against the float product of the unquantized input: each input element moved by at most
// d / 2 (d = its block's max / 32767), so |error| <= sum_k |W[o][k]| d_k / 2, plus float rounding.
TEST_P(GemmNative, MatchesTheFloatProductWithinInputRounding) {
  const TensorType t = GetParam();
  for (int k : {96, 576}) {
    const int m = 9, n = 40;
    auto W = testing_support::make_weight(ctx(), t, n, k, 400 + k);
    const std::vector<float> x = testing_support::quantization_test_input(m, k, 500 + k);
    auto d_x = testing_support::upload(ctx(), x);
    auto xq = ctx().memory().alloc(cl::MemCategory::Scratch, ops::gemm_native_input_bytes(m, k), "xq");
    auto bp = ctx().memory().alloc(cl::MemCategory::Scratch, ops::gemm_native_panel_bytes(n, k), "bp");
    auto d_c = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(m) * n * 4, "c");
    ops::gemm_native_quantize(ctx(), d_x, m, k, k, xq);
    ops::gemm_native(ctx(), m, W.dev, 0, n, xq, bp, d_c, n, false);
    const Quantized q = quantize16(x, m, k);
    std::vector<float> want(size_t(m) * n);
    std::vector<double> tol(want.size());
    for (int r = 0; r < m; ++r)
      for (int o = 0; o < n; ++o) {
        double sum = 0, bound = 0, mag = 0;
        for (int j = 0; j < k; ++j) {
          const double w = W.dequant[size_t(o) * k + j], xv = x[size_t(r) * k + j];
          sum += w * xv;
          bound += std::fabs(w) * q.step[size_t(r) * k + j] * (0.5 + 1e-5);
          mag += std::fabs(w * xv);
        }
        mag += split_magnitude(W, o, q, r, k);
        want[size_t(r) * n + o] = float(sum);
        tol[size_t(r) * n + o] = bound + 8 * 6e-8 * std::sqrt(double(k / 32)) * mag;
      }
    EXPECT_TRUE(all_close(std::string("gemm_native vs float ") + quant::traits(t).name + " K=" + std::to_string(k),
                          testing_support::download(ctx(), d_c, want.size()), want, [&](size_t i) { return tol[i]; }));
  }
}

// GemmLayer on one input: a listed type in the integer GEMM, an F32 weight in the float GEMM
// (each form of the input made once), the LM-head tile form (multiply_rows), accumulation.
TEST_P(GemmNative, LayerMixesIntegerAndFloatProductsOnOneInput) {
  const TensorType t = GetParam();
  const int m = 21, k = 160, n = 50, tile_rows = 19, tile0 = 7;
  auto Wq = testing_support::make_weight(ctx(), t, n, k, 600);
  auto Wf = testing_support::make_weight(ctx(), TensorType::F32, n, k, 601);
  ASSERT_TRUE(ops::gemm_native_fits(ctx(), Wq.dev));
  ASSERT_FALSE(ops::gemm_native_fits(ctx(), Wf.dev));
  const std::vector<float> x = testing_support::quantization_test_input(m, k, 602);
  auto d_x = testing_support::upload(ctx(), x);
  GemmLayer g(ctx(), "packed", m, k, ops::panel_floats(n, k));
  const std::vector<float> c0 = random_floats(size_t(m) * 2 * n, 603);
  auto d_c = testing_support::upload(ctx(), c0);
  auto d_tile = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(m) * tile_rows * 4, "tile");
  g.set_input(d_x, m, k);
  g.multiply(Wq.dev, d_c, 2 * n, 0, true);   // columns [0, n) += x Wq^T
  g.multiply(Wf.dev, d_c, 2 * n, n, false);  // columns [n, 2n) = x Wf^T
  g.multiply_rows(Wq.dev, tile0, tile_rows, d_tile, false);

  const Quantized q = quantize16(x, m, k);
  std::vector<float> want = c0, want_tile(size_t(m) * tile_rows);
  auto tol_of = [&](const std::vector<float>& W, int o, int r, bool quantized, double base) {
    double mag = quantized ? split_magnitude(Wq, o, q, r, k) : 0.0, bound = 0;
    for (int j = 0; j < k; ++j) {
      mag += std::fabs(W[size_t(o) * k + j] * x[size_t(r) * k + j]);
      if (quantized) bound += std::fabs(W[size_t(o) * k + j]) * q.step[size_t(r) * k + j] * (0.5 + 1e-5);
    }
    return bound + 8 * 6e-8 * std::sqrt(double(k / 32)) * mag + 1.2e-7 * std::fabs(base);
  };
  std::vector<double> tol(want.size()), tol_tile(want_tile.size());
  for (int r = 0; r < m; ++r) {
    for (int o = 0; o < n; ++o) {
      double sq = 0, sf = 0;
      for (int j = 0; j < k; ++j) {
        sq += double(Wq.dequant[size_t(o) * k + j]) * x[size_t(r) * k + j];
        sf += double(Wf.dequant[size_t(o) * k + j]) * x[size_t(r) * k + j];
      }
      const size_t iq = size_t(r) * 2 * n + o, jf = iq + n;
      tol[iq] = tol_of(Wq.dequant, o, r, true, c0[iq]);
      want[iq] = float(c0[iq] + sq);
      want[jf] = float(sf);
      tol[jf] = tol_of(Wf.dequant, o, r, false, 0.0);
    }
    for (int o = 0; o < tile_rows; ++o) {
      double s = 0;
      for (int j = 0; j < k; ++j) s += double(Wq.dequant[size_t(tile0 + o) * k + j]) * x[size_t(r) * k + j];
      want_tile[size_t(r) * tile_rows + o] = float(s);
      tol_tile[size_t(r) * tile_rows + o] = tol_of(Wq.dequant, tile0 + o, r, true, 0.0);
    }
  }
  EXPECT_TRUE(all_close("GemmLayer integer | float columns", testing_support::download(ctx(), d_c, want.size()),
                        want, [&](size_t i) { return tol[i]; }));
  EXPECT_TRUE(all_close("GemmLayer integer LM-head tile", testing_support::download(ctx(), d_tile, want_tile.size()),
                        want_tile, [&](size_t i) { return tol_tile[i]; }));
}

INSTANTIATE_TEST_SUITE_P(Types, GemmNative, ::testing::Values(TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0),
                         [](const ::testing::TestParamInfo<TensorType>& i) { return std::string(quant::traits(i.param).name); });

// Launches the device cannot run are refused with a message, not run: a type the tuning does
// not list, and an input too small for its rows.
TEST(GemmNativeLaunch, RefusesWhatItCannotRun) {
  auto ctx = testing_support::context_with_tuning("\"matvec_native_dot\": [\"avx512_vnni\"], \"gemm_native_types\": [\"Q4_1\"]");
  auto W = testing_support::make_weight(*ctx, TensorType::Q4_0, 16, 64, 7);
  EXPECT_FALSE(ops::gemm_native_fits(*ctx, W.dev));  // Q4_0 not listed
  auto xq = ctx->memory().alloc(cl::MemCategory::Scratch, ops::gemm_native_input_bytes(8, 64), "xq");
  auto bp = ctx->memory().alloc(cl::MemCategory::Scratch, ops::gemm_native_panel_bytes(16, 64), "bp");
  auto c = ctx->memory().alloc(cl::MemCategory::Scratch, 8 * 16 * 4, "c");
  EXPECT_THROW(ops::gemm_native(*ctx, 8, W.dev, 0, 16, xq, bp, c, 16, false), cl::ClError);
  auto x = ctx->memory().alloc(cl::MemCategory::Scratch, 4 * 64 * 4, "x");
  EXPECT_THROW(ops::gemm_native_quantize(*ctx, x, 8, 64, 64, xq), cl::ClError);  // x holds 4 rows, not 8
  EXPECT_THROW(ops::gemm_native_quantize(*ctx, x, 4, 48, 48, xq), cl::ClError);  // K not a multiple of 32
}

}  // namespace
}  // namespace infinipot
