// The per-layer kernels (norm.cl, rope.cl, elementwise.cl, kv_cache.cl, cross_entropy.cl)
// against their CPU references in tests/support/cpu_ref.h.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/sampling.h"
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

// RoPE from a position delta (rope_shift): the kernel forms angle = d * pow(theta, -2i/n_rot)
// in fp32. OpenCL allows pow 16 ulp and the product adds 1/2 ulp, so the angle is off by up to
// ~17 ulp of itself and a pair moves by that many radians times its length; sin/cos add 4 ulp.
// The reference uses double. So for a pair of length L rotated by d positions:
// |err| <= (kRopeAngleUlps * ulp * |d| + kRopeBaseUlps * ulp) * L.
// (At d = 3000 that is ~6e-3 L: fp32 angles are that coarse, in llama.cpp too.)
constexpr double kRopeAngleUlps = 17;
constexpr double kRopeBaseUlps = 16;
double rope_tol(double pos) { return (kRopeAngleUlps * kUlp * std::fabs(pos) + kRopeBaseUlps * kUlp); }

// RoPE from the host's angle table (rope_store_kv): rope_angles computes each angle and its
// cos/sin in double and rounds them to float (1/2 ulp each), so the error does not grow with the
// position. The kernel forms y = x0 c - x1 s (and x0 s + x1 c) in fp32: each product is off by
// 1/2 ulp (table) + 1/2 ulp (rounding), the sum by 1/2 ulp of |y| (less with a mad); the
// reference rotates in double and rounds once (1/2 ulp of |y|). For a pair of length L, with
// |x0 c| + |x1 s| <= L and |y| <= L, each component is off by at most 2 ulp * L; we accept
// kRopeTableUlps = 4 ulp * L (2x headroom).
constexpr double kRopeTableUlps = 4;

// SwiGLU: exp (<= 3 ulp), 1 + e, a division (<= 2.5 ulp) and a product: relative 2e-6 = 16 ulp.
constexpr double kSwigluRelTol = 2e-6;

// GEGLU (tanh): tanh (<= 5 ulp in OpenCL) and a few products, relative 2e-6 as SwiGLU; but
// 1 + tanh(z) cancels for z << 0 (the result is then tiny), so each output may also be off by
// ~2 ulp of 0.5 |g u| absolutely: kGegluAbsUlps * ulp * |g u|.
constexpr double kGegluAbsUlps = 2;

// Copies (kv_gather; the values and unrotated columns rope_store_kv moves) are bit-exact.
constexpr double kExactTol = 0.0;

// Cross-entropy: fp32 sums of up to `tile` exponentials in [0, 1] (relative error ~sqrt(tile) ulp,
// 2.3e-6 for 384) become the same absolute error after log, plus the rounding of lse itself
// (|lse| * 6e-8). |err| <= kCeTol * (1 + |value|) leaves ~4x headroom.
constexpr double kCeTol = 1e-5;

class LayerKernel : public testing_support::KernelTest {};

// ---- norm.cl ------------------------------------------------------------------------------

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

// ---- rope.cl ------------------------------------------------------------------------------

// Tolerance for the pair containing element `col` of a row, whose rotation was by `pos`
// positions; columns outside the rotated pairs must be bit-identical.
double pair_tol(const std::vector<float>& want, size_t row_start, int col, int head_col0, int n_rot, double pos_err) {
  const int d = col - head_col0;
  if (d < 0 || d >= n_rot) return 0.0;
  const size_t a = row_start + head_col0 + (d & ~1);
  return pos_err * std::hypot(double(want[a]), double(want[a + 1]));
}

