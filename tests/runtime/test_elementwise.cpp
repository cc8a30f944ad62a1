// elementwise.cl (the gated activations SwiGLU and GEGLU-tanh, scaling, bias adds) against
// ref::swiglu and ref::geglu_tanh in tests/support/cpu_ref.h.
#include <cmath>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/ops/elementwise.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using testing_support::all_close;
using testing_support::random_floats;

constexpr double kUlp = 1.0 / (1 << 23);  // float epsilon, 2^-23

// SwiGLU: exp (<= 3 ulp), 1 + e, a division (<= 2.5 ulp) and a product: relative 2e-6 = 16 ulp.
constexpr double kSwigluRelTol = 2e-6;

// GEGLU (tanh): tanh (<= 5 ulp in OpenCL) and a few products, relative 2e-6 as SwiGLU; but
// 1 + tanh(z) cancels for z << 0 (the result is then tiny), so each output may also be off by
// ~2 ulp of 0.5 |g u| absolutely: kGegluAbsUlps * ulp * |g u|.
constexpr double kGegluAbsUlps = 2;

// One product per element, rounded once on both sides (scale): bit-exact.
constexpr double kExactTol = 0.0;

class LayerKernel : public testing_support::KernelTest {};

TEST_F(LayerKernel, SwigluMatchesReference) {
  const int n_rows = 3, n_ff = 100;
  const std::vector<float> gu = random_floats(size_t(n_rows) * 2 * n_ff, 400, -8.0f, 8.0f);
  auto d_gu = upload(gu);
  auto d_act = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * n_ff * 4, "act");
  ops::swiglu(ctx(), d_gu, n_rows, n_ff, d_act);
  std::vector<float> expect(size_t(n_rows) * n_ff);
  ref::swiglu(gu.data(), n_rows, n_ff, expect.data());
  EXPECT_TRUE(all_close("swiglu", download_all(d_act), expect,
                        [&](size_t i) { return kSwigluRelTol * std::fabs(expect[i]); }));
}

TEST_F(LayerKernel, GegluTanhMatchesReference) {
  const int n_rows = 3, n_ff = 100;
  const std::vector<float> gu = random_floats(size_t(n_rows) * 2 * n_ff, 410, -8.0f, 8.0f);
  auto d_gu = upload(gu);
  auto d_act = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(n_rows) * n_ff * 4, "act");
  ops::geglu_tanh(ctx(), d_gu, n_rows, n_ff, d_act);
  std::vector<float> expect(size_t(n_rows) * n_ff);
  ref::geglu_tanh(gu.data(), n_rows, n_ff, expect.data());
  EXPECT_TRUE(all_close("geglu_tanh", download_all(d_act), expect, [&](size_t i) {
    const size_t r = i / n_ff, c = i % n_ff;
    const double gu_mag = std::fabs(double(gu[r * 2 * n_ff + c]) * gu[r * 2 * n_ff + n_ff + c]);
    return kSwigluRelTol * std::fabs(expect[i]) + kGegluAbsUlps * kUlp * gu_mag;
  }));
}

// One product per element, rounded once on both sides: bit-exact.
TEST_F(LayerKernel, ScaleMatchesReference) {
  const std::vector<float> x = random_floats(1001, 420, -5.0f, 5.0f);
  auto d_x = upload(x);
  ops::scale(ctx(), d_x, 1000, 25.298221f);  // the last element must stay as it was
  std::vector<float> expect = x;
  for (size_t i = 0; i < 1000; ++i) expect[i] = x[i] * 25.298221f;
  EXPECT_TRUE(all_close("scale", download_all(d_x), expect, kExactTol));
}

// One addition per element, rounded once on both sides: bit-exact; columns past n_cols and
// rows past n_rows stay as they were.
TEST_F(LayerKernel, AddBiasMatchesReference) {
  const int n_rows = 5, ld = 112, n_cols = 96;
  const std::vector<float> x = random_floats(size_t(n_rows + 1) * ld, 430, -5.0f, 5.0f);
  const std::vector<float> bias = random_floats(n_cols, 431, -2.0f, 2.0f);
  auto d_x = upload(x);
  auto d_b = upload(bias);
  ops::add_bias(ctx(), d_x, ld, n_rows, n_cols, d_b);
  std::vector<float> expect = x;
  for (int r = 0; r < n_rows; ++r)
    for (int c = 0; c < n_cols; ++c) expect[size_t(r) * ld + c] = x[size_t(r) * ld + c] + bias[c];
  EXPECT_TRUE(all_close("add_bias", download_all(d_x), expect, kExactTol));
}

}  // namespace
}  // namespace infinipot
