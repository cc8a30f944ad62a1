// The decode launches that leave a product as split sums (tuning decode_split_sums): the
// normed products that add split sums into the residual row they read (matvec.cl PARTS), the
// feed-forward block in one launch (matvec.cl DOWN_PARTS), decode attention with each head's
// share of Wo (attention.cl WO_PARTS) and add_parts (elementwise.cl), against double
// references, for every weight type the forward pass runs, in widths that are not powers of two.
#include <cmath>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::random_floats;

// The bounds of test_kernels_weights.cpp: a K-term fp32 dot product within kDotTol * sqrt(K) of
// sum |a b|, plus kNormRelTol of it when the norm's 1/rms scales the sum; GLU outputs through
// the activation's slope and its own relative error.
constexpr double kDotTol = 2.4e-7;
constexpr double kNormRelTol = 1e-5;
constexpr double kActSlope = 1.13;
constexpr double kActRelTol = 2e-6;
constexpr double kActAbsUlps = 2.0 / (1 << 23);

const char* type_name(TensorType t) { return quant::traits(t).name; }

// Widths: multiples of the block (256 for Q6_K), not powers of two where the format allows.
int cols_of(TensorType t) { return t == TensorType::Q6_K ? 768 : t == TensorType::F32 || t == TensorType::F16 ? 200 : 96; }

// Work-groups of 16 for the decode products (2 x 16 = 32 features per DOWN_PARTS group) and
// the CPU decode attention, which attention_wo builds on; the float path.
class SplitSums : public ::testing::TestWithParam<TensorType> {
 protected:
  void SetUp() override {
    try {
      if (!shared()) shared() = testing_support::context_with_tuning("\"matvec_local\": 16, \"attention_vec16\": true");
    } catch (const std::exception& e) {
      FAIL() << "cannot create an OpenCL context; the kernel tests need a device: " << e.what();
    }
  }
  // One per process: each context compiles its own kernel variants.
  static std::unique_ptr<cl::Context>& shared() {
    static std::unique_ptr<cl::Context> c;
    return c;
  }
  cl::Context& ctx() { return *shared(); }
  template <typename T>
  cl::Buffer upload(const std::vector<T>& v) { return testing_support::upload(ctx(), v); }
  std::vector<float> download_all(const cl::Buffer& b) {
    return testing_support::download(ctx(), b, b.bytes() / sizeof(float));
  }
};

// x + parts[0] + parts[1] + ... in float, in that order (what the kernels add), and the bound
// of a differently associated float sum of those terms.
struct Summed {
  std::vector<float> row;
  std::vector<double> tol;
};
Summed sum_parts(const std::vector<float>& x, const std::vector<float>& parts, int n_parts) {
  Summed s{x, std::vector<double>(x.size())};
  for (size_t i = 0; i < x.size(); ++i) {
    double mag = std::fabs(x[i]);
    for (int p = 0; p < n_parts; ++p) {
      s.row[i] += parts[p * x.size() + i];
      mag += std::fabs(parts[p * x.size() + i]);
    }
    s.tol[i] = kDotTol * (n_parts + 1) * mag;
  }
  return s;
}

// rmsnorm(x) * nw in double, and W[row0 + o] . that with sum |terms|, for one row.
struct Dots {
  std::vector<double> dot, mag;
};
Dots normed_dots(const std::vector<float>& W, int cols, int row0, int n_out, const std::vector<float>& x,
                 const std::vector<float>& nw, float eps) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double inv = 1.0 / std::sqrt(ss / cols + double(eps));
  Dots d{std::vector<double>(n_out), std::vector<double>(n_out)};
  for (int o = 0; o < n_out; ++o)
    for (int k = 0; k < cols; ++k) {
      const double t = double(W[size_t(row0 + o) * cols + k]) * x[k] * inv * nw[k];
      d.dot[o] += t;
      d.mag[o] += std::fabs(t);
    }
  return d;
}
double normed_tol(double mag, int k) { return (kDotTol * std::sqrt(double(k)) + kNormRelTol) * mag; }

