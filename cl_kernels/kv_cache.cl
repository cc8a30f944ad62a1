// (needs kv_format.cl) Writes a chunk's keys and values into the KV store of one layer.
//   qkv:     [n_tokens][ld] float; keys at col k0 + h*head_dim, values at v0 + h*head_dim
//   k_cache, v_cache: [n_kv_heads][cap][head_dim] float; token t goes to slot slot0 + t
// The layout keeps each KV head's entries contiguous, so the pot can keep different tokens
// per head and compact each head on its own.
__kernel void kv_store(__global const float* qkv, const int ld, const int k0, const int v0, const int head_dim,
                       __global kv_t* k_cache, __global kv_t* v_cache, const int cap, const int slot0) {
  const int d = get_global_id(0);
  const int h = get_global_id(1);
  const int t = get_global_id(2);
  if (d >= head_dim) return;
  const size_t dst = ((size_t)h * cap + slot0 + t) * head_dim + d;
  const size_t src = (size_t)t * ld + h * head_dim + d;
  KV_STORE(qkv[src + k0], k_cache + dst);
  KV_STORE(qkv[src + v0], v_cache + dst);
}

// Compaction gather: for each head, entries keep[h][0..n_keep) move to slots 0..n_keep.
//   src/dst: [n_kv_heads][cap][head_dim]   keep: [n_kv_heads][n_keep] int (source slots)
__kernel void kv_gather(__global const kv_t* src, __global kv_t* dst, const int cap, const int head_dim,
                        __global const int* keep, const int n_keep) {
  const int d = get_global_id(0);
  const int j = get_global_id(1);
  const int h = get_global_id(2);
  if (d >= head_dim || j >= n_keep) return;
  const int s = keep[h * n_keep + j];
  KV_STORE(KV_LOAD(src + ((size_t)h * cap + s) * head_dim + d), dst + ((size_t)h * cap + j) * head_dim + d);
}
