// (needs kv_format.cl) The KV store of one layer: k_cache, v_cache: [n_kv_heads][cap][head_dim].
// The layout keeps each KV head's entries contiguous, so the pot can keep different tokens
// per head and compact each head on its own. Chunks are written by rope_store_kv (rope.cl).

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