// matvec_norm over x + 3 parts: the products of the normed sum, and the sum itself in x_out.
TEST_P(SplitSums, NormedProductAddsThePartsIntoItsRow) {
  const TensorType t = GetParam();
  const int rows = 45, cols = cols_of(t), n_parts = 3;
  const float eps = 1e-5f;
  auto W = testing_support::make_weight(ctx(), t, rows, cols, 200);
  const auto x = random_floats(cols, 201), parts = random_floats(size_t(n_parts) * cols, 202, -0.5f, 0.5f);
  const auto nw = random_floats(cols, 203, -1.5f, 1.5f);
  auto d_x = upload(x), d_parts = upload(parts), d_nw = upload(nw);
  auto d_out = upload(std::vector<float>(cols, -7.0f));
  auto d_y = upload(std::vector<float>(rows, 0.0f));
  for (int n : {n_parts, 0}) {  // 0: the first block of a step, nothing pending; x copied to x_out
    const std::string what = std::string("matvec_norm + parts ") + type_name(t) + " n=" + std::to_string(n);
    ops::matvec_norm(ctx(), W.dev, d_x, {&d_nw, eps, {&d_parts, n, &d_out}}, 1, d_y, rows);
    const Summed s = sum_parts(x, parts, n);
    EXPECT_TRUE(all_close(what + " x_out", download_all(d_out), s.row, [&](size_t i) { return s.tol[i]; }));
    const Dots ref = normed_dots(W.dequant, cols, 0, rows, s.row, nw, eps);
    std::vector<float> expect(rows);
    for (int o = 0; o < rows; ++o) expect[o] = float(ref.dot[o]);
    EXPECT_TRUE(all_close(what, download_all(d_y), expect, [&](size_t o) { return normed_tol(ref.mag[o], cols); }));
  }
}

// matvec_glu_down: gate|up of the normed x + parts, SiLU / GELU-tanh, and each work-group's
// share of down . act. Every part against its own slice of features (a part summed into the
// wrong slice, or a slice left out, fails), and the residual in x_out.
TEST_P(SplitSums, FeedForwardInOneLaunchLeavesDownAsSlices) {
  const TensorType t = GetParam();
  const int cols = cols_of(t), n_ff = 256, n_embd = 45, n_in = 2;
  const float eps = 1e-6f;
  auto gate_up = testing_support::make_weight(ctx(), t, 2 * n_ff, cols, 210);
  auto down = testing_support::make_weight(ctx(), t, n_embd, n_ff, 211);
  const int n_parts = ops::glu_down_parts(ctx(), gate_up.dev, down.dev, n_ff);
  ASSERT_EQ(n_parts, n_ff / 32) << "32 features per work-group of 16";
  const auto x = random_floats(cols, 212, -0.2f, 0.2f), in_parts = random_floats(size_t(n_in) * cols, 213, -0.1f, 0.1f);
  const auto nw = random_floats(cols, 214, -0.15f, 0.15f);
  auto d_x = upload(x), d_in = upload(in_parts), d_nw = upload(nw);
  auto d_resid = upload(std::vector<float>(cols, 0.0f));
  auto d_parts = upload(std::vector<float>(size_t(n_parts) * n_embd, 0.0f));
  for (ops::Glu act : {ops::Glu::Silu, ops::Glu::GeluTanh}) {
    const std::string what = std::string("matvec_glu_down ") + type_name(t) + (act == ops::Glu::Silu ? " silu" : " gelu");
    ASSERT_EQ(ops::matvec_glu_down(ctx(), gate_up.dev, gate_up.dev, n_ff, n_ff, act, d_x,
                                   {&d_nw, eps, {&d_in, n_in, &d_resid}}, 1, down.dev, d_parts),
              n_parts);
    const Summed s = sum_parts(x, in_parts, n_in);
    EXPECT_TRUE(all_close(what + " x_out", download_all(d_resid), s.row, [&](size_t i) { return s.tol[i]; }));
    const Dots g = normed_dots(gate_up.dequant, cols, 0, n_ff, s.row, nw, eps);
    const Dots u = normed_dots(gate_up.dequant, cols, n_ff, n_ff, s.row, nw, eps);
    std::vector<double> a(n_ff), a_tol(n_ff);
    for (int f = 0; f < n_ff; ++f) {
      const double gv = g.dot[f], uv = u.dot[f];
      const double av = act == ops::Glu::Silu
                            ? gv / (1.0 + std::exp(-gv))
                            : 0.5 * gv * (1.0 + std::tanh(0.7978845608028654 * (gv + 0.044715 * gv * gv * gv)));
      a[f] = av * uv;
      a_tol[f] = kActSlope * normed_tol(g.mag[f], cols) * std::fabs(uv) + std::fabs(av) * normed_tol(u.mag[f], cols) +
                 kActRelTol * std::fabs(av * uv) + kActAbsUlps * std::fabs(gv * uv);
    }
    std::vector<float> expect(size_t(n_parts) * n_embd);
    std::vector<double> tol(expect.size());
    for (int p = 0; p < n_parts; ++p)
      for (int o = 0; o < n_embd; ++o) {
        double sum = 0, mag = 0, from_act = 0;
        for (int f = 32 * p; f < 32 * (p + 1); ++f) {
          const double w = down.dequant[size_t(o) * n_ff + f];
          sum += w * a[f];
          mag += std::fabs(w * a[f]);
          from_act += std::fabs(w) * a_tol[f];
        }
        expect[size_t(p) * n_embd + o] = float(sum);
        tol[size_t(p) * n_embd + o] = from_act + kDotTol * std::sqrt(32.0) * mag;
      }
    EXPECT_TRUE(all_close(what, download_all(d_parts), expect, [&](size_t i) { return tol[i]; }));
  }
}