// Factors shaped like Llama 3.2's rope_freqs: 1 for the fast pairs, 32 for the slow ones, a
// ramp between (the values only need to be positive and different).
std::vector<float> llama3_like_factors(int n_rot) {
  std::vector<float> f(size_t(n_rot / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    const double x = double(i) / double(f.size());
    f[i] = x < 0.4 ? 1.0f : x > 0.75 ? 32.0f : float(1.0 + 31.0 * (x - 0.4) / 0.35);
  }
  return f;
}

// A chunk of fused q|k|v rows at arbitrary positions (the last far beyond any context, where
// fp32 angles would be coarse), GQA and MHA, and a head only half of which is rotated. Slots
// outside slot0.. and the value/padding columns of the rows must be left as they were.
TEST_F(LayerKernel, RopeStoreKvMatchesReference) {
  struct Case {
    int n_head, n_kv, head_dim, n_rot;
  };
  const float theta = 10000.0f;
  const std::vector<int> pos = {0, 1, 17, 500, 3000, 70000};  // one token per position
  const int n_tokens = int(pos.size()), cap = 20, slot0 = 7;
  for (Case cs : {Case{3, 3, 64, 64}, Case{6, 2, 16, 16}, Case{4, 2, 64, 32}})
    for (const bool with_factors : {false, true}) {
    // Llama 3's RoPE frequency factors divide each pair's angle (rope_freqs.weight).
    const std::vector<float> factors = with_factors ? llama3_like_factors(cs.n_rot) : std::vector<float>{};
    const std::string name = "rope_store_kv heads=" + std::to_string(cs.n_head) + "/" + std::to_string(cs.n_kv) +
                             " head_dim=" + std::to_string(cs.head_dim) + " n_rot=" + std::to_string(cs.n_rot) +
                             (with_factors ? " with factors" : "");
    const int hd = cs.head_dim, rotated = (cs.n_head + cs.n_kv) * hd, ld = rotated + cs.n_kv * hd + 3;  // padded
    std::vector<float> qkv = random_floats(size_t(n_tokens) * ld, 200 + hd + cs.n_rot);
    std::vector<float> k = random_floats(size_t(cs.n_kv) * cap * hd, 210 + hd), v = random_floats(k.size(), 211 + hd);
    auto d_qkv = upload(qkv);
    auto d_k = upload(k);
    auto d_v = upload(v);
    auto d_cs = upload(ops::rope_angles(pos, cs.n_rot, theta, factors));
    ops::rope_store_kv(ctx(), d_qkv, ld, cs.n_head, cs.n_kv, hd, cs.n_rot, d_cs, d_k, d_v, cap, slot0, n_tokens);
    ref::rope_store_kv(qkv.data(), ld, cs.n_head, cs.n_kv, hd, cs.n_rot, pos.data(), theta, k.data(), v.data(), cap,
                       slot0, n_tokens, with_factors ? factors.data() : nullptr);
    const double pair_err = kRopeTableUlps * kUlp;
    EXPECT_TRUE(all_close(name + " rows", download_all(d_qkv), qkv, [&](size_t i) {
      const int col = int(i % ld);
      if (col >= rotated) return 0.0;  // values and padding
      return pair_tol(qkv, i / ld * ld, col, col / hd * hd, cs.n_rot, pair_err);
    }));
    EXPECT_TRUE(all_close(name + " keys", download_all(d_k), k, [&](size_t i) {
      const size_t e = i / hd;  // (head, slot)
      const int slot = int(e % cap);
      if (slot < slot0 || slot >= slot0 + n_tokens) return 0.0;
      return pair_tol(k, e * hd, int(i % hd), 0, cs.n_rot, pair_err);
    }));
    EXPECT_TRUE(all_close(name + " values", download_all(d_v), v, kExactTol));

    EXPECT_THROW(ops::rope_store_kv(ctx(), d_qkv, ld, cs.n_head, cs.n_kv, hd, cs.n_rot, d_cs, d_k, d_v, cap,
                                    cap - 2, n_tokens),
                 cl::ClError);
    EXPECT_THROW(ops::rope_store_kv(ctx(), d_qkv, ld, cs.n_head, cs.n_kv, hd, hd + 2, d_cs, d_k, d_v, cap, slot0,
                                    n_tokens),
                 cl::ClError);
    const std::vector<int> short_pos(pos.begin(), pos.end() - 1);
    auto d_cs_short = upload(ops::rope_angles(short_pos, cs.n_rot, theta));  // one row short
    // A factor list that is not n_rot/2 long is refused before any table is built.
    EXPECT_THROW(ops::rope_angles(pos, cs.n_rot, theta, std::vector<float>(size_t(cs.n_rot / 2) + 1, 1.0f)), cl::ClError);
    EXPECT_THROW(ops::rope_store_kv(ctx(), d_qkv, ld, cs.n_head, cs.n_kv, hd, cs.n_rot, d_cs_short, d_k, d_v, cap,
                                    slot0, n_tokens),
                 cl::ClError);
  }
}

// Cache layout [n_heads][cap][head_dim]; each (head, slot) is one row of head_dim.
struct ShiftCase {
  int n_heads = 2, cap = 12, n_slots = 10, head_dim = 64, n_rot = 64;
  float theta = 10000.0f;
  std::vector<int> pos, delta;  // [n_heads][cap]
  ShiftCase() {
    pos.resize(size_t(n_heads) * cap);
    delta.resize(pos.size());
    for (size_t e = 0; e < pos.size(); ++e) {
      pos[e] = int(e * 173 % 2000);
      delta[e] = e % 5 == 0 ? 0 : -int(e * 97 % 1500) + int(e % 3) * 400;  // zero, negative and positive shifts
    }
  }
  size_t floats() const { return size_t(n_heads) * cap * head_dim; }
  // Tolerance of element i, given the position errors each rotation contributes.
  double tol(const std::vector<float>& want, size_t i, double pos_err) const {
    const size_t row = i / head_dim;
    return pair_tol(want, row * head_dim, int(i % head_dim), 0, n_rot, pos_err);
  }
};

// Runs both shift steps on the device over a case's deltas (factors empty: all 1) and checks
// the keys against the reference rotation: slots >= n_slots and entries with delta 0 must be
// untouched, the rest within rope_tol of their delta.
class RopeShift : public LayerKernel {
 protected:
  struct Shifted {
    std::vector<float> keys, table;  // the device's keys and its (cos, sin) table
    std::vector<float> expect;       // the reference's keys
  };
  Shifted shift(const ShiftCase& s, const std::vector<float>& k, const std::vector<float>& factors = {}) {
    const std::vector<float> f = factors.empty() ? std::vector<float>(size_t(s.n_rot / 2), 1.0f) : factors;
    auto d_k = upload(k);
    auto d_delta = upload(s.delta);
    auto d_factors = upload(f);
    const size_t table_bytes = ops::rope_shift_table_bytes(s.n_heads, s.cap, s.n_rot);
    auto d_table = ctx().memory().alloc(cl::MemCategory::Scratch, table_bytes, "table");
    ops::rope_shift_angles(ctx(), d_delta, s.n_heads, s.cap, s.n_rot, s.n_slots, s.theta, d_factors, d_table);
    ops::rope_shift(ctx(), d_k, s.n_heads, s.cap, s.head_dim, s.n_rot, d_delta, s.n_slots, d_table);
    Shifted out{download_all(d_k), download_all(d_table), k};
    ref::rope_shift(out.expect.data(), s.n_heads, s.cap, s.head_dim, s.n_rot, s.delta.data(), s.n_slots, s.theta,
                    factors.empty() ? nullptr : factors.data());
    return out;
  }
  static std::function<double(size_t)> tolerance(const ShiftCase& s, const std::vector<float>& expect) {
    return [&s, &expect](size_t i) {
      const size_t e = i / s.head_dim;
      if (int(e % s.cap) >= s.n_slots || s.delta[e] == 0) return 0.0;
      return s.tol(expect, i, rope_tol(s.delta[e]));
    };
  }
};

TEST_F(RopeShift, MatchesReference) {
  ShiftCase s;
  const Shifted r = shift(s, random_floats(s.floats(), 300));
  EXPECT_TRUE(all_close("rope_shift", r.keys, r.expect, tolerance(s, r.expect)));
}

// rope_shift_angles works out a block of slots per work-item and computes cos/sin only where the
// delta changes: runs of one delta (survivors that moved together) that cross the blocks, a
// ragged last block, and a run that starts at a block's first slot must all land as the
// one-entry formula does.
TEST_F(RopeShift, RunsOfOneDeltaAcrossWorkItemBlocks) {
  ShiftCase s;
  s.cap = 53;
  s.n_slots = 50;  // 16 + 16 + 16 + 2
  s.pos.assign(size_t(s.n_heads) * s.cap, 0);
  s.delta.assign(s.pos.size(), 0);
  for (int h = 0; h < s.n_heads; ++h)
    for (int slot = 0; slot < s.cap; ++slot) {
      const int run = (slot + 3 * h) / 7;  // runs of 7 that start anywhere in a block
      s.delta[size_t(h) * s.cap + slot] = run % 4 == 0 ? 0 : -(run * 211) % 1700 + (run % 2) * 150;
    }
  s.delta[size_t(1) * s.cap + 16] = -5;  // a value of its own at a block's first slot
  const Shifted r = shift(s, random_floats(s.floats(), 304));
  EXPECT_TRUE(all_close("rope_shift in runs", r.keys, r.expect, tolerance(s, r.expect)));
  // Entries of one delta hold the very same (cos, sin), whichever work-item wrote them.
  const std::vector<float>& table = r.table;
  const size_t pair_floats = size_t(s.n_rot);  // n_rot/2 pairs of (cos, sin)
  for (int h = 0; h < s.n_heads; ++h)
    for (int a = 0; a < s.n_slots; ++a)
      for (int b = a + 1; b < s.n_slots; ++b)
        if (s.delta[size_t(h) * s.cap + a] == s.delta[size_t(h) * s.cap + b])
          ASSERT_TRUE(std::equal(table.begin() + (size_t(h) * s.cap + a) * pair_floats,
                                 table.begin() + (size_t(h) * s.cap + a + 1) * pair_floats,
                                 table.begin() + (size_t(h) * s.cap + b) * pair_floats))
              << "head " << h << " slots " << a << " and " << b;
}

// With Llama 3's frequency factors: each pair's shift angle divided by its factor, as the
// reference rotates; a factor table shorter than n_rot/2 is refused.
TEST_F(RopeShift, WithFrequencyFactorsMatchesReference) {
  ShiftCase s;
  const std::vector<float> factors = llama3_like_factors(s.n_rot);
  const std::vector<float> k = random_floats(s.floats(), 303);
  const Shifted r = shift(s, k, factors);
  EXPECT_TRUE(all_close("rope_shift with factors", r.keys, r.expect, tolerance(s, r.expect)));
  // The factors matter: without them the same shift lands elsewhere.
  std::vector<float> plain = k;
  ref::rope_shift(plain.data(), s.n_heads, s.cap, s.head_dim, s.n_rot, s.delta.data(), s.n_slots, s.theta);
  EXPECT_FALSE(all_close("rope_shift without factors", r.keys, plain, tolerance(s, r.expect)));
  auto d_delta = upload(s.delta);
  auto d_table = ctx().memory().alloc(cl::MemCategory::Scratch, ops::rope_shift_table_bytes(s.n_heads, s.cap, s.n_rot), "table");
  auto short_factors = upload(std::vector<float>(size_t(s.n_rot / 2) - 1, 1.0f));
  EXPECT_THROW(ops::rope_shift_angles(ctx(), d_delta, s.n_heads, s.cap, s.n_rot, s.n_slots, s.theta, short_factors, d_table),
               cl::ClError);
}

// A (cos, sin) table smaller than [n_heads][cap][n_rot/2] pairs is refused before any launch,
// by both steps, naming the table.
TEST_F(LayerKernel, RopeShiftRefusesATableTooSmall) {
  ShiftCase s;
  auto d_k = upload(random_floats(s.floats(), 302));
  auto d_delta = upload(s.delta);
  auto small = ctx().memory().alloc(cl::MemCategory::Scratch, ops::rope_shift_table_bytes(s.n_heads, s.cap, s.n_rot) - 8,
                                    "table");
  auto refused = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const cl::ClError& e) {
      return std::string(e.what()).find("rope_shift table too small") != std::string::npos;
    }
    return false;
  };
  auto d_ones = upload(std::vector<float>(size_t(s.n_rot / 2), 1.0f));
  EXPECT_TRUE(refused([&] { ops::rope_shift_angles(ctx(), d_delta, s.n_heads, s.cap, s.n_rot, s.n_slots, s.theta, d_ones, small); }));
  EXPECT_TRUE(refused([&] { ops::rope_shift(ctx(), d_k, s.n_heads, s.cap, s.head_dim, s.n_rot, d_delta, s.n_slots, small); }));
}

