// rope.cl (RoPE with the KV store from the host's angle table, and the pot's re-rotation of
// cached keys by a position delta) against ref::rope_store_kv and ref::rope_shift in
// tests/support/cpu_ref.h.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/rope.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using testing_support::all_close;
using testing_support::random_floats;

constexpr double kUlp = 1.0 / (1 << 23);  // float epsilon, 2^-23

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

// Copies (the values and unrotated columns rope_store_kv moves) are bit-exact.
constexpr double kExactTol = 0.0;

class LayerKernel : public testing_support::KernelTest {};

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

}  // namespace
}  // namespace infinipot
