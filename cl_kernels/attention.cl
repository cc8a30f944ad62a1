// Causal grouped-query attention of a chunk of queries against the KV store (needs kv_format.cl,
// vector_reduce.cl).
// Compile-time (-D): HEAD_DIM (multiple of 4), GROUP (query heads per KV head).
//   q:      [n][ldq] float, query head h at columns h*HEAD_DIM (already rotated)
//   k/v:    [n_kv_heads][cap][HEAD_DIM] kv_t (keys rotated at their positions)
//   out:    [n][ldo] float, head h at columns h*HEAD_DIM
//   lse:    [n][n_heads] float, log-sum-exp of each query row's scaled scores; lets
//           attention_mass recompute probabilities without storing them
// Query row i sits at slot n_past + i and sees slots 0 .. n_past + i (causal; every
// earlier slot is in its past, whatever positions the pot gave them), and of those only the
// last `window` (sliding-window layers: slots > n_past + i - window; the host passes a window
// larger than the capacity for global layers, so nothing is cut).
// One work-item per (row, KV head) computes the GROUP query heads sharing that KV head, so
// each key and value is read once per group; softmax is online (one pass, FlashAttention-style).
#ifndef HEAD_DIM
#error "compile with -DHEAD_DIM=..."
#endif
#ifndef GROUP
#error "compile with -DGROUP=..."
#endif
#define V4 (HEAD_DIM / 4)

// Normalised output and log-sum-exp of query row i, for the GROUP heads of KV head g.
inline void write_rows(float4 acc[GROUP][V4], const float* m, const float* s, int g, int i, __global float* out,
                       int ldo, __global float* lse, int n_heads) {
  for (int h = 0; h < GROUP; ++h) {
    const int head = g * GROUP + h;
    const float inv = 1.0f / s[h];
    __global float* o = out + (size_t)i * ldo + head * HEAD_DIM;
    for (int d = 0; d < V4; ++d) vstore4(acc[h][d] * inv, d, o);
    lse[(size_t)i * n_heads + head] = m[h] + log(s[h]);
  }
}

// The GROUP query heads of a KV head, scaled, from qg (the group's first head), and an empty
// online softmax for each.
inline void start_rows(float4 qv[GROUP][V4], float4 acc[GROUP][V4], float* m, float* s, __global const float* qg,
                       const float scale) {
  for (int h = 0; h < GROUP; ++h) {
    for (int d = 0; d < V4; ++d) {
      qv[h][d] = vload4(d, qg + h * HEAD_DIM) * scale;
      acc[h][d] = (float4)(0.0f);
    }
    m[h] = -INFINITY;
    s[h] = 0.0f;
  }
}

// One key of an online softmax (FlashAttention-style, one pass) over the GROUP query heads of
// a KV head: each head's score against key kj, then its running maximum m, sum s and
// accumulator acc updated with value vj.
inline void online_key(float4 qv[GROUP][V4], float4 acc[GROUP][V4], float* m, float* s, __global const kv_t* kj,
                       __global const kv_t* vj) {
  float4 kv[V4];
  for (int d = 0; d < V4; ++d) kv[d] = KV_LOAD4(d, kj);
  float p[GROUP];
  for (int h = 0; h < GROUP; ++h) {
    float4 t = qv[h][0] * kv[0];
    for (int d = 1; d < V4; ++d) t = fma(qv[h][d], kv[d], t);
    const float score = (t.x + t.y) + (t.z + t.w);
    if (score > m[h]) {
      const float corr = exp(m[h] - score);
      s[h] *= corr;
      for (int d = 0; d < V4; ++d) acc[h][d] *= corr;
      m[h] = score;
    }
    p[h] = exp(score - m[h]);
    s[h] += p[h];
  }
  for (int d = 0; d < V4; ++d) {
    const float4 vv = KV_LOAD4(d, vj);
    for (int h = 0; h < GROUP; ++h) acc[h][d] = fma((float4)(p[h]), vv, acc[h][d]);
  }
}

__kernel void attention(__global const float* q, const int ldq, __global const kv_t* k_cache,
                        __global const kv_t* v_cache, const int cap, const int n_past, const int n,
                        const float scale, __global float* out, const int ldo, __global float* lse,
                        const int n_heads, const int window) {
  const int i = get_global_id(0);
  const int g = get_global_id(1);
  if (i >= n) return;
  float4 qv[GROUP][V4];
  float4 acc[GROUP][V4];
  float m[GROUP], s[GROUP];
  start_rows(qv, acc, m, s, q + (size_t)i * ldq + g * GROUP * HEAD_DIM, scale);
  const int limit = n_past + i;
  __global const kv_t* kb = k_cache + (size_t)g * cap * HEAD_DIM;
  __global const kv_t* vb = v_cache + (size_t)g * cap * HEAD_DIM;
  for (int j = max(0, limit - window + 1); j <= limit; ++j) {
    online_key(qv, acc, m, s, kb + (size_t)j * HEAD_DIM, vb + (size_t)j * HEAD_DIM);
  }
  write_rows(acc, m, s, g, i, out, ldo, lse, n_heads);
}

