// Launchers of cl_kernels/attention.cl (causal GQA attention with log-sum-exp, and the
// attention mass the pot's policies score by); reference ref::attention and
// ref::attention_mass, tests tests/runtime/test_attention.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// kv_half: the KV store holds 16-bit floats (kv_format.cl); every kernel touching it takes this.
struct AttentionShape {
  int n_heads, n_kv_heads, head_dim, cap;
  bool kv_half = false;
  float scale = 0.f;  // scores = q.k * scale; 0: 1/sqrt(head_dim)
  int window = 0;     // sliding window: row at slot p sees slots (p - window, p]; 0: all of them
};
// A decode row's attention on a CPU device in `splits` work-items per KV head (attention.cl
// attention_decode_lanes_group; at most one per 16-key block), with their scratch: the partial
// softmaxes, which a second launch (attention_decode_combine) merges. decode_splits: twice the
// device's compute units over the KV heads.
struct DecodeSplit {
  int splits = 1;
  Buffer* part = nullptr;  // [n_heads][splits][head_dim + 2] floats
};
int decode_splits(const Context& c, const AttentionShape& s);
// Items per KV head a decode row at slot n_past runs in: split.splits, at most one per 16-key
// block of its window; throws where split lacks the scratch for more than one.
int decode_split_ways(const AttentionShape& s, int n_past, const DecodeSplit& split);
// The key tile attention_tiled can use: the tuned one (a multiple of 16), made smaller (in
// steps of 16) until its keys and values fit the device's local memory (2 * tile * head_dim
// floats: 64 KiB for head_dim 256 at the usual 32, more than the 32 KiB of many mobile GPUs
// and the 48 KiB of NVIDIA's); 0 when not even 16 fit (then the untiled kernel runs).
int attention_key_tile(int tuned, int head_dim, uint64_t local_mem_bytes);
// The attention kernels' score scale (s.scale, or 1 / sqrt(head_dim)) and window argument
// (s.window, or past the capacity for global layers: nothing cut).
float score_scale(const AttentionShape& s);
int window_arg(const AttentionShape& s);
// Bytes of part for `splits` items per KV head.
size_t decode_split_part_bytes(const AttentionShape& s, int splits);
// attention.cl: out = softmax(q k^T * scale, causal) v; lse per (row, head). split: room for a
// decode row's attention to run several items per KV head (else one; split, it takes two launches).
void attention(Context& c, const AttentionShape& s, const Buffer& q, int ldq, const Buffer& k_cache,
               const Buffer& v_cache, int n_past, int n, Buffer& out, int ldo, Buffer& lse,
               const DecodeSplit& split = {});
// attention.cl: mass[g][j] += attention paid to entry j by rows [r0, r1) (summed over group)
void attention_mass(Context& c, const AttentionShape& s, const Buffer& q, int ldq, const Buffer& k_cache,
                    int n_past, int r0, int r1, const Buffer& lse, Buffer& mass, size_t mass_offset_floats);

}  // namespace infinipot::ops
