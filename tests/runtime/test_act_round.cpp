// --round-activations (act_round.cl): the device rounding against its host reference
// (ref::round_activations in tests/support/cpu_ref.cpp), and the properties the reference itself must have:
// every value a whole number of its block's step, at most 127 steps, within half a step (plus
// the half-precision rounding of Q8_0's step) of the input; ties to even; zero blocks stay zero.
#include <algorithm>
#include <cmath>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/act_round.h"
#include "tests/support/cpu_ref.h"
#include "tests/runtime/kernel_fixture.h"

namespace infinipot {
namespace {

using ops::ActRound;
using testing_support::random_floats;

int block_of(ActRound k) { return k == ActRound::Q8_K ? 256 : k == ActRound::Q8_0 ? 32 : 1; }
void reference(std::vector<float>& x, int k, ActRound kind) { ref::round_activations(x, k, block_of(kind)); }

// Rows with a zero block, a block with one huge value among tiny ones, and negative maxima
// (Q8_K's scale takes the sign of the largest-magnitude element).
std::vector<float> test_input(int n_rows, int k, uint32_t seed) {
  std::vector<float> x = random_floats(size_t(n_rows) * k, seed, -3.f, 3.f);
  const int b = std::min(k, 256);
  if (k >= 64) {
    std::fill(x.begin(), x.begin() + std::min(b, 32), 0.f);
    if (k >= 2 * b) {
      for (int j = b; j < 2 * b; ++j) x[j] *= 1e-5f;
      x[b + 7] = -250.f;
    }
  }
  return x;
}

class ActRoundKernel : public testing_support::KernelTest {};

TEST_F(ActRoundKernel, MatchesTheHostReference) {
  for (ActRound kind : {ActRound::Q8_0, ActRound::Q8_K, ActRound::F16}) {
    for (int k : {256, 640, 1024, 2048}) {
      if (k % block_of(kind) != 0) continue;
      for (int rows : {1, 3, 7}) {
        std::vector<float> x = test_input(rows, k, 11u * k + rows);
        std::vector<float> ref = x;
        reference(ref, k, kind);
        cl::Buffer buf = upload(x);
        ops::round_activations(ctx(), buf, rows, k, kind);
        const std::vector<float> got = download(buf, x.size());
        // Same rule on both sides; PoCL's float division is correctly rounded, so exact.
        size_t bad = 0;
        for (size_t i = 0; i < x.size(); ++i) bad += got[i] != ref[i];
        EXPECT_EQ(bad, 0u) << ops::act_round_name(kind) << " k " << k << " rows " << rows;
      }
    }
  }
}

TEST(ActRoundReference, ValuesAreWholeStepsWithinHalfAStepOfTheInput) {
  for (ActRound kind : {ActRound::Q8_0, ActRound::Q8_K}) {
    const int B = block_of(kind), k = 1024;
    std::vector<float> x = test_input(2, k, 5), r = x;
    reference(r, k, kind);
    for (size_t b0 = 0; b0 < x.size(); b0 += B) {
      float amax = 0.f;
      for (int j = 0; j < B; ++j) amax = std::max(amax, std::fabs(x[b0 + j]));
      if (amax == 0.f) {
        for (int j = 0; j < B; ++j) EXPECT_EQ(r[b0 + j], 0.f);
        continue;
      }
      // Q8_0 multiplies by its step rounded to half (coarse where the step is a half subnormal,
      // below 6.1e-5): 127 steps of that rounding's error on top of half a step.
      const float step = amax / 127.f;
      const float used = kind == ActRound::Q8_0 ? quant::fp16_to_fp32(quant::fp32_to_fp16(step)) : step;
      const float slack = 127.f * std::fabs(step - used) + 1e-6f * amax;
      for (int j = 0; j < B; ++j) {
        const float v = r[b0 + j], q = v / used;
        EXPECT_NEAR(q, std::nearbyint(q), 1e-4f) << "not a whole number of steps at " << b0 + j;
        EXPECT_LE(std::fabs(q), 127.f + 1e-4f);
        EXPECT_LE(std::fabs(v - x[b0 + j]), 0.5f * step + slack) << ops::act_round_name(kind) << " at " << b0 + j;
      }
      // The largest element keeps its value (127 steps), up to the step's own rounding.
      int jm = 0;
      for (int j = 1; j < B; ++j) if (std::fabs(x[b0 + j]) > std::fabs(x[b0 + jm])) jm = j;
      EXPECT_NEAR(r[b0 + jm], x[b0 + jm], slack + 1e-6f * amax);
    }
  }
}

TEST(ActRoundReference, TiesRoundToEven) {
  // A Q8_K block whose largest magnitude is -127: iscale = 1, so x itself is rounded.
  std::vector<float> x(256, 0.f);
  x[0] = -127.f, x[1] = 2.5f, x[2] = -3.5f, x[3] = 0.5f, x[4] = 1.25f;
  reference(x, 256, ActRound::Q8_K);
  EXPECT_EQ(x[0], -127.f);
  EXPECT_EQ(x[1], 2.f);
  EXPECT_EQ(x[2], -4.f);
  EXPECT_EQ(x[3], 0.f);
  EXPECT_EQ(x[4], 1.f);
  // F16: 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): to 1 (even).
  std::vector<float> h = {1.f + std::ldexp(1.f, -11), 1.f + 3 * std::ldexp(1.f, -11)};
  reference(h, 1, ActRound::F16);
  EXPECT_EQ(h[0], 1.f);
  EXPECT_EQ(h[1], 1.f + std::ldexp(1.f, -9));
}

TEST(ActRoundReference, FormatPerWeightTypeIsLlamaCppsVecDotType) {
  using gguf::TensorType;
  EXPECT_EQ(ops::act_round_for(TensorType::Q4_0), ActRound::Q8_0);
  EXPECT_EQ(ops::act_round_for(TensorType::Q4_1), ActRound::Q8_0);
  EXPECT_EQ(ops::act_round_for(TensorType::Q5_0), ActRound::Q8_0);
  EXPECT_EQ(ops::act_round_for(TensorType::Q8_0), ActRound::Q8_0);
  EXPECT_EQ(ops::act_round_for(TensorType::Q4_K), ActRound::Q8_K);
  EXPECT_EQ(ops::act_round_for(TensorType::Q6_K), ActRound::Q8_K);
  EXPECT_EQ(ops::act_round_for(TensorType::F16), ActRound::F16);
  EXPECT_EQ(ops::act_round_for(TensorType::F32), ActRound::None);
}

TEST_F(ActRoundKernel, RefusesARowThatIsNotWholeBlocks) {
  cl::Buffer buf = upload(std::vector<float>(640, 1.f));
  try {
    ops::round_activations(ctx(), buf, 1, 640, ActRound::Q8_K);
    FAIL() << "a 640-wide row is not whole Q8_K blocks";
  } catch (const cl::ClError& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_K blocks of 256"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infinipot
