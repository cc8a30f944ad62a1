// Launchers of cl_kernels/rope.cl (RoPE with the KV store, and the pot's re-rotation of
// cached keys), with the host side's angle tables; reference ref::rope_store_kv and
// ref::rope_shift, tests tests/runtime/test_rope.cpp.
#pragma once
#include <cstddef>
#include <vector>

#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// rope.cl: rotate the q and k heads of fused q|k|v rows and store k, v at slot0..  (one launch)
//   cs: [n_tokens][n_rot/2] (cos, sin) floats, from rope_angles
void rope_store_kv(Context& c, Buffer& qkv, int ld, int n_head, int n_kv_heads, int head_dim, int n_rot,
                   const Buffer& cs, Buffer& k_cache, Buffer& v_cache, int cap, int slot0, int n_tokens,
                   bool kv_half = false);
// Host side: the (cos, sin) table for positions pos[0..n) as rope_store_kv reads it; pair i's
// angle divided by freq_factors[i] when given ([n_rot/2], Llama 3's rope_freqs).
std::vector<float> rope_angles(const std::vector<int>& pos, int n_rot, float theta,
                               const std::vector<float>& freq_factors = {});
// The same table for the n positions first, first+1, .. into cs (resized; no allocation once
// it has held a table as large): what a decode step fills each token.
void rope_angles(int first, int n, int n_rot, float theta, const std::vector<float>& freq_factors,
                 std::vector<float>& cs);
// rope.cl: re-rotate cached keys by delta[h][slot], in two steps so that layers sharing one
// delta list compute its angles once: rope_shift_angles fills the (cos, sin) table from delta,
// rope_shift applies it to one layer.   k_cache: [n_heads][cap][head_dim]   delta: [n_heads][cap]
//                                       table: [n_heads][cap][n_rot/2] float2 (rope_shift_table_bytes)
//                                       freq_factors: [n_rot/2] float, each pair's angle divisor (1: none)
size_t rope_shift_table_bytes(int n_heads, int cap, int n_rot);
void rope_shift_angles(Context& c, const Buffer& delta, int n_heads, int cap, int n_rot, int n_slots, float theta,
                       const Buffer& freq_factors, Buffer& table);
void rope_shift(Context& c, Buffer& k_cache, int n_heads, int cap, int head_dim, int n_rot, const Buffer& delta,
                int n_slots, const Buffer& table, bool kv_half = false);

}  // namespace infinipot::ops