// Decode (one query row, at slot n_past) split over the keys: a work-group of SPLIT items
// per KV head (-DSPLIT, the work-group size), item t taking keys first + t, first + t +
// SPLIT, ...; each item keeps its own online softmax, then the group merges them (the
// maximum, each item's sum and accumulator rescaled to it, then summed in item order) through
// local memory, 64 floats per item at a time. A GPU then walks a 4K-entry cache with SPLIT
// items per KV head instead of one; `attention` above is the one-item case.
#ifdef SPLIT
__kernel __attribute__((reqd_work_group_size(SPLIT, 1, 1)))
void attention_decode_split(__global const float* q, __global const kv_t* k_cache,
                            __global const kv_t* v_cache, const int cap, const int n_past, const float scale,
                            __global float* out, __global float* lse, const int n_heads, const int window) {
  __local float part[SPLIT * 64];
  const int t = get_local_id(0), g = get_group_id(1);
  float4 qv[GROUP][V4];
  float4 acc[GROUP][V4];
  float m[GROUP], s[GROUP];
  start_rows(qv, acc, m, s, q + g * GROUP * HEAD_DIM, scale);
  __global const kv_t* kb = k_cache + (size_t)g * cap * HEAD_DIM;
  __global const kv_t* vb = v_cache + (size_t)g * cap * HEAD_DIM;
  for (int j = max(0, n_past - window + 1) + t; j <= n_past; j += SPLIT) {
    online_key(qv, acc, m, s, kb + (size_t)j * HEAD_DIM, vb + (size_t)j * HEAD_DIM);
  }
  for (int h = 0; h < GROUP; ++h) {
    const int head = g * GROUP + h;
    part[t] = m[h];
    barrier(CLK_LOCAL_MEM_FENCE);
    float mx = -INFINITY;
    for (int u = 0; u < SPLIT; ++u) mx = fmax(mx, part[u]);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float f = m[h] == -INFINITY ? 0.0f : exp(m[h] - mx);  // an item that saw no key adds nothing
    part[t] = s[h] * f;
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    for (int u = 0; u < SPLIT; ++u) sum += part[u];
    barrier(CLK_LOCAL_MEM_FENCE);
    const float inv = 1.0f / sum;
    for (int d0 = 0; d0 < V4; d0 += 16) {
      const int w = min(16, V4 - d0);
      for (int d = 0; d < w; ++d) vstore4(acc[h][d0 + d] * f, t * 16 + d, part);
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int c = t; c < 4 * w; c += SPLIT) {
        float o = 0.0f;
        for (int u = 0; u < SPLIT; ++u) o += part[u * 64 + c];
        out[head * HEAD_DIM + d0 * 4 + c] = o * inv;
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) lse[head] = mx + log(sum);
  }
}
#endif

// Decode (one query row, at slot n_past) for CPU devices (-D DECODE_LANES; HEAD_DIM a multiple
// of 16): the keys DL at a time. A key's score is HEAD_DIM / 16 fused multiply-adds of 16-float
// vectors and one horizontal sum; the block's DL scores then take one vector exp, and the value
// rows are added with their probabilities broadcast, so the online softmax rescales once per
// block instead of once per key. `attention` (one work-item
// per KV head, a scalar exp per key and head) left a 2-core CPU with 3 items for 2 threads and
// decode at 2K tokens of context at half its 512-token rate (docs/benchmarks.md).
// A slot past n_past in the last block reads slot n_past and is masked (probability 0).
//   attention_decode_lanes:       a work-item per query head. Launch: global (n_heads).
//   attention_decode_lanes_group: work-items per KV head, each taking its GROUP query heads
//                                 block by block, so each block's keys and values come from
//                                 memory once and from the L1 cache for the group's other heads
//                                 (where one item per query head read the cache GROUP times);
//                                 `splits` items per KV head share its blocks and merge (below).
//                                 Where GROUP * HEAD_DIM fits 16 vectors (ops::attention).
//                                 Launch: global (n_kv_heads * splits).
// Both in work-groups of one item, which the driver spreads over its threads.
#ifdef DECODE_LANES
#define DL 16
#define HV (HEAD_DIM / 16)
// The online softmax over one block's DL scores: (m, s) updated, acc rescaled to the new
// maximum, and the block's probabilities (relative to it) into pk for the value rows.
__attribute__((always_inline)) inline void softmax_block(const float sc[DL], float* m, float* s, float16 acc[HV],
                                                         float pk[DL]) {
  const float16 scores = vload16(0, sc);
  const float bm = fmax(*m, max16(scores));  // finite: slot j0 is always seen
  const float corr = exp(*m - bm);           // 0 for the first block (m = -inf)
  const float16 p = exp(scores - bm);
  *s = *s * corr + sum16(p);
  *m = bm;
#pragma unroll
  for (int c = 0; c < HV; ++c) acc[c] *= corr;
  vstore16(p, 0, pk);
}

