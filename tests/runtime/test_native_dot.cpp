// The decode products in the CPU's own 8-bit dot instruction (cl_kernels/native_dot.cl, tuning
// matvec_native_dot): every matvec.cl variant that takes them (plain and accumulating, the norm
// inside, the GLU, RoPE + KV store) for Q4_0, Q4_1 and Q8_0 weights, against ref::quantize_q8 +
// ref::matvec_q8 (the same 8-bit input and integer sums, so a float-rounding bound) and against
// the float product of the unquantized input (bounded by what 8-bit rounding can move).
// Each runs in the device's own form and in the AVX2 form (vpmaddubsw + vpmaddwd; on a CPU with
// AVX-512 VNNI the own form is vpdpbusd, and the AVX2 one runs too). These run only on a device
// that has such instructions (DeviceInfo::native_dot: a PoCL device on an x86 CPU with AVX2);
// elsewhere the path does not exist (matvec_native is false, asserted below) and the tests say
// so and skip.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/matvec.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::random_floats;

// 32: one block (a unit of 4 with 3 empty); 160: one whole unit and a lone block; 576 and 1536:
// SmolLM2's widths (18 blocks: 4 units and a pair; 48: whole units); 96: three blocks, no unit.
const int kWidths[] = {32, 96, 160, 576, 1536};

using NativeDot = testing_support::NativeDotTest;

// Per output of the integer reference: the bound of the kernel's float rounding. The kernel
// forms each block's integer sums exactly, then rounds dw*dx, one fma per 4 int32 lanes, the
// min term and the lane sums: 8 float ulps (2 x the 4 that MatvecQ8Types allows matvec_q8) per
// sqrt(blocks) of the magnitude it rounds against. That is ref::matvec_q8's, plus for Q4_0,
// which the kernel evaluates as dw dx sum(qw qx) - 8 dw sx (qw the unsigned nibble) where the
// reference sums (qw - 8) qx, the two terms' own size: 16 |dw| dx sum|qx| per block bounds them
// (an input outlier on a weight of 8 adds nothing to (qw - 8) qx but 8 x 127 to each term);
// for Q8_0, evaluated as dw dx sum((qw + 128) qx) - 128 dw sx, 256 |dw| dx sum|qx|.
// One wrong block or lane moves a result by ~mag / blocks, >= 10x this.
double int_tolerance(double mag, int k) { return 2 * 4.8e-7 * std::sqrt(double(k / 32)) * mag; }

// The Q4_0 and Q8_0 additions above, per output [n_rows][ldy] (added into mag).
void add_split_magnitude(const testing_support::TestWeight& W, const std::vector<ref::Q8Block>& xq, int n_rows,
                         int ldy, std::vector<double>& mag) {
  if (W.dev.type != TensorType::Q4_0 && W.dev.type != TensorType::Q8_0) return;
  const bool q8 = W.dev.type == TensorType::Q8_0;
  const int nb = W.dev.cols / 32, block_bytes = q8 ? 34 : 18;  // GGUF blocks: half d, then the quants
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < W.dev.rows; ++o)
      for (int b = 0; b < nb; ++b) {
        const uint8_t* blk = W.blocks.data() + size_t(o) * W.dev.row_bytes + b * block_bytes;
        const double dw = std::fabs(quant::fp16_to_fp32(uint16_t(blk[0] | blk[1] << 8)));
        const ref::Q8Block& xb = xq[size_t(r) * nb + b];
        double qx = 0;
        for (int j = 0; j < 32; ++j) qx += std::abs(int(xb.q[j]));
        mag[size_t(r) * ldy + o] += (q8 ? 256 : 16) * dw * xb.d * qx;
      }
}

