// The integer decode products (matvec_q8.cl): the Q8 quantization of input rows against
// ref::quantize_q8, and matvec_q8 for Q4_0, Q4_1 and Q8_0 weights both against ref::matvec_q8
// (the same integer arithmetic, so a tight float-rounding bound) and against the float product
// ref::matvec (bounded by what 8-bit rounding of the input can move).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/matvec_q8.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::random_floats;

// The widths of SmolLM2's products (576 = n_embd, 1536 = n_ff) and the smallest ones.
const int kWidths[] = {32, 64, 576, 1536};

// Input rows with what quantization must handle: an all-zero block (d = 0), a block of one
// tiny and one huge scale apart, and exact ties (x / d = n + 0.5) that round half to even.
std::vector<float> test_input(int n_rows, int k, uint32_t seed) {
  std::vector<float> x = random_floats(size_t(n_rows) * k, seed);
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;  // block 0 of row 0
  if (k >= 64) {
    for (int j = 32; j < 64; ++j) x[j] *= 1e-6f;
    x[40] = 300.0f;
  }
  if (n_rows > 1 && k >= 64) {  // row 1, block 1: max 127, so d = 1 and x / d is x itself
    float* b = x.data() + k + 32;
    b[0] = 127.0f, b[1] = 2.5f, b[2] = -3.5f, b[3] = 0.5f, b[4] = -0.5f;
  }
  return x;
}

std::vector<uint8_t> download_bytes(cl::Context& c, const cl::Buffer& b, size_t n) {
  std::vector<uint8_t> v(n);
  c.read(b, v.data(), n);
  return v;
}

class MatvecQ8 : public testing_support::KernelTest {};

// d and s are one correctly rounded division / product of the same operands on both sides:
// equal up to 1e-6 relative (PoCL: bit-equal). q is exact: both round x / d half to even.
TEST_F(MatvecQ8, QuantizeMatchesReference) {
  for (int k : kWidths)
    for (int n_rows = 1; n_rows <= 4; ++n_rows) {
      const std::string what = "quantize_q8 K=" + std::to_string(k) + " rows=" + std::to_string(n_rows);
      const std::vector<float> x = test_input(n_rows, k, 100 + k + n_rows);
      auto d_x = upload(x);
      auto d_q = ctx().memory().alloc(cl::MemCategory::Scratch, ops::q8_bytes(n_rows, k), "xq");
      ops::quantize_q8(ctx(), d_x, n_rows, k, d_q);
      const std::vector<uint8_t> raw = download_bytes(ctx(), d_q, ops::q8_bytes(n_rows, k));
      std::vector<ref::Q8Block> got(raw.size() / sizeof(ref::Q8Block));
      std::memcpy(got.data(), raw.data(), raw.size());
      const std::vector<ref::Q8Block> want = ref::quantize_q8(x.data(), n_rows, k);
      ASSERT_EQ(got.size(), want.size()) << what;
      int q_mismatches = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i].d, want[i].d, 1e-6 * std::fabs(want[i].d)) << what << " block " << i;
        EXPECT_NEAR(got[i].s, want[i].s, 1e-6 * std::fabs(want[i].s)) << what << " block " << i;
        q_mismatches += std::memcmp(got[i].q, want[i].q, 32) != 0;
      }
      EXPECT_EQ(q_mismatches, 0) << what << ": blocks whose quants differ";
    }
  // The ties of row 1, block 1 (d = 1): 2.5 -> 2, -3.5 -> -4, 0.5 -> 0, -0.5 -> 0.
  const auto tie = ref::quantize_q8(test_input(2, 64, 7).data(), 2, 64)[3];
  EXPECT_EQ(tie.d, 1.0f);
  std::vector<int> first5;
  for (int j = 0; j < 5; ++j) first5.push_back(tie.q[ref::q8_slot(j)]);
  EXPECT_EQ(first5, (std::vector<int>{127, 2, -4, 0, 0}));
  // q8_slot is a permutation of the 32 slots.
  std::vector<int> slots;
  for (int j = 0; j < 32; ++j) slots.push_back(ref::q8_slot(j));
  std::sort(slots.begin(), slots.end());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(slots[j], j);
}

