// norm.cl (RMSNorm: plain, added into the residual, per head) against ref::rms_norm in
// tests/support/cpu_ref.h.
#include <cmath>
#include <memory>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/norm.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using testing_support::all_close;
using testing_support::random_floats;

constexpr double kUlp = 1.0 / (1 << 23);  // float epsilon, 2^-23

// RMSNorm: the fp32 sum of n squares (relative error ~sqrt(n) ulp, 24 ulp for n = 576), rsqrt
// (<= 2 ulp in OpenCL) and two products. Relative to each output: 1e-5 = 84 ulp, ~3x headroom.
constexpr double kNormRelTol = 1e-5;

// Columns outside the normalised heads are left as they were: bit-exact.
constexpr double kExactTol = 0.0;

class LayerKernel : public testing_support::KernelTest {};

void check_rms_norm(cl::Context& c, const std::string& what) {
  for (int n : {100, 576}) {
    const int n_rows = 3;
    const float eps = 1e-5f;
    std::vector<float> x = random_floats(size_t(n_rows) * n, 100 + n, -3.0f, 3.0f);
    for (int i = 0; i < n; ++i) x[size_t(2) * n + i] *= 1e-3f;  // mean square ~3e-6: eps matters
    const std::vector<float> w = random_floats(n, 101 + n, 0.5f, 1.5f);
    std::vector<float> expect(x.size());
    ref::rms_norm(x.data(), w.data(), expect.data(), n_rows, n, eps);
    auto tol = [&](size_t i) { return kNormRelTol * std::fabs(expect[i]); };

    auto d_x = testing_support::upload(c, x);
    auto d_w = testing_support::upload(c, w);
    auto d_out = c.memory().alloc(cl::MemCategory::Scratch, x.size() * 4, "norm out");
    ops::rms_norm(c, d_x, d_w, d_out, n_rows, n, eps);
    EXPECT_TRUE(all_close(what + " n=" + std::to_string(n), testing_support::download(c, d_out, x.size()), expect, tol));
    ops::rms_norm(c, d_x, d_w, d_x, n_rows, n, eps);  // x and out may alias
    EXPECT_TRUE(all_close(what + " in place n=" + std::to_string(n), testing_support::download(c, d_x, x.size()),
                          expect, tol));
  }
}

TEST_F(LayerKernel, RmsNormMatchesReference) { check_rms_norm(ctx(), "rms_norm"); }

// Gemma's post-norms: out += rmsnorm(x) * w, added into the residual stream in one pass.
TEST_F(LayerKernel, RmsNormAddMatchesReference) {
  const int n_rows = 3, n = 640;
  const float eps = 1e-6f;
  const std::vector<float> x = random_floats(size_t(n_rows) * n, 110, -3.0f, 3.0f);
  const std::vector<float> w = random_floats(n, 111, 0.5f, 1.5f);
  const std::vector<float> out0 = random_floats(x.size(), 112, -2.0f, 2.0f);
  std::vector<float> normed(x.size()), expect(x.size());
  ref::rms_norm(x.data(), w.data(), normed.data(), n_rows, n, eps);
  for (size_t i = 0; i < x.size(); ++i) expect[i] = out0[i] + normed[i];
  auto d_x = upload(x);
  auto d_w = upload(w);
  auto d_out = upload(out0);
  ops::rms_norm_add(ctx(), d_x, d_w, d_out, n_rows, n, eps);
  // The norm's relative error, plus the rounding of the sum (1/2 ulp of |out|).
  EXPECT_TRUE(all_close("rms_norm_add", download_all(d_out), expect, [&](size_t i) {
    return kNormRelTol * std::fabs(normed[i]) + kUlp * std::fabs(expect[i]);
  }));
  EXPECT_THROW(ops::rms_norm_add(ctx(), d_out, d_w, d_out, n_rows, n, eps), cl::ClError) << "aliased";
}

// QK-norm: each head of the q part (and, separately, the k part) of fused q|k|v rows is
// normalised over head_dim in place; the other columns must be left bit-identical.
TEST_F(LayerKernel, RmsNormHeadsMatchesReference) {
  const int n_tokens = 5, n_head = 3, n_kv = 1, head_dim = 48, ld = (n_head + 2 * n_kv) * head_dim + 4;
  const float eps = 1e-6f;
  const std::vector<float> qkv = random_floats(size_t(n_tokens) * ld, 120, -3.0f, 3.0f);
  const std::vector<float> wq = random_floats(head_dim, 121, 0.5f, 1.5f), wk = random_floats(head_dim, 122, 0.5f, 1.5f);
  std::vector<float> expect = qkv;
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_head + n_kv; ++h) {
      float* head = expect.data() + size_t(t) * ld + size_t(h) * head_dim;
      std::vector<float> in(head, head + head_dim);
      ref::rms_norm(in.data(), (h < n_head ? wq : wk).data(), head, 1, head_dim, eps);
    }
  auto d_qkv = upload(qkv);
  auto d_wq = upload(wq);
  auto d_wk = upload(wk);
  ops::rms_norm_heads(ctx(), d_qkv, ld, 0, n_head, head_dim, n_tokens, d_wq, eps);
  ops::rms_norm_heads(ctx(), d_qkv, ld, n_head * head_dim, n_kv, head_dim, n_tokens, d_wk, eps);
  EXPECT_TRUE(all_close("rms_norm_heads", download_all(d_qkv), expect, [&](size_t i) {
    return int(i % ld) < (n_head + n_kv) * head_dim ? kNormRelTol * std::fabs(expect[i]) : kExactTol;
  }));
  EXPECT_THROW(ops::rms_norm_heads(ctx(), d_qkv, ld, ld - head_dim + 1, 1, head_dim, n_tokens, d_wq, eps),
               cl::ClError) << "head past the row";
}

// GPUs reduce each row with a work-group of 64 (norm_local); the CPU tuning uses 1.
TEST(RmsNormWorkGroups, Local64MatchesReference) {
  std::unique_ptr<cl::Context> c;
  ASSERT_NO_THROW(c = testing_support::context_with_work_groups(64)) << "the kernel tests need an OpenCL device";
  ASSERT_EQ(c->tuning().norm_local, 64);
  check_rms_norm(*c, "rms_norm local=64");
}

}  // namespace
}  // namespace infinipot
