// matvec.cl (the decode products of GGUF-encoded weights, and their fusions: the norm inside,
// the GLU, RoPE + the KV store) against ref::matvec in tests/support/cpu_ref.h (the fusions
// against a double reference here), for every weight type the device supports. The products in
// the CPU's own 8-bit dot: test_native_dot.cpp.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"
#include "runtime/ops/matvec.h"
#include "runtime/ops/rope.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/runtime/weight_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::dot_bounds;
using testing_support::kDotTol;
using testing_support::random_floats;
using testing_support::test_cols;
using testing_support::type_name;
using testing_support::weight_kernel_types;
using testing_support::weight_type_param_name;
using testing_support::WeightKernel;

// The decode fusions (matvec_norm, matvec_glu) against a double reference of norm, products
// and activation. The norm's 1/rms scales each finished sum: its fp32 sum of K squares (~sqrt(K)
// ulp), the division and rsqrt (<= 2 ulp), plus 1/2 ulp per term for x * w, are relative
// errors of each product, bounded by kFusedNormRelTol = 1e-5 (84 ulp, > 3x the estimate for
// K = 768) of sum_k |W[o][k] xn[k]|, on top of kDotTol. One wrong weight or norm weight moves
// a result by ~sum/K, still > 30x the bound.
constexpr double kFusedNormRelTol = 1e-5;
// GLU out = act(g) u with g, u off by tol_g, tol_u: |act'| <= 1.13 (SiLU 1.1, GELU-tanh 1.13),
// so the error is <= 1.13 tol_g |u| + |act(g)| tol_u (second order dropped), plus the
// activation's own error (test_elementwise.cpp: 2e-6 relative, and 2 ulp of |g u| for
// GELU-tanh's cancellation at g << 0).
constexpr double kActSlope = 1.13;
constexpr double kActRelTol = 2e-6;
constexpr double kActAbsUlps = 2.0 / (1 << 23);

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
// the float angle table (test_rope.cpp: 4 ulp of the pair's length); a half KV store
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

// The same product with Qwen2's q|k|v biases in its epilogue: each sum gets its row's bias
// before RoPE rotates it (the model adds the bias to the product, then rotates), so the
// reference is the double products plus the bias, then ref::rope_store_kv. Tolerances as
// above, with the bias's own rounding (one float addition) in each row's share.
TEST_P(WeightKernel, MatvecQkvRopeAddsTheBiasBeforeRotating) {
  const TensorType t = GetParam();
  const int n_head = 3, n_kv = 1, head_dim = 8, n_rot = 8, rows = (n_head + 2 * n_kv) * head_dim, cols = test_cols(t);
  const int cap = 9, slot0 = 2;
  const float eps = 1e-5f, theta = 10000.f;
  auto W = make_weight(t, rows, cols, 150);
  const std::vector<float> nw = random_floats(cols, 151, -1.5f, 1.5f);
  const std::vector<float> bias = random_floats(rows, 152, -3.0f, 3.0f);
  auto d_nw = upload(nw);
  auto d_bias = upload(bias);
  for (int n_rows : {1, 3}) {
    const std::string what = std::string("matvec_qkv_rope + bias ") + type_name(t) + " rows=" + std::to_string(n_rows);
    const std::vector<float> x = random_floats(size_t(n_rows) * cols, 153 + n_rows, -2.0f, 2.0f);
    std::vector<int> pos(n_rows);
    for (int r = 0; r < n_rows; ++r) pos[r] = 500 + 11 * r;
    const size_t cache_n = size_t(n_kv) * cap * head_dim;
    const std::vector<float> k0 = random_floats(cache_n, 160), v0 = random_floats(cache_n, 161);
    auto d_k = upload(k0), d_v = upload(v0), d_x = upload(x);
    auto d_qkv = upload(random_floats(size_t(n_rows) * rows, 162));
    auto d_cs = upload(ops::rope_angles(pos, n_rot, theta));
    ops::RopeKv rkv{n_head, n_kv, head_dim, n_rot, &d_cs, &d_k, &d_v, cap, slot0, false};
    rkv.bias = &d_bias;
    ops::matvec_qkv_rope(ctx(), W.dev, d_x, {&d_nw, eps}, n_rows, d_qkv, rkv);

    const Dots d = normed_dots(W.dequant, cols, 0, rows, x, n_rows, nw, eps);
    std::vector<float> qkv(d.dot.size()), k = k0, v = v0;
    std::vector<double> biased(d.dot.size());
    for (size_t i = 0; i < qkv.size(); ++i) {
      biased[i] = d.dot[i] + bias[i % rows];
      qkv[i] = float(biased[i]);
    }
    ref::rope_store_kv(qkv.data(), rows, n_head, n_kv, head_dim, n_rot, pos.data(), theta, k.data(), v.data(), cap,
                       slot0, n_rows);
    std::vector<double> tol(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) {
      const size_t mate = i ^ 1;
      const bool rotated = i % rows < size_t((n_head + n_kv) * head_dim);
      const double own = dot_tol(d.mag[i], cols, true) + std::ldexp(std::fabs(biased[i]), -23);
      tol[i] = own;
      if (rotated)
        tol[i] += dot_tol(d.mag[mate], cols, true) + std::ldexp(std::fabs(biased[mate]), -23) +
                  4 * std::ldexp(std::hypot(biased[i], biased[mate]), -23);
    }
    EXPECT_TRUE(all_close(what + " q|k|v", download_all(d_qkv), qkv, [&](size_t i) { return tol[i]; }));
    // k and v of row r went to slot slot0 + r, rotated (k) and biased (both).
    const std::vector<float> got_k = download(d_k, cache_n), got_v = download(d_v, cache_n);
    for (int r = 0; r < n_rows; ++r)
      for (int e = 0; e < head_dim; ++e) {
        const size_t slot = size_t(slot0 + r) * head_dim + e;
        const size_t src_k = size_t(r) * rows + size_t(n_head) * head_dim + e, src_v = src_k + head_dim;
        EXPECT_NEAR(got_k[slot], qkv[src_k], tol[src_k]) << what << " k slot " << slot0 + r << " e " << e;
        EXPECT_NEAR(got_v[slot], qkv[src_v], tol[src_v]) << what << " v slot " << slot0 + r << " e " << e;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDeviceTypes, WeightKernel, ::testing::ValuesIn(weight_kernel_types()),
                         weight_type_param_name);

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