// Against the same integer arithmetic: the kernel forms each block's integer sum exactly and
// rounds only dw*dx (one product), the fma into a float8 accumulator and the final sums, so
// the error stays below 4 float ulps (4.8e-7) per sqrt(blocks) of the summed magnitude
// (ref::matvec_q8's mag, plus |y0| when accumulating). One wrong block moves a result by
// ~mag / blocks, >= 20x this.
constexpr double kQ8DotTol = 4.8e-7;

class MatvecQ8Types : public testing_support::KernelTest, public ::testing::WithParamInterface<TensorType> {};

TEST_P(MatvecQ8Types, MatchesIntegerReference) {
  const TensorType t = GetParam();
  for (int k : kWidths) {
    const int rows = 45;  // odd, and not a multiple of the 4 outputs per work-item
    auto W = make_weight(t, rows, k, 200 + k);
    // Subnormal half scales (d, and Q4_1's m) in row 0 block 0: the kernel converts halves
    // itself (matvec_q8.cl), and must get these right too.
    W.blocks[0] = 0x00, W.blocks[1] = 0x02;  // d = 2^-15 (0x0200)
    if (t == TensorType::Q4_1) W.blocks[2] = 0x01, W.blocks[3] = 0x81;  // m = -(2^-24 + 2^-16)
    testing_support::write_weight(ctx(), W);
    const int ldy = rows + 3;
    const size_t y_off = 5;
    for (int n_rows = 1; n_rows <= 4; ++n_rows)
      for (bool accumulate : {false, true}) {
        const std::string what = std::string("matvec_q8 ") + quant::traits(t).name + " K=" + std::to_string(k) +
                                 " rows=" + std::to_string(n_rows) + (accumulate ? " accumulate" : "");
        const std::vector<float> x = test_input(n_rows, k, 300 + k + n_rows);
        const std::vector<ref::Q8Block> xq = ref::quantize_q8(x.data(), n_rows, k);
        auto d_xq = upload(xq);  // the reference's blocks: this test is about the product only
        const std::vector<float> y0 = random_floats(y_off + size_t(n_rows) * ldy, 400 + n_rows);
        auto d_y = upload(y0);
        ops::matvec_q8(ctx(), W.dev, d_xq, n_rows, d_y, ldy, accumulate, y_off);

        std::vector<float> expect = y0;
        std::vector<double> mag;
        ref::matvec_q8(t, W.blocks.data(), rows, k, xq.data(), n_rows, expect.data() + y_off, ldy, accumulate, &mag);
        const double scale = kQ8DotTol * std::sqrt(double(k / 32));
        auto tol = [&](size_t i) {
          if (i < y_off || (i - y_off) % ldy >= size_t(rows)) return 0.0;  // outside the outputs: untouched
          return scale * (mag[i - y_off] + (accumulate ? std::fabs(y0[i]) : 0.0));
        };
        EXPECT_TRUE(all_close(what, download_all(d_y), expect, tol));
      }
  }
}