TEST_P(NativeDot, MatvecMatchesIntegerReference) {
  const TensorType t = type();
  for (int k : kWidths) {
    const int rows = 301;  // not a multiple of the 128 rows of a work-group, nor of the 4 of an item
    auto W = testing_support::make_weight(ctx(), t, rows, k, 200 + k);
    ASSERT_TRUE(ops::matvec_native(ctx(), W.dev));
    const int ldy = rows + 3;
    const size_t y_off = 5;
    for (int n_rows = 1; n_rows <= 4; ++n_rows)
      for (bool accumulate : {false, true}) {
        const std::string what = std::string("native matvec ") + quant::traits(t).name + " K=" + std::to_string(k) +
                                 " rows=" + std::to_string(n_rows) + (accumulate ? " accumulate" : "");
        const std::vector<float> x = testing_support::quantization_test_input(n_rows, k, 300 + k + n_rows);
        auto d_x = upload(x);
        const std::vector<float> y0 = random_floats(y_off + size_t(n_rows) * ldy, 400 + n_rows);
        auto d_y = upload(y0);
        ops::matvec(ctx(), W.dev, d_x, n_rows, d_y, ldy, accumulate, y_off);

        const std::vector<ref::Q8Block> xq = ref::quantize_q8(x.data(), n_rows, k);
        std::vector<float> expect = y0;
        std::vector<double> mag;
        ref::matvec_q8(t, W.blocks.data(), rows, k, xq.data(), n_rows, expect.data() + y_off, ldy, accumulate, &mag);
        add_split_magnitude(W, xq, n_rows, ldy, mag);
        auto tol = [&](size_t i) {
          if (i < y_off || (i - y_off) % ldy >= size_t(rows)) return 0.0;  // outside the outputs: untouched
          return int_tolerance(mag[i - y_off] + (accumulate ? std::fabs(y0[i]) : 0.0), k);
        };
        EXPECT_TRUE(all_close(what, download(d_y, y0.size()), expect, tol));
      }
  }
}

// Against the float product of the unquantized input, within what 8-bit input rounding can
// move it (ref::q8_input_rounding_bound).
TEST_P(NativeDot, MatvecMatchesFloatReferenceWithinInputRounding) {
  const TensorType t = type();
  for (int k : kWidths) {
    const int rows = 37, n_rows = 3;
    auto W = testing_support::make_weight(ctx(), t, rows, k, 500 + k);
    const std::vector<float> x = testing_support::quantization_test_input(n_rows, k, 600 + k);
    auto d_x = upload(x);
    auto d_y = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * rows * 4, "y");
    ops::matvec(ctx(), W.dev, d_x, n_rows, d_y, rows, false);
    std::vector<float> expect(size_t(n_rows) * rows);
    ref::matvec(W.dequant.data(), rows, k, x.data(), n_rows, expect.data(), rows, false);
    const std::vector<double> bound = ref::q8_input_rounding_bound(W.dequant.data(), rows, k, x.data(), n_rows, 4.8e-7);
    EXPECT_TRUE(all_close(std::string("native matvec vs float ") + quant::traits(t).name + " K=" + std::to_string(k),
                          download(d_y, expect.size()), expect, [&](size_t i) { return bound[i]; }));
  }
}

// The norm inside: the work-group quantizes x * nw and scales the sums by 1 / rms(x). Reference:
// ref::quantize_q8 of the float products x * nw, the integer product, times 1 / rms in double.
TEST_P(NativeDot, MatvecNormMatchesIntegerReference) {
  const TensorType t = type();
  const float eps = 1e-5f;
  for (int k : kWidths) {
    const int rows = 133;
    auto W = testing_support::make_weight(ctx(), t, rows, k, 700 + k);
    for (int n_rows : {1, 3}) {
      const std::vector<float> x = testing_support::quantization_test_input(n_rows, k, 800 + k + n_rows);
      const std::vector<float> nw = random_floats(k, 900 + k, 0.5f, 1.5f);
      auto d_x = upload(x), d_nw = upload(nw);
      auto d_y = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * rows * 4, "y");
      ops::matvec_norm(ctx(), W.dev, d_x, {&d_nw, eps}, n_rows, d_y, rows);

      std::vector<float> xn(x.size());
      for (size_t i = 0; i < x.size(); ++i) xn[i] = x[i] * nw[i % k];
      const std::vector<ref::Q8Block> xq = ref::quantize_q8(xn.data(), n_rows, k);
      std::vector<float> expect(size_t(n_rows) * rows);
      std::vector<double> mag;
      ref::matvec_q8(t, W.blocks.data(), rows, k, xq.data(), n_rows, expect.data(), rows, false, &mag);
      add_split_magnitude(W, xq, n_rows, rows, mag);
      std::vector<double> bound(expect.size());
      for (int r = 0; r < n_rows; ++r) {
        double ss = 0;
        for (int j = 0; j < k; ++j) ss += double(x[size_t(r) * k + j]) * x[size_t(r) * k + j];
        const double inv_rms = 1.0 / std::sqrt(ss / k + eps);
        for (int o = 0; o < rows; ++o) {
          const size_t i = size_t(r) * rows + o;
          expect[i] = float(expect[i] * inv_rms);
          // The integer-reference bound, scaled, plus the float sum of squares and rsqrt (~1e-6).
          bound[i] = int_tolerance(mag[i], k) * inv_rms + 2e-6 * std::fabs(expect[i]);
        }
      }
      EXPECT_TRUE(all_close(std::string("native matvec_norm ") + quant::traits(t).name + " K=" + std::to_string(k) +
                                " rows=" + std::to_string(n_rows),
                            download(d_y, expect.size()), expect, [&](size_t i) { return bound[i]; }));
    }
  }
}