// One block of DL keys from slot j0 for one head: the online softmax (m, s) and acc updated.
// `last`: the block may reach past n_past; its slots past it read slot n_past and are masked.
__attribute__((always_inline)) inline void lanes_block(const int j0, const bool last, const int n_past, __global const kv_t* kb,
                        __global const kv_t* vb, const float16 qv[HV], float16 acc[HV], float* m, float* s) {
  float sc[DL];
#pragma unroll
  for (int k = 0; k < DL; ++k) {
    __global const kv_t* kr = kb + (size_t)(last ? min(j0 + k, n_past) : j0 + k) * HEAD_DIM;
    float16 t = qv[0] * KV_LOAD16(0, kr);
#pragma unroll
    for (int c = 1; c < HV; ++c) t = fma(qv[c], KV_LOAD16(c, kr), t);
    sc[k] = !last || j0 + k <= n_past ? sum16(t) : -INFINITY;
  }
  float pk[DL];
  softmax_block(sc, m, s, acc, pk);
#pragma unroll
  for (int k = 0; k < DL; ++k) {
    __global const kv_t* vr = vb + (size_t)(last ? min(j0 + k, n_past) : j0 + k) * HEAD_DIM;
#pragma unroll
    for (int c = 0; c < HV; ++c) acc[c] = fma((float16)(pk[k]), KV_LOAD16(c, vr), acc[c]);
  }
}

// The key or value row of `slot` as HV float16 vectors; in a `last` block a slot past n_past
// reads slot n_past (its score is masked).
__attribute__((always_inline)) inline void block_row(__global const kv_t* base, const int slot, const bool last,
                                                     const int n_past, float16 row[HV]) {
  __global const kv_t* r = base + (size_t)(last ? min(slot, n_past) : slot) * HEAD_DIM;
#pragma unroll
  for (int c = 0; c < HV; ++c) row[c] = KV_LOAD16(c, r);
}

// lanes_block for the GROUP query heads of one KV head at once: each key and value row is
// loaded (and converted from half) once for all of them rather than once per head, which in
// f16 stores was two thirds of the block's conversions. Per head the arithmetic is
// lanes_block's, in the same order, so the results are the same bits.
__attribute__((always_inline)) inline void lanes_block_group(const int j0, const bool last, const int n_past,
                                                             __global const kv_t* kb, __global const kv_t* vb,
                                                             const float16 qv[GROUP][HV], float16 acc[GROUP][HV],
                                                             float m[GROUP], float s[GROUP]) {
  float sc[GROUP][DL];
#pragma unroll
  for (int k = 0; k < DL; ++k) {
    float16 kv[HV];
    block_row(kb, j0 + k, last, n_past, kv);
    const bool seen = !last || j0 + k <= n_past;
#pragma unroll
    for (int h = 0; h < GROUP; ++h) {
      float16 t = qv[h][0] * kv[0];
#pragma unroll
      for (int c = 1; c < HV; ++c) t = fma(qv[h][c], kv[c], t);
      sc[h][k] = seen ? sum16(t) : -INFINITY;
    }
  }
  float pk[GROUP][DL];
#pragma unroll
  for (int h = 0; h < GROUP; ++h) softmax_block(sc[h], &m[h], &s[h], acc[h], pk[h]);
#pragma unroll
  for (int k = 0; k < DL; ++k) {
    float16 vv[HV];
    block_row(vb, j0 + k, last, n_past, vv);
#pragma unroll
    for (int h = 0; h < GROUP; ++h)
#pragma unroll
      for (int c = 0; c < HV; ++c) acc[h][c] = fma((float16)(pk[h][k]), vv[c], acc[h][c]);
  }
}

