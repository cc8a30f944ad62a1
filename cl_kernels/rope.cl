// Rotary position embedding (the kernels touching the KV store need kv_format.cl), "normal" (adjacent-pair) mode as GGUF llama models use:
// for pair i < n_rot/2 of a head, angle = pos * theta_base^(-2i/n_rot),
//   (x[2i], x[2i+1]) <- (x[2i] cos - x[2i+1] sin, x[2i] sin + x[2i+1] cos)

// The RoPE + KV-store epilogue of a decode q|k|v product (matvec.cl ROPE_KV, decode_layer.cl):
// s holds rows o0 .. o0 + 3 of q|k|v (q_rows = n_head * head_dim rows of q, then n_kv_heads k
// heads and as many v heads; head_dim % 4 == 0, so they are pairs (2j, 2j+1), (2j+2, 2j+3) of
// one head, d = o0 % head_dim). q and k rows are rotated by the row's angles cs ([n_rot/2]
// (cos, sin)), k and v rows also go to `slot` of their head in k_cache / v_cache
// ([n_kv_heads][cap][head_dim]). The same arithmetic as rope_store_kv below.
inline void rope_store_rows4(float s[4], const int o0, __global const float2* cs, const int head_dim,
                             const int n_rot, const int q_rows, const int n_kv_heads, __global kv_t* k_cache,
                             __global kv_t* v_cache, const int cap, const int slot) {
  const int qk_rows = q_rows + n_kv_heads * head_dim, d = o0 % head_dim;
  if (o0 < qk_rows)
    for (int p = 0; p < 2; ++p) {
      const int j = d / 2 + p;
      if (2 * j < n_rot) {
        const float2 c = cs[j];
        const float x0 = s[2 * p], x1 = s[2 * p + 1];
        s[2 * p] = x0 * c.x - x1 * c.y;
        s[2 * p + 1] = x0 * c.y + x1 * c.x;
      }
    }
  if (o0 >= q_rows) {
    const bool is_k = o0 < qk_rows;
    const int g = (o0 - (is_k ? q_rows : qk_rows)) / head_dim;
    __global kv_t* dst = (is_k ? k_cache : v_cache) + ((size_t)g * cap + slot) * head_dim + d;
    for (int i = 0; i < 4; ++i) KV_STORE(s[i], dst + i);
  }
}

// Rotates the q and k heads of fused q|k|v rows in place, with the angles precomputed once per
// chunk (the same table serves every layer), and stores the rotated keys and the values of the
// chunk into the KV cache (one launch per layer):
//   qkv:  [n_tokens][ld]: q heads 0..n_head-1, k heads n_head.., v at col v0 + g*head_dim
//   cs:   [n_tokens][n_rot/2] float2 (cos, sin) of pos[t] * theta_base^(-2i/n_rot)
//   k_cache, v_cache: [n_kv_heads][cap][head_dim]; token t goes to slot slot0 + t
__kernel void rope_store_kv(__global float* qkv, const int ld, const int head_dim, const int n_rot,
                            __global const float2* cs, const int n_head, const int v0,
                            __global kv_t* k_cache, __global kv_t* v_cache, const int cap, const int slot0) {
  const int i = get_global_id(0);  // pair, 0 .. head_dim/2 - 1
  const int h = get_global_id(1);  // 0 .. n_head + n_kv_heads - 1
  const int t = get_global_id(2);
  if (2 * i >= head_dim) return;
  __global float* x = qkv + (size_t)t * ld + h * head_dim + 2 * i;
  float x0 = x[0], x1 = x[1];
  if (2 * i < n_rot) {
    const float2 r = cs[t * (n_rot / 2) + i];
    const float y0 = x0 * r.x - x1 * r.y;
    x1 = x0 * r.y + x1 * r.x;
    x0 = y0;
    x[0] = x0;
    x[1] = x1;
  }
  if (h >= n_head) {
    const int g = h - n_head;
    const size_t dst = ((size_t)g * cap + slot0 + t) * head_dim + 2 * i;
    KV_STORE(x0, k_cache + dst);
    KV_STORE(x1, k_cache + dst + 1);
    __global const float* v = qkv + (size_t)t * ld + v0 + g * head_dim + 2 * i;
    KV_STORE(v[0], v_cache + dst);
    KV_STORE(v[1], v_cache + dst + 1);
  }
}

// Re-rotates cached (already rotated) keys by a per-entry position delta, which equals
// rotating the pre-RoPE key at the new position: R(p + d) = R(d) R(p). Used by the pot to
// give survivors fresh positions after compaction (CR-RoPE), and by the sliding-window store.
// Two kernels, so that the layers of a store that share one delta list (every layer, when the
// pot's choice is shared across layers; every slide) pay the pow/sin/cos once, not per layer:
//   rope_shift_angles: table[h][slot][i] = (cos, sin) of delta[h][slot] * theta^(-2i/n_rot) / freq_factors[i]
//                      (freq_factors: [n_rot/2], Llama 3's rope_freqs; all 1 for other models)
//   rope_shift:        k_cache[h][slot] rotated by its table entry (delta 0: untouched)
//   k_cache: [n_heads][cap][head_dim]   delta: [n_heads][cap] int   table: [n_heads][cap][n_rot/2] float2
// One work-item per (i, block of `per_item` slots, head): pow and the factor once per item,
// and cos/sin only where the delta changes from the slot before (a run of survivors that moved
// together shares one delta). Every entry is the same expression as one work-item per entry
// would compute, so the table is bit for bit the same.
__kernel void rope_shift_angles(__global const int* delta, const int cap, const int n_rot, const int n_slots,
                                const int per_item, const float theta_base, __global const float* freq_factors,
                                __global float2* table) {
  const int i = get_global_id(0);
  const int first = get_global_id(1) * per_item;
  const int h = get_global_id(2);
  if (2 * i >= n_rot || first >= n_slots) return;
  const float inv_freq = pow(theta_base, -2.0f * (float)i / (float)n_rot);
  const float factor = freq_factors[i];
  const int end = min(first + per_item, n_slots);
  int last = 0;
  float2 cs = (float2)(1.0f, 0.0f);  // delta 0
  for (int slot = first; slot < end; ++slot) {
    const int d = delta[h * cap + slot];
    if (slot == first || d != last) {
      const float angle = (float)d * inv_freq / factor;
      cs = (float2)(cos(angle), sin(angle));
      last = d;
    }
    table[((size_t)h * cap + slot) * (n_rot / 2) + i] = cs;
  }
}

__kernel void rope_shift(__global kv_t* k_cache, const int cap, const int head_dim, const int n_rot,
                         __global const int* delta, const int n_slots, __global const float2* table) {
  const int i = get_global_id(0);
  const int slot = get_global_id(1);
  const int h = get_global_id(2);
  if (2 * i >= n_rot || slot >= n_slots) return;
  if (delta[h * cap + slot] == 0) return;
  const float2 cs = table[((size_t)h * cap + slot) * (n_rot / 2) + i];
  __global kv_t* x = k_cache + ((size_t)h * cap + slot) * head_dim + 2 * i;
  const float x0 = KV_LOAD(x), x1 = KV_LOAD(x + 1);
  KV_STORE(x0 * cs.x - x1 * cs.y, x);
  KV_STORE(x0 * cs.y + x1 * cs.x, x + 1);
}