// The pot re-positions surviving keys with rope_shift instead of re-running RoPE on pre-RoPE
// keys it no longer has: rope_shift(rope(k, p), d) must equal rope(k, p + d). Both rope(k, p)
// (the input) and rope(k, p + d) (the expectation) come from the CPU reference (ref::rope_shift
// of the unrotated keys by p and by p + d: RoPE at those positions, in double, rounded once).
// Tolerance: rope_tol(d) per pair, as in RopeShift.MatchesReference, since only the device's
// rotation by d carries fp32 angle error; the two roundings of the reference to float (1/2 ulp
// of the input and of the expectation, ~1.2 ulp * L together) fit inside its kRopeBaseUlps.
TEST_F(LayerKernel, RopeShiftOfRopeEqualsRopeAtShiftedPosition) {
  ShiftCase s;
  s.n_slots = s.cap;
  const std::vector<float> k = random_floats(s.floats(), 301);
  std::vector<int> shifted(s.pos.size());
  for (size_t e = 0; e < shifted.size(); ++e) shifted[e] = s.pos[e] + s.delta[e];

  std::vector<float> at_p = k;  // rope(k, p)
  ref::rope_shift(at_p.data(), s.n_heads, s.cap, s.head_dim, s.n_rot, s.pos.data(), s.n_slots, s.theta);
  std::vector<float> expect = k;  // rope(k, p + d)
  ref::rope_shift(expect.data(), s.n_heads, s.cap, s.head_dim, s.n_rot, shifted.data(), s.n_slots, s.theta);

  auto d_k = upload(at_p);
  auto d_delta = upload(s.delta);
  auto d_table = ctx().memory().alloc(cl::MemCategory::Scratch, ops::rope_shift_table_bytes(s.n_heads, s.cap, s.n_rot), "table");
  auto d_ones = upload(std::vector<float>(size_t(s.n_rot / 2), 1.0f));
  ops::rope_shift_angles(ctx(), d_delta, s.n_heads, s.cap, s.n_rot, s.n_slots, s.theta, d_ones, d_table);
  ops::rope_shift(ctx(), d_k, s.n_heads, s.cap, s.head_dim, s.n_rot, d_delta, s.n_slots, d_table);
  auto tol = [&](size_t i) { return s.tol(expect, i, rope_tol(s.delta[i / s.head_dim])); };
  EXPECT_TRUE(all_close("rope_shift(rope(k, p), d) vs rope(k, p + d)", download_all(d_k), expect, tol));
}