// One query head's decode attention: its normalised output in res, its log-sum-exp returned.
inline float decode_lanes_head(const int head, __global const float* q, __global const kv_t* k_cache,
                               __global const kv_t* v_cache, const int cap, const int n_past, const float scale,
                               const int window, float16 res[HV]) {
  const int g = head / GROUP;
  float16 qv[HV], acc[HV];
  for (int c = 0; c < HV; ++c) {
    qv[c] = vload16(c, q + head * HEAD_DIM) * scale;
    acc[c] = (float16)(0.0f);
  }
  float m = -INFINITY, s = 0.0f;
  __global const kv_t* kb = k_cache + (size_t)g * cap * HEAD_DIM;
  __global const kv_t* vb = v_cache + (size_t)g * cap * HEAD_DIM;
  int j0 = max(0, n_past - window + 1);
  for (; j0 + DL - 1 <= n_past; j0 += DL) lanes_block(j0, false, n_past, kb, vb, qv, acc, &m, &s);
  if (j0 <= n_past) lanes_block(j0, true, n_past, kb, vb, qv, acc, &m, &s);
  const float inv = 1.0f / s;
  for (int c = 0; c < HV; ++c) res[c] = acc[c] * inv;
  return m + log(s);
}

__kernel void attention_decode_lanes(__global const float* q, __global const kv_t* k_cache,
                                     __global const kv_t* v_cache, const int cap, const int n_past,
                                     const float scale, __global float* out, __global float* lse,
                                     const int n_heads, const int window) {
  const int head = get_global_id(0);
  if (head >= n_heads) return;
  float16 res[HV];
  lse[head] = decode_lanes_head(head, q, k_cache, v_cache, cap, n_past, scale, window, res);
  for (int c = 0; c < HV; ++c) vstore16(res[c], c, out + head * HEAD_DIM);
}

// attention_decode_lanes_group with the window's 16-key blocks shared out among `splits`
// items per KV head (item = g * splits + p takes the p-th run of them), so that a device
// with more threads than KV heads keeps them all busy. With splits > 1 each item leaves its
// heads' partial softmax (m, s and the unnormalised sum of values) in part ([n_heads][splits]
// [HEAD_DIM + 2]), and a second launch, attention_decode_combine, merges them into out and
// lse: OpenCL 1.2 orders no global memory between the work-groups of one launch, so the
// merge waits for the launch boundary rather than for a counter.
// Item p of KV head g's `splits` (the body of attention_decode_lanes_group, which
// decode_layer.cl's attention step runs too): the same arithmetic wherever it is called.
__attribute__((always_inline)) inline void decode_lanes_group_item(
    const int g, const int p, const int splits, __global const float* q, __global const kv_t* k_cache,
    __global const kv_t* v_cache, const int cap, const int n_past, const float scale, __global float* out,
    __global float* lse, const int window, __global float* part) {
  float16 qv[GROUP][HV], acc[GROUP][HV];
  float m[GROUP], s[GROUP];
  for (int h = 0; h < GROUP; ++h) {
    for (int c = 0; c < HV; ++c) {
      qv[h][c] = vload16(c, q + (g * GROUP + h) * HEAD_DIM) * scale;
      acc[h][c] = (float16)(0.0f);
    }
    m[h] = -INFINITY;
    s[h] = 0.0f;
  }
  __global const kv_t* kb = k_cache + (size_t)g * cap * HEAD_DIM;
  __global const kv_t* vb = v_cache + (size_t)g * cap * HEAD_DIM;
  // Blocks of the window [first, n_past]: all whole but the last, which may pass n_past.
  const int first = max(0, n_past - window + 1), n_blocks = (n_past - first) / DL + 1;
  const int per = (n_blocks + splits - 1) / splits, b0 = min(p * per, n_blocks), b1 = min(b0 + per, n_blocks);
  for (int b = b0; b < min(b1, n_blocks - 1); ++b) lanes_block_group(first + b * DL, false, n_past, kb, vb, qv, acc, m, s);
  if (b0 < b1 && b1 == n_blocks) lanes_block_group(first + (n_blocks - 1) * DL, true, n_past, kb, vb, qv, acc, m, s);
  if (splits == 1) {
    for (int h = 0; h < GROUP; ++h) {
      const float inv = 1.0f / s[h];
      for (int c = 0; c < HV; ++c) vstore16(acc[h][c] * inv, c, out + (g * GROUP + h) * HEAD_DIM);
      lse[g * GROUP + h] = m[h] + log(s[h]);
    }
    return;
  }
  for (int h = 0; h < GROUP; ++h) {  // an item without blocks leaves m = -inf, s = 0, sums 0
    __global float* mine = part + ((size_t)(g * GROUP + h) * splits + p) * (HEAD_DIM + 2);
    mine[0] = m[h];
    mine[1] = s[h];
    for (int c = 0; c < HV; ++c) vstore16(acc[h][c], c, mine + 2);
  }
}

__kernel void attention_decode_lanes_group(__global const float* q, __global const kv_t* k_cache,
                                           __global const kv_t* v_cache, const int cap, const int n_past,
                                           const float scale, __global float* out, __global float* lse,
                                           const int n_heads, const int window, const int splits,
                                           __global float* part) {
  const int g = get_global_id(0) / splits, p = get_global_id(0) % splits;
  if (g >= n_heads / GROUP) return;
  decode_lanes_group_item(g, p, splits, q, k_cache, v_cache, cap, n_past, scale, out, lse, window, part);
}

