// Fused per-token cross-entropy over vocabulary tiles (needs vector_reduce.cl): the LM head
// is computed tile by tile and each tile folds into a running log-sum-exp, so a [chunk x
// vocab] matrix never exists. After the last tile, nll[r] = m[r] + log(s[r]) - target_logit[r].
//   logits: [n][tile] float for vocabulary ids v0 .. v0+tile-1
//   targets: [n] int (-1: row not scored)   m, s, tl: [n] running state (m starts at -inf)
// One work-item per row, reading it 16 logits at a time in explicit float16 arithmetic (a
// work-item per row with scalar loops left PoCL gathering one logit from each of 8 rows per
// vector, a quarter of NuC's time; docs/benchmarks.md).
__kernel void ce_update(__global const float* logits, const int n, const int tile, const int v0,
                        __global const int* targets, __global float* m, __global float* s, __global float* tl) {
  const int r = get_global_id(0);
  if (r >= n) return;
  __global const float* row = logits + (size_t)r * tile;
  const int whole = tile / 16 * 16;
  float16 mx = (float16)(-INFINITY);
  for (int j = 0; j < whole; j += 16) mx = fmax(mx, vload16(0, row + j));
  float tile_max = max16(mx);
  for (int j = whole; j < tile; ++j) tile_max = fmax(tile_max, row[j]);
  float16 acc = (float16)(0.0f);
  for (int j = 0; j < whole; j += 16) acc += exp(vload16(0, row + j) - tile_max);
  float tile_sum = sum16(acc);
  for (int j = whole; j < tile; ++j) tile_sum += exp(row[j] - tile_max);
  const float m_old = m[r];
  const float m_new = fmax(m_old, tile_max);
  s[r] = s[r] * exp(m_old - m_new) + tile_sum * exp(tile_max - m_new);
  m[r] = m_new;
  const int t = targets[r];
  if (t >= v0 && t < v0 + tile) tl[r] = row[t - v0];
}

__kernel void ce_init(__global float* m, __global float* s, __global float* tl, const int n) {
  const int r = get_global_id(0);
  if (r >= n) return;
  m[r] = -INFINITY;
  s[r] = 0.0f;
  tl[r] = 0.0f;
}