// The GLU and RoPE + KV store epilogues read the same per-row sums as the plain product (same
// quantized input, same function per row): against the plain native product's outputs put
// through ref::swiglu and ref::rope_store_kv.
TEST_P(NativeDot, FusedEpiloguesMatchThePlainProduct) {
  const TensorType t = type();
  const int k = 576, n_rows = 2;
  const std::vector<float> x = testing_support::quantization_test_input(n_rows, k, 1000);
  auto d_x = upload(x);
  {  // gate|up fused in one matrix (up rows from n_ff), SiLU
    const int n_ff = 150;
    auto gu = testing_support::make_weight(ctx(), t, 2 * n_ff, k, 1001);
    auto d_gu = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * 2 * n_ff * 4, "gu");
    auto d_act = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * n_ff * 4, "act");
    ops::matvec(ctx(), gu.dev, d_x, n_rows, d_gu, 2 * n_ff, false);
    ops::matvec_glu(ctx(), gu.dev, gu.dev, n_ff, n_ff, ops::Glu::Silu, d_x, {}, n_rows, d_act);
    const std::vector<float> sums = download(d_gu, size_t(n_rows) * 2 * n_ff);
    std::vector<float> expect(size_t(n_rows) * n_ff);
    ref::swiglu(sums.data(), n_rows, n_ff, expect.data());
    EXPECT_TRUE(all_close(std::string("native matvec_glu ") + quant::traits(t).name, download(d_act, expect.size()),
                          expect, [&](size_t i) { return 2e-6 * std::fabs(expect[i]) + 1e-7; }));
  }
  {  // q|k|v: 3 q heads, 1 k and 1 v head of 64, RoPE on all 64, slots 5.. of a 16-slot cache
    const int head_dim = 64, n_head = 3, n_kv = 1, rows = (n_head + 2 * n_kv) * head_dim, cap = 16, slot0 = 5;
    const float theta = 10000.f;
    auto W = testing_support::make_weight(ctx(), t, rows, k, 1002);
    auto d_plain = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * rows * 4, "plain");
    auto d_qkv = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * rows * 4, "qkv");
    const std::vector<float> zeros(size_t(n_kv) * cap * head_dim, 0.f);
    auto d_k = upload(zeros), d_v = upload(zeros);
    const std::vector<int> pos = {7, 8};
    auto d_cs = upload(ops::rope_angles(pos, head_dim, theta));
    ops::matvec(ctx(), W.dev, d_x, n_rows, d_plain, rows, false);
    const ops::RopeKv rkv{n_head, n_kv, head_dim, head_dim, &d_cs, &d_k, &d_v, cap, slot0};
    ops::matvec_qkv_rope(ctx(), W.dev, d_x, {}, n_rows, d_qkv, rkv);
    std::vector<float> expect = download(d_plain, size_t(n_rows) * rows);
    std::vector<float> k_expect = zeros, v_expect = zeros;
    ref::rope_store_kv(expect.data(), rows, n_head, n_kv, head_dim, head_dim, pos.data(), theta, k_expect.data(),
                       v_expect.data(), cap, slot0, n_rows);
    auto tol = [&](const std::vector<float>& e) {
      double m = 0;
      for (float v : e) m = std::max(m, double(std::fabs(v)));
      return [m](size_t) { return 1e-5 * m; };  // the angles' float rounding against ref's double
    };
    const std::string name = quant::traits(t).name;
    EXPECT_TRUE(all_close("native matvec_qkv_rope q|k|v " + name, download(d_qkv, expect.size()), expect, tol(expect)));
    EXPECT_TRUE(all_close("native matvec_qkv_rope keys " + name, download(d_k, zeros.size()), k_expect, tol(k_expect)));
    EXPECT_TRUE(all_close("native matvec_qkv_rope values " + name, download(d_v, zeros.size()), v_expect,
                          tol(v_expect)));
  }
}