// Query head `head`'s `splits` partial softmaxes (part, as decode_lanes_group_item leaves
// them) merged into its normalised output and log-sum-exp (the body of
// attention_decode_combine, which decode_layer.cl's merge step runs too).
__attribute__((always_inline)) inline void decode_combine_head(const int head, const int splits,
                                                               __global const float* part, __global float* out,
                                                               __global float* lse) {
  __global const float* ph = part + (size_t)head * splits * (HEAD_DIM + 2);
  float mx = -INFINITY;
  for (int i = 0; i < splits; ++i) mx = fmax(mx, ph[i * (HEAD_DIM + 2)]);  // finite: slot n_past is seen
  float sum = 0.0f;
  float16 o[HV];
  for (int c = 0; c < HV; ++c) o[c] = (float16)(0.0f);
  for (int i = 0; i < splits; ++i) {
    __global const float* pi = ph + i * (HEAD_DIM + 2);
    const float w = exp(pi[0] - mx);  // 0 for an item without blocks
    sum = fma(pi[1], w, sum);
    for (int c = 0; c < HV; ++c) o[c] = fma(vload16(c, pi + 2), (float16)(w), o[c]);
  }
  const float inv = 1.0f / sum;
  for (int c = 0; c < HV; ++c) vstore16(o[c] * inv, c, out + head * HEAD_DIM);
  lse[head] = mx + log(sum);
}

// The second launch of a split decode row: one work-item per query head.
__kernel void attention_decode_combine(const int n_heads, const int splits, __global const float* part,
                                       __global float* out, __global float* lse) {
  const int head = get_global_id(0);
  if (head >= n_heads) return;
  decode_combine_head(head, splits, part, out, lse);
}

#endif

// Attention mass the query rows [r0, r1) of a chunk pay to each KV entry, summed over the
// GROUP query heads of each KV head (the Catalyst-Prompt score of InfiniPot, Eq. 2):
//   mass[g][j] += sum_{i in [r0,r1), j <= n_past+i < j + window} sum_{h in group g} exp(q_ih . k_gj * scale - lse[i][h])
//   mass: [n_kv_heads][cap]
// One work-item per (entry j, KV head g), so the sum is deterministic (no atomics).
__kernel void attention_mass(__global const float* q, const int ldq, __global const kv_t* k_cache,
                             const int cap, const int n_past, const int r0, const int r1, const float scale,
                             __global const float* lse, const int n_heads, __global float* mass, const int mass_off,
                             const int window) {
  const int j = get_global_id(0);
  const int g = get_global_id(1);
  if (j > n_past + r1 - 1) return;
  float4 kv[V4];
  for (int d = 0; d < V4; ++d) kv[d] = KV_LOAD4(d, k_cache + ((size_t)g * cap + j) * HEAD_DIM);
  float total = 0.0f;
  for (int i = max(r0, j - n_past); i < min(r1, j - n_past + window); ++i) {
    for (int h = 0; h < GROUP; ++h) {
      const int head = g * GROUP + h;
      __global const float* qr = q + (size_t)i * ldq + head * HEAD_DIM;
      float4 t = vload4(0, qr) * kv[0];
      for (int d = 1; d < V4; ++d) t = fma(vload4(d, qr), kv[d], t);
      total += exp(((t.x + t.y) + (t.z + t.w)) * scale - lse[(size_t)i * n_heads + head]);
    }
  }
  mass[mass_off + (size_t)g * cap + j] += total;
}

