// Launchers of rope.cl and the host side's angle tables.
#include "runtime/ops/rope.h"

#include <cmath>
#include <string>

#include "runtime/cl_error.h"
#include "runtime/ops/detail.h"

namespace infinipot::ops {

constexpr const char* kSources = "kv_format.cl+rope.cl";

void rope_store_kv(Context& c, Buffer& qkv, int ld, int n_head, int n_kv_heads, int head_dim, int n_rot,
                   const Buffer& cs, Buffer& k_cache, Buffer& v_cache, int cap, int slot0, int n_tokens,
                   bool kv_half) {
  if (slot0 < 0 || slot0 + n_tokens > cap)
    throw cl::ClError("invalid launch: rope_store_kv slots " + std::to_string(slot0) + ".." +
                      std::to_string(slot0 + n_tokens) + " exceed capacity " + std::to_string(cap));
  if (head_dim % 2 || n_rot > head_dim) throw cl::ClError("invalid launch: rope_store_kv head_dim/n_rot");
  if (cs.bytes() < size_t(n_tokens) * n_rot * sizeof(float))
    throw cl::ClError("invalid launch: rope_store_kv angle table too small");
  const int v0 = (n_head + n_kv_heads) * head_dim;
  c.kernel(kSources, "rope_store_kv", detail::kv_option(kv_half))
      .args(qkv, ld, head_dim, n_rot, cs, n_head, v0, k_cache, v_cache, cap, slot0)
      .launch(c.queue(), {size_t(head_dim / 2), size_t(n_head + n_kv_heads), size_t(n_tokens)});
}

namespace {
void fill_rope_angles(const int* pos, size_t n, int n_rot, float theta, const std::vector<float>& freq_factors,
                      float* cs) {
  if (!freq_factors.empty() && freq_factors.size() != size_t(n_rot / 2))
    throw cl::ClError("rope_angles: freq_factors must hold n_rot/2 entries");
  for (size_t t = 0; t < n; ++t)
    for (int i = 0; i < n_rot / 2; ++i) {
      // Double precision: the angle of a large position must not lose its fraction.
      double a = pos[t] * std::pow(double(theta), -2.0 * i / n_rot);
      if (!freq_factors.empty()) a /= freq_factors[size_t(i)];
      cs[t * n_rot + 2 * i] = static_cast<float>(std::cos(a));
      cs[t * n_rot + 2 * i + 1] = static_cast<float>(std::sin(a));
    }
}
}  // namespace

std::vector<float> rope_angles(const std::vector<int>& pos, int n_rot, float theta,
                               const std::vector<float>& freq_factors) {
  std::vector<float> cs(pos.size() * n_rot);
  fill_rope_angles(pos.data(), pos.size(), n_rot, theta, freq_factors, cs.data());
  return cs;
}

void rope_angles(int first, int n, int n_rot, float theta, const std::vector<float>& freq_factors,
                 std::vector<float>& cs) {
  cs.resize(size_t(n) * n_rot);
  for (int t = 0; t < n; ++t) {
    const int p = first + t;
    fill_rope_angles(&p, 1, n_rot, theta, freq_factors, cs.data() + size_t(t) * n_rot);
  }
}

size_t rope_shift_table_bytes(int n_heads, int cap, int n_rot) { return size_t(n_heads) * cap * (n_rot / 2) * 8; }

// Slots per work-item of rope_shift_angles (rope.cl says why it loops).
constexpr int kRopeShiftSlots = 16;

void rope_shift_angles(Context& c, const Buffer& delta, int n_heads, int cap, int n_rot, int n_slots, float theta,
                       const Buffer& freq_factors, Buffer& table) {
  if (table.bytes() < rope_shift_table_bytes(n_heads, cap, n_rot)) throw cl::ClError("invalid launch: rope_shift table too small");
  if (freq_factors.bytes() < size_t(n_rot / 2) * sizeof(float))
    throw cl::ClError("invalid launch: rope_shift_angles freq_factors smaller than n_rot/2 floats");
  c.kernel(kSources, "rope_shift_angles")
      .args(delta, cap, n_rot, n_slots, kRopeShiftSlots, theta, freq_factors, table)
      .launch(c.queue(), {size_t(n_rot / 2), size_t((n_slots + kRopeShiftSlots - 1) / kRopeShiftSlots), size_t(n_heads)});
}

void rope_shift(Context& c, Buffer& k_cache, int n_heads, int cap, int head_dim, int n_rot, const Buffer& delta,
                int n_slots, const Buffer& table, bool kv_half) {
  if (table.bytes() < rope_shift_table_bytes(n_heads, cap, n_rot)) throw cl::ClError("invalid launch: rope_shift table too small");
  c.kernel(kSources, "rope_shift", detail::kv_option(kv_half))
      .args(k_cache, cap, head_dim, n_rot, delta, n_slots, table)
      .launch(c.queue(), {size_t(n_rot / 2), size_t(n_slots), size_t(n_heads)});
}

}  // namespace infinipot::ops