INSTANTIATE_TEST_SUITE_P(IntegerTypes, NativeDot,
                         ::testing::Combine(::testing::Values(TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0),
                                            ::testing::Values(-1, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<TensorType, int>>& info) {
                           return std::string(quant::traits(std::get<0>(info.param)).name) +
                                  (std::get<1>(info.param) == 2 ? "_avx2" : "_own");
                         });

// What never takes the native dot: other weight types, widths that are not whole blocks, and
// any device when the tuning turns it off.
TEST(NativeDotChoice, OnlyQ4AndQ8WeightsOfWholeBlocksWhenTheTuningSaysSo) {
  auto on = testing_support::context_with_tuning(
      "\"matvec_native_dot\": [\"avx512_vnni\", \"avx2\"], \"matvec_native_types\": [\"Q4_0\", \"Q4_1\", \"Q8_0\"]");
  auto off = testing_support::context_with_tuning("\"matvec_native_dot\": []");
  const bool has = on->device().native_dot > 0;
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0, TensorType::Q6_K, TensorType::F32}) {
    auto W = testing_support::make_weight(*on, t, 8, 256, 1100);
    const bool integer = t == TensorType::Q4_0 || t == TensorType::Q4_1 || t == TensorType::Q8_0;
    EXPECT_EQ(ops::matvec_native(*on, W.dev), has && integer) << quant::traits(t).name;
    auto W2 = testing_support::make_weight(*off, t, 8, 256, 1100);
    EXPECT_FALSE(ops::matvec_native(*off, W2.dev)) << quant::traits(t).name;
  }
  auto F = testing_support::make_weight(*on, TensorType::F32, 8, 40, 1101);  // K not whole blocks
  EXPECT_FALSE(ops::matvec_native(*on, F.dev));
  // A form the tuning does not list stays off: PoCL's default lists AVX-512 VNNI only.
  cl::ContextOptions avx2;
  avx2.tuning_overrides = {{"matvec_native_dot", {"avx512_vnni"}}};
  avx2.native_dot_form = 2;
  cl::Context c2(avx2);
  auto W3 = testing_support::make_weight(c2, TensorType::Q4_1, 8, 256, 1102);
  EXPECT_FALSE(ops::matvec_native(c2, W3.dev)) << c2.device().native_dot_name();
  // A type the tuning does not list stays off (PoCL's default: Q4_0 and Q4_1, not Q8_0).
  auto q4only = testing_support::context_with_tuning(
      "\"matvec_native_dot\": [\"avx512_vnni\", \"avx2\"], \"matvec_native_types\": [\"Q4_0\", \"Q4_1\"]");
  auto W8 = testing_support::make_weight(*q4only, TensorType::Q8_0, 8, 256, 1103);
  auto W4 = testing_support::make_weight(*q4only, TensorType::Q4_0, 8, 256, 1104);
  EXPECT_FALSE(ops::matvec_native(*q4only, W8.dev));
  EXPECT_EQ(ops::matvec_native(*q4only, W4.dev), has);
  // The keys are lists of form names and of weight types.
  EXPECT_THROW(testing_support::context_with_tuning("\"matvec_native_dot\": true"), cl::ClError);
  EXPECT_THROW(testing_support::context_with_tuning("\"matvec_native_dot\": [\"vnni\"]"), cl::ClError);
  EXPECT_THROW(testing_support::context_with_tuning("\"matvec_native_types\": [\"Q6_K\"]"), cl::ClError);
  // Only the device's own form, none, or the AVX2 form can be asked for.
  cl::ContextOptions bad;
  bad.native_dot_form = 1;
  EXPECT_THROW(cl::Context{bad}, cl::ClError);
}

}  // namespace
}  // namespace infinipot