// The same sums for 16 consecutive entries per work-item (keys in the lanes of float16
// vectors), for CPU devices (tuning attention_vec16): the kernel above computes one entry's
// 64-float dot product per row and head, with a horizontal sum and a scalar exp each, at a
// fraction of the FMA rate. Each lane repeats that kernel's arithmetic: four partial sums (the
// float4 lanes there, dims d = 4c + l here), each a product then fused multiply-adds over c in
// order, added as (0 + 1) + (2 + 3), then scaled, exp'd and summed over rows and heads in the
// same order; rows outside a lane's causal window add nothing. Only the exp differs: the
// driver's vector exp, which on PoCL 3.1 rounds a rare input 1 ulp away from its scalar one. The block's keys
// are transposed once into private memory ([HEAD_DIM][16] floats) and reused for every row.
// Launch: global (ceil((n_past + r1) / 16), n_kv_heads).
__kernel void attention_mass_vec16(__global const float* q, const int ldq, __global const kv_t* k_cache,
                                   const int cap, const int n_past, const int r0, const int r1, const float scale,
                                   __global const float* lse, const int n_heads, __global float* mass,
                                   const int mass_off, const int window) {
  const int j0 = get_global_id(0) * 16;
  const int g = get_global_id(1);
  const int jmax = n_past + r1 - 1;  // the last entry any row of [r0, r1) sees
  if (j0 > jmax) return;
  float kt[HEAD_DIM * 16];  // kt[d * 16 + lane] = K[j0 + lane][d]
  for (int lane = 0; lane < 16; ++lane) {
    __global const kv_t* kr = k_cache + ((size_t)g * cap + min(j0 + lane, jmax)) * HEAD_DIM;
    for (int d = 0; d < V4; ++d) {
      const float4 v = KV_LOAD4(d, kr);
      kt[(4 * d) * 16 + lane] = v.x;
      kt[(4 * d + 1) * 16 + lane] = v.y;
      kt[(4 * d + 2) * 16 + lane] = v.z;
      kt[(4 * d + 3) * 16 + lane] = v.w;
    }
  }
  const int16 jv = (int16)(j0) + (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int i_lo = max(r0, j0 - n_past);
  const int i_hi = min(r1, min(j0 + 15, jmax) - n_past + window);  // past the last row any lane counts
  float16 total = (float16)(0.0f);
  for (int i = i_lo; i < i_hi; ++i) {
    const int16 counted = (jv <= (int16)(n_past + i)) & (jv > (int16)(n_past + i - window));
    for (int h = 0; h < GROUP; ++h) {
      const int head = g * GROUP + h;
      __global const float* qr = q + (size_t)i * ldq + head * HEAD_DIM;
      float16 a0 = qr[0] * vload16(0, kt), a1 = qr[1] * vload16(1, kt);
      float16 a2 = qr[2] * vload16(2, kt), a3 = qr[3] * vload16(3, kt);
      for (int c = 1; c < V4; ++c) {
        a0 = fma((float16)(qr[4 * c]), vload16(4 * c, kt), a0);
        a1 = fma((float16)(qr[4 * c + 1]), vload16(4 * c + 1, kt), a1);
        a2 = fma((float16)(qr[4 * c + 2]), vload16(4 * c + 2, kt), a2);
        a3 = fma((float16)(qr[4 * c + 3]), vload16(4 * c + 3, kt), a3);
      }
      const float16 e = exp(((a0 + a1) + (a2 + a3)) * scale - lse[(size_t)i * n_heads + head]);
      total += select((float16)(0.0f), e, counted);
    }
  }
  float t[16];
  vstore16(total, 0, t);
  __global float* m = mass + mass_off + (size_t)g * cap;
  for (int lane = 0; lane < 16 && j0 + lane <= jmax; ++lane) m[j0 + lane] += t[lane];
}

// The same attention with the keys and values staged in local memory, tile by tile, for a
// work-group of TILE_ROWS consecutive query rows (-D TILE_ROWS, KEY_TILE). Each tile is read
// from global memory once per work-group instead of once per row, which matters once the
// context no longer fits in cache (long prefill); on GPUs it is the usual shared-memory tiling.
// Launch: global (round_up(n, TILE_ROWS), n_kv_heads), local (TILE_ROWS, 1). KEY_TILE is a
// multiple of 16.
#ifdef TILE_ROWS
__kernel __attribute__((reqd_work_group_size(TILE_ROWS, 1, 1)))
void attention_tiled(__global const float* q, const int ldq, __global const kv_t* k_cache,
                     __global const kv_t* v_cache, const int cap, const int n_past, const int n,
                     const float scale, __global float* out, const int ldo, __global float* lse,
                     const int n_heads, const int window) {
  __local float4 ks[KEY_TILE * V4];
  __local float4 vs[KEY_TILE * V4];
  const int lid = get_local_id(0);
  const int row0 = get_group_id(0) * TILE_ROWS;
  const int i = row0 + lid;
  const int g = get_group_id(1);
  const bool active = i < n;
  const int limit = active ? n_past + i : -1;                        // last slot this row sees
  const int group_limit = n_past + min(row0 + TILE_ROWS, n) - 1;     // last slot any row sees
  const int first = max(0, limit - window + 1);                      // first slot this row sees
  const int group_first = max(0, n_past + row0 - window + 1);        // first slot any row sees
  float4 qv[GROUP][V4];
  float4 acc[GROUP][V4];
  float m[GROUP], s[GROUP];
  start_rows(qv, acc, m, s, q + (size_t)(active ? i : 0) * ldq + g * GROUP * HEAD_DIM, scale);
  __global const kv_t* kb = k_cache + (size_t)g * cap * HEAD_DIM;
  __global const kv_t* vb = v_cache + (size_t)g * cap * HEAD_DIM;
  for (int j0 = group_first; j0 <= group_limit; j0 += KEY_TILE) {
    for (int e = lid; e < KEY_TILE * V4; e += TILE_ROWS) {
      const int j = j0 + e / V4;
      ks[e] = j <= group_limit ? KV_LOAD4(e % V4, kb + (size_t)j * HEAD_DIM) : (float4)(0.0f);
      vs[e] = j <= group_limit ? KV_LOAD4(e % V4, vb + (size_t)j * HEAD_DIM) : (float4)(0.0f);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int jend = min(KEY_TILE, limit - j0 + 1);
    if (jend > 0 && j0 + KEY_TILE > first) {  // some key of the tile is in this row's window
      // Scores of the whole tile first, then one max and one vector exp per head: the exps
      // run 16 lanes wide instead of one key at a time.
      float p[GROUP][KEY_TILE];
      for (int h = 0; h < GROUP; ++h) {
        for (int jj = 0; jj < KEY_TILE; ++jj) {
          float4 t = qv[h][0] * ks[jj * V4];
          for (int d = 1; d < V4; ++d) t = fma(qv[h][d], ks[jj * V4 + d], t);
          p[h][jj] = jj < jend && j0 + jj >= first ? (t.x + t.y) + (t.z + t.w) : -INFINITY;
        }
        float tile_max = p[h][0];
        for (int jj = 1; jj < jend; ++jj) tile_max = fmax(tile_max, p[h][jj]);
        const float m_new = fmax(m[h], tile_max);
        const float corr = exp(m[h] - m_new);
        s[h] *= corr;
        for (int d = 0; d < V4; ++d) acc[h][d] *= corr;
        m[h] = m_new;
        float16 sum = (float16)(0.0f);
        for (int b = 0; b < KEY_TILE / 16; ++b) {
          const float16 e = exp(vload16(b, p[h]) - m_new);
          vstore16(e, b, p[h]);
          sum += e;
        }
        s[h] += sum16(sum);
      }
      for (int jj = 0; jj < jend; ++jj)
        for (int d = 0; d < V4; ++d) {
          const float4 vv = vs[jj * V4 + d];
          for (int h = 0; h < GROUP; ++h) acc[h][d] = fma((float4)(p[h][jj]), vv, acc[h][d]);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!active) return;
  write_rows(acc, m, s, g, i, out, ldo, lse, n_heads);
}
#endif

// The same attention for CPU devices (-D VEC16; HEAD_DIM a multiple of DB): one work-item per
// (VEC_ROWS consecutive query rows, query head), VEC_ROWS = 4, 8 or 16, each row one lane of a
// vector. Scores, the online softmax and the output are kept transposed (lane r = row i0 + r),
// so a key's scores against all the rows are fused multiply-adds with the key's elements
// broadcast, the way gemm_packed multiplies: no horizontal sum per (row, key), and the
// softmax's max, exps and rescaling are lane-wise. On PoCL (2-core AVX2 EPYC) this ran
// SmolLM2's and Gemma 3's prefill attention about twice as fast as a work-item per row with
// the head's 64 floats in float16 vectors (docs/benchmarks.md).
//   qt[d]   = (q[i0][d], .., q[i0 + VEC_ROWS - 1][d]) * scale       (transposed once)
//   sc[k]   = sum_d K[j0 + k][d] * qt[d]                             (KB keys at a time)
//   acct[d] = acct[d] * corr + sum_k p[k] * V[j0 + k][d]             (DB dims at a time)
// The small loops are unrolled so that their vectors stay in registers (PoCL's LLVM keeps
// them in memory otherwise, at half the speed). Blocks of SB keys start on multiples of SB
// from slot 0, so a row's sums do not depend on which work-item holds it: a block past a
// row's last slot (or before its window) adds exp(-inf) = 0 and rescales by exp(0) = 1,
// which changes no bit, so VEC_ROWS changes no bit of the output.
// Launch: global (ceil(n / VEC_ROWS), n_heads), any local size.
#ifdef VEC16
#if VEC_ROWS == 16
typedef float16 rowv;
typedef int16 rowi;
#define LANE_INDEX (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#elif VEC_ROWS == 8
typedef float8 rowv;
typedef int8 rowi;
#define LANE_INDEX (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#elif VEC_ROWS == 4
typedef float4 rowv;
typedef int4 rowi;
#define LANE_INDEX (int4)(0, 1, 2, 3)
#else
#error "compile attention_vec16 with -DVEC_ROWS=4, 8 or 16"
#endif
#define SB 16  // keys per softmax block
#define KB 4   // keys scored together: 4 accumulators (8 AVX2 registers at 16 rows)
#define DB 4   // output dims accumulated together
__kernel void attention_vec16(__global const float* q, const int ldq, __global const kv_t* k_cache,
                              __global const kv_t* v_cache, const int cap, const int n_past, const int n,
                              const float scale, __global float* out, const int ldo, __global float* lse,
                              const int n_heads, const int window) {
  const int i0 = get_global_id(0) * VEC_ROWS;
  const int head = get_global_id(1);
  if (i0 >= n) return;
  const int rows = min(VEC_ROWS, n - i0);  // the last work-item may hold fewer rows
  const int g = head / GROUP;
  rowv qt[HEAD_DIM], acct[HEAD_DIM];
  float* qf = (float*)qt;
  for (int r = 0; r < VEC_ROWS; ++r) {  // lanes past `rows` repeat the last row, never written
    __global const float* qr = q + (size_t)(i0 + min(r, rows - 1)) * ldq + head * HEAD_DIM;
    for (int d = 0; d < HEAD_DIM; ++d) qf[d * VEC_ROWS + r] = qr[d] * scale;
  }
  for (int d = 0; d < HEAD_DIM; ++d) acct[d] = (rowv)(0.0f);
  rowv m = (rowv)(-INFINITY), s = (rowv)(0.0f);
  const rowi limit = (rowi)(n_past + i0) + LANE_INDEX;  // lane r sees slots (outside, limit]
  const rowi outside = limit - (rowi)(window);  // the last slot before its window
  const int last = n_past + i0 + rows - 1;                // the last slot any row sees
  const int start = max(0, n_past + i0 - window + 1) / SB * SB;
  __global const kv_t* kb = k_cache + (size_t)g * cap * HEAD_DIM;
  __global const kv_t* vb = v_cache + (size_t)g * cap * HEAD_DIM;
  for (int j0 = start; j0 <= last; j0 += SB) {
    // Scores of SB keys; a key past `last` reads slot `last` and is masked, so no branch per key.
    rowv sc[SB];
#pragma unroll
    for (int k0 = 0; k0 < SB; k0 += KB) {
      __global const kv_t* kr[KB];
      rowv a[KB];
#pragma unroll
      for (int k = 0; k < KB; ++k) {
        kr[k] = kb + (size_t)min(j0 + k0 + k, last) * HEAD_DIM;
        a[k] = (rowv)(0.0f);
      }
      for (int d = 0; d < HEAD_DIM; ++d) {
        const rowv qd = qt[d];
#pragma unroll
        for (int k = 0; k < KB; ++k) a[k] = fma((rowv)(KV_LOAD(kr[k] + d)), qd, a[k]);
      }
#pragma unroll
      for (int k = 0; k < KB; ++k) {
        const rowi j = (rowi)(j0 + k0 + k);
        sc[k0 + k] = select((rowv)(-INFINITY), a[k], (j <= limit) & (j > outside));
      }
    }
    // Online softmax, lane-wise. A row that has seen no key yet keeps max -inf: its exps are
    // taken against 0, giving 0 rather than NaN.
    rowv bm = m;
#pragma unroll
    for (int k = 0; k < SB; ++k) bm = fmax(bm, sc[k]);
    const rowv base = select(bm, (rowv)(0.0f), bm == (rowv)(-INFINITY));
    const rowv corr = exp(m - base);
    rowv sum = (rowv)(0.0f);
#pragma unroll
    for (int k = 0; k < SB; ++k) {
      sc[k] = exp(sc[k] - base);
      sum += sc[k];
    }
    s = s * corr + sum;
    m = bm;
    __global const kv_t* vr[SB];
#pragma unroll
    for (int k = 0; k < SB; ++k) vr[k] = vb + (size_t)min(j0 + k, last) * HEAD_DIM;
    for (int d0 = 0; d0 < HEAD_DIM; d0 += DB) {
      rowv o[DB];
#pragma unroll
      for (int d = 0; d < DB; ++d) o[d] = acct[d0 + d] * corr;
#pragma unroll
      for (int k = 0; k < SB; ++k)
#pragma unroll
        for (int d = 0; d < DB; ++d) o[d] = fma(sc[k], (rowv)(KV_LOAD(vr[k] + d0 + d)), o[d]);
#pragma unroll
      for (int d = 0; d < DB; ++d) acct[d0 + d] = o[d];
    }
  }
  const rowv inv = 1.0f / s;
  const rowv row_lse = m + log(s);
  for (int d = 0; d < HEAD_DIM; ++d) acct[d] *= inv;
  const float* of = (const float*)acct;
  const float* lf = (const float*)&row_lse;
  for (int r = 0; r < rows; ++r) {
    __global float* o = out + (size_t)(i0 + r) * ldo + head * HEAD_DIM;
    for (int d = 0; d < HEAD_DIM; ++d) o[d] = of[d * VEC_ROWS + r];
    lse[(size_t)(i0 + r) * n_heads + head] = lf[r];
  }
}
#endif