// Quantize on the device, then multiply; against the float product of the dequantized weights
// and the unquantized input. x - q*d is at most d/2 per element (plus the rounding of x / d,
// < 127 * 2^-24 d), so |got - want| <= sum_k |W[o][k]| * d_block(k) * (0.5 + 1e-5), plus the
// float dot bound of test_matvec.cpp (kDotTol: 2 ulps per sqrt(K) of sum |W x|). The bound is the
// worst case: typical errors are ~1/sqrt(32) of it, a wrong weight or block far above it.
TEST_P(MatvecQ8Types, MatchesFloatReferenceWithinInputRounding) {
  const TensorType t = GetParam();
  for (int k : kWidths) {
    const int rows = 37, n_rows = 3;
    auto W = make_weight(t, rows, k, 500 + k);
    const std::vector<float> x = test_input(n_rows, k, 600 + k);
    auto d_x = upload(x);
    auto d_xq = ctx().memory().alloc(cl::MemCategory::Scratch, ops::q8_bytes(n_rows, k), "xq");
    auto d_y = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * rows * 4, "y");
    ops::quantize_q8(ctx(), d_x, n_rows, k, d_xq);
    ops::matvec_q8(ctx(), W.dev, d_xq, n_rows, d_y, rows, false);

    std::vector<float> expect(size_t(n_rows) * rows);
    ref::matvec(W.dequant.data(), rows, k, x.data(), n_rows, expect.data(), rows, false);
    const std::vector<double> bound = ref::q8_input_rounding_bound(W.dequant.data(), rows, k, x.data(), n_rows, 2.4e-7);
    EXPECT_TRUE(all_close(std::string("quantize_q8 + matvec_q8 vs float ") + quant::traits(t).name + " K=" +
                              std::to_string(k),
                          download_all(d_y), expect, [&](size_t i) { return bound[i]; }));
  }
}

INSTANTIATE_TEST_SUITE_P(IntegerTypes, MatvecQ8Types,
                         ::testing::Values(TensorType::Q4_0, TensorType::Q4_1, TensorType::Q8_0),
                         [](const ::testing::TestParamInfo<TensorType>& info) {
                           return std::string(quant::traits(info.param).name);
                         });

TEST_F(MatvecQ8, RefusesTheFloatPathsTypesAndBadShapes) {
  auto xq = ctx().memory().alloc(cl::MemCategory::Scratch, ops::q8_bytes(1, 256), "xq");
  auto y = ctx().memory().alloc(cl::MemCategory::Scratch, 16 * 4, "y");
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::Q6_K}) {
    EXPECT_FALSE(ops::matvec_q8_supports(t));
    auto W = make_weight(t, 16, 256, 700);
    EXPECT_THROW(ops::matvec_q8(ctx(), W.dev, xq, 1, y, 16, false), cl::ClError) << quant::traits(t).name;
  }
  auto W = make_weight(TensorType::Q4_1, 16, 256, 701);
  EXPECT_THROW(ops::matvec_q8(ctx(), W.dev, xq, 2, y, 16, false), cl::ClError) << "xq holds one row";
  auto x = ctx().memory().alloc(cl::MemCategory::Scratch, 40 * 4, "x");
  EXPECT_THROW(ops::quantize_q8(ctx(), x, 1, 40, xq), cl::ClError) << "K not a multiple of 32";
}

// GPUs run matvec with work-groups of 64 (global size rounded up past n_out): its guards here.
TEST(MatvecQ8WorkGroups, Local64MatchesReference) {
  std::unique_ptr<cl::Context> c;
  ASSERT_NO_THROW(c = testing_support::context_with_work_groups(64)) << "the kernel tests need an OpenCL device";
  const int rows = 45, k = 576, n_rows = 2;
  auto W = testing_support::make_weight(*c, TensorType::Q4_1, rows, k, 800);
  const std::vector<float> x = test_input(n_rows, k, 801);
  const std::vector<ref::Q8Block> xq = ref::quantize_q8(x.data(), n_rows, k);
  auto d_xq = testing_support::upload(*c, xq);
  const std::vector<float> y0 = random_floats(size_t(n_rows) * rows, 802);
  auto d_y = testing_support::upload(*c, y0);
  ops::matvec_q8(*c, W.dev, d_xq, n_rows, d_y, rows, true);
  std::vector<float> expect = y0;
  std::vector<double> mag;
  ref::matvec_q8(TensorType::Q4_1, W.blocks.data(), rows, k, xq.data(), n_rows, expect.data(), rows, true, &mag);
  EXPECT_TRUE(all_close("matvec_q8 local=64", testing_support::download(*c, d_y, y0.size()), expect, [&](size_t i) {
    return kQ8DotTol * std::sqrt(double(k / 32)) * (mag[i] + std::fabs(y0[i]));
  }));
}

}  // namespace
}  // namespace infinipot
