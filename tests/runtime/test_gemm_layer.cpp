// GemmLayer, the prefill products: the CLBlast backend against the reference, and the OpenCL
// context it leaves behind. CLBlast caches its compiled programs process-wide, and a cached
// program holds its context; without a clear the context of every engine that ran a CLBlast
// product stayed alive (on the NVIDIA H200, `bench` grew by ~100 MiB of host memory per row).
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/gemm_layer.h"
#include "tests/runtime/kernel_fixture.h"

namespace infinipot {
namespace {

using testing_support::random_floats;

cl_uint context_references(const cl::Context& c) {
  cl_uint n = 0;
  cl::check(clGetContextInfo(c.context(), CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, nullptr), "clGetContextInfo");
  return n;
}

TEST(GemmLayer, ClblastMatchesTheReferenceAndLetsItsContextGo) {
  auto ctx = testing_support::context_with_tuning("\"gemm_backend\": \"clblast\"");
  ASSERT_EQ(ctx->tuning().gemm_backend, "clblast");
  const int m = 7, n = 37, k = 64;
  auto W = testing_support::make_weight(*ctx, quant::TensorType::Q8_0, n, k, 5);
  const std::vector<float> X = random_floats(size_t(m) * k, 6);
  auto d_X = testing_support::upload(*ctx, X);
  auto C = ctx->memory().alloc(cl::MemCategory::Scratch, size_t(m) * n * 4, "C");
  // Our own kernels (the dequantization before the product) hold the context through the
  // Context's program cache, for as long as the Context lives: build them first.
  auto panel = ctx->memory().alloc(cl::MemCategory::Gemm, size_t(n) * k * 4, "panel");
  ops::dequant_rows(*ctx, W.dev, panel);
  ctx->finish();
  const cl_uint before = context_references(*ctx);
  {
    GemmLayer g(*ctx, "clblast", m, k, size_t(n) * k);
    g.set_input(d_X, m, k);
    g.multiply(W.dev, C, n, 0, false);
    ctx->finish();
  }
  std::vector<float> expect(size_t(m) * n);
  ref::gemm_abt(m, n, k, X.data(), k, W.dequant.data(), k, expect.data(), n, false);
  const auto got = testing_support::download(*ctx, C, expect.size());
  for (size_t i = 0; i < expect.size(); ++i) ASSERT_NEAR(got[i], expect[i], 1e-4 * (1 + std::fabs(expect[i]))) << i;
  EXPECT_EQ(context_references(*ctx), before)
      << "the CLBlast product left references to this context (cached programs) after its GemmLayer went";
}

}  // namespace
}  // namespace infinipot