// attention_wo: the decode attention of attention_decode_lanes (out and lse bit for bit), and
// each head's share of Wo . out against the double product of its columns.
TEST_P(SplitSums, DecodeAttentionLeavesWoAsHeadShares) {
  const TensorType t = GetParam();
  const int n_heads = 4, n_kv = 2, head_dim = t == TensorType::Q6_K ? 192 : 64, cap = 40, n_past = 17, rows = 45;
  ops::AttentionShape shape{n_heads, n_kv, head_dim, cap, false};
  auto Wo = testing_support::make_weight(ctx(), t, rows, n_heads * head_dim, 220);
  ASSERT_TRUE(ops::attention_wo_supported(ctx(), shape, Wo.dev));
  auto q = upload(random_floats(size_t(n_heads) * head_dim, 221));
  auto k = upload(random_floats(size_t(n_kv) * cap * head_dim, 222));
  auto v = upload(random_floats(size_t(n_kv) * cap * head_dim, 223));
  auto out = upload(std::vector<float>(size_t(n_heads) * head_dim, 0.0f));
  auto lse = upload(std::vector<float>(n_heads, 0.0f));
  auto ref_out = upload(std::vector<float>(size_t(n_heads) * head_dim, 0.0f));
  auto ref_lse = upload(std::vector<float>(n_heads, 0.0f));
  auto parts = upload(std::vector<float>(size_t(n_heads) * rows, 0.0f));
  ops::attention(ctx(), shape, q, n_heads * head_dim, k, v, n_past, 1, ref_out, n_heads * head_dim, ref_lse);
  ops::attention_wo(ctx(), shape, q, k, v, n_past, out, lse, Wo.dev, parts);
  const std::string what = std::string("attention_wo ") + type_name(t);
  const auto o = download_all(out);
  EXPECT_TRUE(all_close(what + " out", o, download_all(ref_out), 0.0));
  EXPECT_TRUE(all_close(what + " lse", download_all(lse), download_all(ref_lse), 0.0));
  std::vector<float> expect(size_t(n_heads) * rows);
  std::vector<double> tol(expect.size());
  for (int h = 0; h < n_heads; ++h)
    for (int r = 0; r < rows; ++r) {
      double sum = 0, mag = 0;
      for (int d = 0; d < head_dim; ++d) {
        const double term = double(Wo.dequant[size_t(r) * n_heads * head_dim + h * head_dim + d]) * o[h * head_dim + d];
        sum += term;
        mag += std::fabs(term);
      }
      expect[size_t(h) * rows + r] = float(sum);
      tol[size_t(h) * rows + r] = kDotTol * std::sqrt(double(head_dim)) * mag;
    }
  EXPECT_TRUE(all_close(what, download_all(parts), expect, [&](size_t i) { return tol[i]; }));
}

