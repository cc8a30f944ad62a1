// Shared set-up of the tests of the kernels that read GGUF-encoded weights (test_embedding.cpp,
// test_dequant.cpp, test_matvec.cpp, test_gemm.cpp): every weight type the device supports as
// the WeightKernel suite's parameters, their test widths, and the bound of a float dot product.
#pragma once
#include <cmath>
#include <ostream>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "model_loader/quant.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace gguf {
// Names weight types in gtest/ctest output ("Q6_K" rather than a byte dump).
inline void PrintTo(TensorType t, std::ostream* os) { *os << quant::traits(t).name; }
}  // namespace gguf

namespace testing_support {

using quant::TensorType;

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

inline std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

// Per-element bound for C (+)= A B^T: kDotTol * sqrt(K) * (|A| |B|^T + |C0|).
inline std::vector<double> dot_bounds(int m, int n, int k, const std::vector<float>& A, int lda,
                                      const std::vector<float>& B, int ldb, const std::vector<float>& C0, int ldc,
                                      bool accumulate) {
  std::vector<float> mag(C0.size(), 0.0f);
  if (accumulate) mag = abs_of(C0);
  ref::gemm_abt(m, n, k, abs_of(A).data(), lda, abs_of(B).data(), ldb, mag.data(), ldc, accumulate);
  std::vector<double> tol(mag.size());
  for (size_t i = 0; i < mag.size(); ++i) tol[i] = kDotTol * std::sqrt(double(k)) * mag[i];
  return tol;
}

inline const char* type_name(TensorType t) { return quant::traits(t).name; }

// Widths that are multiples of the block size but not powers of two.
inline int test_cols(TensorType t) {
  switch (t) {
    case TensorType::F32: case TensorType::F16: case TensorType::BF16: return 200;  // 25 groups of 8
    case TensorType::Q4_K: case TensorType::Q5_K: case TensorType::Q6_K: return 768;  // 3 super-blocks of 256
    default: return 352;                                     // 11 blocks of 32
  }
}

// The suite of the weight kernels' tests, each run for every type of weight_kernel_types: each
// test file instantiates it as
//   INSTANTIATE_TEST_SUITE_P(AllDeviceTypes, WeightKernel, ::testing::ValuesIn(weight_kernel_types()),
//                            weight_type_param_name);
class WeightKernel : public KernelTest, public ::testing::WithParamInterface<TensorType> {};

// Every weight type the device supports.
inline const std::vector<TensorType>& weight_kernel_types() {
  static const std::vector<TensorType> types = {TensorType::F32,  TensorType::F16,  TensorType::Q4_0, TensorType::Q4_1,
                                                TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q4_K,
                                                TensorType::Q5_K, TensorType::Q6_K, TensorType::BF16};
  return types;
}

// Names each instance by its type ("AllDeviceTypes/WeightKernel.EmbedMatchesReference/Q4_0").
inline std::string weight_type_param_name(const ::testing::TestParamInfo<TensorType>& info) {
  return type_name(info.param);
}

}  // namespace testing_support
}  // namespace infinipot