// ---- elementwise.cl -----------------------------------------------------------------------

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

// ---- kv_cache.cl --------------------------------------------------------------------------

TEST_F(LayerKernel, KvGatherMatchesReference) {
  const int n_kv = 3, hd = 16, cap = 24, n_keep = 7;
  const std::vector<float> src = random_floats(size_t(n_kv) * cap * hd, 510);
  std::vector<float> dst = random_floats(src.size(), 511);  // slots >= n_keep must survive
  // Each head keeps its own entries (the pot compacts heads independently), in slot order.
  const std::vector<int> keep = {0, 2, 3, 9, 10, 20, 23,   //
                                 1, 4, 5, 6, 7, 8, 22,     //
                                 0, 1, 2, 3, 4, 5, 6};
  auto d_src = upload(src);
  auto d_dst = upload(dst);
  auto d_keep = upload(keep);
  ops::kv_gather(ctx(), d_src, d_dst, n_kv, cap, hd, d_keep, n_keep);
  ref::kv_gather(src.data(), dst.data(), n_kv, cap, hd, keep.data(), n_keep);
  EXPECT_TRUE(all_close("kv_gather", download_all(d_dst), dst, kExactTol));
}

// ---- cross_entropy.cl ---------------------------------------------------------------------

TEST_F(LayerKernel, CrossEntropyOverTilesMatchesReference) {
  const int n = 6, vocab = 1000, tile = 384;  // tiles of 384, 384 and 232
  std::vector<float> logits = random_floats(size_t(n) * vocab, 600, -10.0f, 10.0f);
  for (int v = 0; v < vocab; ++v) logits[size_t(4) * vocab + v] += 100.0f;  // exp(110) overflows fp32 unless shifted
  for (int v = 0; v < vocab; ++v) logits[size_t(5) * vocab + v] *= 5.0f;    // a peaked distribution
  const std::vector<int> targets = {0, 999, 383, 384, -1, 500};             // tile edges; row 4 unscored
  auto d_targets = upload(targets);
  auto m = ctx().memory().alloc(cl::MemCategory::Scratch, n * 4, "ce m");
  auto s = ctx().memory().alloc(cl::MemCategory::Scratch, n * 4, "ce s");
  auto tl = ctx().memory().alloc(cl::MemCategory::Scratch, n * 4, "ce tl");
  ops::ce_init(ctx(), m, s, tl, n);
  for (int v0 = 0; v0 < vocab; v0 += tile) {
    const int w = std::min(tile, vocab - v0);
    std::vector<float> t(size_t(n) * w);
    for (int r = 0; r < n; ++r)
      std::copy_n(logits.begin() + size_t(r) * vocab + v0, w, t.begin() + size_t(r) * w);
    auto d_t = upload(t);
    ops::ce_update(ctx(), d_t, n, w, v0, d_targets, m, s, tl);
  }
  const std::vector<float> hm = download_all(m), hs = download_all(s), htl = download_all(tl);
  const std::vector<ref::CrossEntropyRow> want = ref::cross_entropy(logits.data(), n, vocab, targets.data());
  std::vector<float> got_lse(n), want_lse(n), got_nll, want_nll;
  std::vector<double> nll_tol;
  for (int r = 0; r < n; ++r) {
    got_lse[r] = float(double(hm[r]) + std::log(double(hs[r])));
    want_lse[r] = float(want[r].lse);
    if (targets[r] < 0) continue;
    got_nll.push_back(float(double(got_lse[r]) - htl[r]));
    want_nll.push_back(float(want[r].nll));
    nll_tol.push_back(kCeTol * (1 + std::fabs(want[r].lse)));
  }
  EXPECT_TRUE(all_close("cross-entropy lse", got_lse, want_lse,
                        [&](size_t i) { return kCeTol * (1 + std::fabs(want_lse[i])); }));
  EXPECT_TRUE(all_close("cross-entropy nll", got_nll, want_nll, [&](size_t i) { return nll_tol[i]; }));
  EXPECT_EQ(htl[4], 0.0f) << "an unscored row's target logit stays at its initial 0";
}