INSTANTIATE_TEST_SUITE_P(ForwardPassTypes, SplitSums,
                         ::testing::Values(TensorType::F32, TensorType::F16, TensorType::Q4_0, TensorType::Q4_1,
                                           TensorType::Q8_0, TensorType::Q6_K),
                         [](const ::testing::TestParamInfo<TensorType>& info) { return type_name(info.param); });

class SplitSumsLaunchers : public SplitSums {};

// add_parts: the pending split sums into the residual (two rows, three parts), in order.
TEST_F(SplitSumsLaunchers, AddPartsSumsInOrder) {
  const int k = 45, n_rows = 2, n_parts = 3;
  const auto x = random_floats(size_t(n_rows) * k, 230), parts = random_floats(size_t(n_parts) * n_rows * k, 231);
  auto d_x = upload(x), d_parts = upload(parts);
  ops::add_parts(ctx(), d_x, d_parts, n_parts, n_rows, k);
  std::vector<float> expect = x;
  for (int p = 0; p < n_parts; ++p)
    for (size_t i = 0; i < x.size(); ++i) expect[i] += parts[p * x.size() + i];
  EXPECT_TRUE(all_close("add_parts", download_all(d_x), expect, 0.0)) << "the same float additions in the same order";
}

// What the kernels cannot do is refused, naming it, before anything runs.
TEST_F(SplitSumsLaunchers, RefuseWhatDoesNotSplit) {
  auto gate_up = testing_support::make_weight(ctx(), TensorType::Q4_0, 128, 64, 240);
  auto down_q8 = testing_support::make_weight(ctx(), TensorType::Q8_0, 8, 64, 241);
  auto gate_up_f32 = testing_support::make_weight(ctx(), TensorType::F32, 144, 64, 246);
  auto down_odd = testing_support::make_weight(ctx(), TensorType::F32, 8, 72, 242);
  auto down_f32 = testing_support::make_weight(ctx(), TensorType::F32, 8, 64, 247);
  EXPECT_EQ(ops::glu_down_parts(ctx(), gate_up.dev, down_q8.dev, 64), 0) << "down in another encoding";
  EXPECT_EQ(ops::glu_down_parts(ctx(), gate_up_f32.dev, down_odd.dev, 72), 0) << "n_ff not whole 32-blocks";
  EXPECT_EQ(ops::glu_down_parts(ctx(), gate_up_f32.dev, down_f32.dev, 72), 0) << "down not n_ff wide";
  EXPECT_EQ(ops::glu_down_parts(ctx(), gate_up_f32.dev, down_f32.dev, 64), 2) << "32 features a work-group";
  auto x = upload(random_floats(64, 243)), nw = upload(random_floats(64, 244));
  auto parts = upload(std::vector<float>(64 * 8, 0.0f)), y = upload(std::vector<float>(128, 0.0f));
  EXPECT_THROW(ops::matvec_glu_down(ctx(), gate_up.dev, gate_up.dev, 64, 64, ops::Glu::Silu, x, {&nw, 1e-5f}, 1,
                                    down_q8.dev, parts),
               cl::ClError);
  EXPECT_THROW(ops::matvec_norm(ctx(), gate_up.dev, x, {&nw, 1e-5f, {&parts, 1, &x}}, 1, y, 128), cl::ClError)
      << "the summed row written over the row it is read from";
  EXPECT_THROW(ops::matvec_norm(ctx(), gate_up.dev, x, {&nw, 1e-5f, {&parts, 9, &y}}, 1, y, 128), cl::ClError)
      << "more parts than the buffer holds";
  ops::AttentionShape odd{4, 2, 48, 16, false};
  auto wo = testing_support::make_weight(ctx(), TensorType::F32, 8, 192, 245);
  EXPECT_FALSE(ops::attention_wo_supported(ctx(), odd, wo.dev)) << "head_dim not whole 32-blocks";
  auto buf = upload(std::vector<float>(4 * 48 * 16 * 2, 0.0f));
  EXPECT_THROW(ops::attention_wo(ctx(), odd, buf, buf, buf, 3, buf, buf, wo.dev, buf), cl::ClError);
}

}  // namespace
}  // namespace infinipot