// ---- argmax.cl ----------------------------------------------------------------------------

// The device's greedy token against Sampler::argmax (its reference), exactly: the first index
// of the largest value, NaN never winning. Rows shorter and longer than the 64 items of the
// work-group, sizes off the 16-lane loads, ties inside one item's chunk and across items.
TEST_F(LayerKernel, ArgmaxRowMatchesHostArgmax) {
  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, sizeof(int), "argmax out");
  auto device_argmax = [&](const std::vector<float>& row) {
    auto d = upload(row);
    ops::argmax_row(ctx(), d, static_cast<int>(row.size()), out);
    int got = -1;
    ctx().read(out, &got, sizeof(got));
    return got;
  };
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<std::pair<std::string, std::vector<float>>> rows;
  for (int n : {1, 15, 16, 17, 63, 64, 65, 1000, 49159}) {
    rows.push_back({"random n=" + std::to_string(n), random_floats(size_t(n), 700 + n, -30.0f, 30.0f)});
    std::vector<float> last = random_floats(size_t(n), 800 + n);
    last.back() = 5.0f;  // the maximum in the last slot (a tail past the 16-lane loads)
    rows.push_back({"max last n=" + std::to_string(n), last});
  }
  std::vector<float> ties = random_floats(49159, 900);
  for (int i : {40000, 777, 778, 31000}) ties[size_t(i)] = 2.0f;  // first at 777: one chunk holds 777 and 778
  rows.push_back({"ties across and inside chunks", ties});
  std::vector<float> nans = random_floats(5000, 901);
  nans[10] = 9.0f;
  for (int i : {0, 3, 4999, 2500}) nans[size_t(i)] = nan;
  rows.push_back({"NaN sprinkled", nans});
  rows.push_back({"NaN first, then the maximum", {nan, 1.0f, 3.0f, 3.0f, nan}});
  rows.push_back({"all NaN", std::vector<float>(300, nan)});
  rows.push_back({"all -inf", std::vector<float>(300, -inf)});
  rows.push_back({"-inf after NaN", {nan, nan, -inf, -inf}});
  rows.push_back({"signed zeros", {-1.0f, -0.0f, 0.0f, -0.0f}});
  rows.push_back({"+inf", {1.0f, inf, nan, inf}});
  std::vector<float> chunk_nan(4096, nan);  // whole items' chunks of NaN, a value in another
  chunk_nan[3000] = -7.0f;
  rows.push_back({"NaN chunks", chunk_nan});
  for (const auto& [name, row] : rows) EXPECT_EQ(device_argmax(row), Sampler::argmax(row)) << name;
  // The reference's own rules, so both cannot drift together.
  EXPECT_EQ(Sampler::argmax(ties), 777);
  EXPECT_EQ(Sampler::argmax({nan, 1.0f, 3.0f, 3.0f, nan}), 2);
  EXPECT_EQ(Sampler::argmax(std::vector<float>(300, nan)), 0);
  EXPECT_EQ(Sampler::argmax({nan, nan, -inf, -inf}), 2);
  EXPECT_EQ(Sampler::argmax({-1.0f, -0.0f, 0.0f, -0.0f}), 1);
  EXPECT_THROW(ops::argmax_row(ctx(), out, 0, out), cl::ClError);
  EXPECT_THROW(ops::argmax_row(ctx(), out, 2, out), cl::ClError);  // a 4-byte buffer holds no 2 floats
}

}  // namespace
}  // namespace infinipot
