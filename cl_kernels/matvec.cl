// Quantized matrix-vector products for decode (needs quant_formats.cl, activations.cl,
// kv_format.cl, vector_reduce.cl).
//   W: [n_out rows][row_bytes] (ggml blocks)   x: [n_rows][K] float   y: [n_rows][ldy] float from y_off
//   y[r][o] (+)= sum_k W[o][k] * x[r][k]          (K a multiple of 8; of 32 for block formats)
// One work-item computes ROWS consecutive outputs of one input row (global dim 1), one weight
// row after the other (x stays in the L1 cache between them). ACCUM (-D): add into y (fused
// residual add).
//
// Decode fusions (-D), each removing a launch and a round trip of an activation through memory:
//   NORM (with NORM_K = K): x is read as RMSNorm(x[r]) * nw (nw: [K] float, eps): each
//         work-group first writes x[r] * nw into local memory (its rows all read one input
//         row), and the row's 1 / rms scales each finished dot product (a per-row scalar
//         factors out of it), so no normed copy of x goes through global memory and no launch
//         of its own. Every work-item recomputes the sum of squares (K floats it reads anyway).
//   GLU=1 (SiLU) or GLU=2 (GELU-tanh): a gate|up product with its activation. A work-item
//         computes OUTS = 2 outputs: its 4 accumulator rows are gate rows o0, o0+1 of W and up
//         rows up_row0 + o0, +1 of Wu (the same matrix with up_row0 = n_out when gate|up is
//         fused, else the up weight with up_row0 = 0; same encoding and row_bytes), then
//         y[r][o] = act(gate) * up. n_out is n_ff; y's ldy is n_ff.
//   ROPE_KV: the fused q|k|v product with rope_store_kv's work (rope.cl) as its epilogue: W's
//         rows are n_head q heads, n_kv_heads k heads, n_kv_heads v heads of head_dim rows
//         (head_dim % 4 == 0, so a work-item's 4 rows are RoPE pairs (2j, 2j+1), (2j+2, 2j+3)
//         of one head, adjacent after the loader's reorder); q and k rows are rotated by the
//         angles cs[r] ([n_rows][n_rot/2] (cos, sin)) before they are written, and k and v rows
//         also go to slot slot0 + r of their head in k_cache / v_cache ([n_kv_heads][cap][head_dim]).
//   PARTS (with NORM): the input row is x[r] + sum_p parts[p][r] (parts: [n_parts][n_rows][K],
//         the split sums of the previous launch: attention's Wo shares, or DOWN_PARTS'), added
//         once per work-group into local memory in that order; the first work-group writes the
//         sum to x_out[r] ([n_rows][K], another buffer than x) as the new residual row.
//   DOWN_PARTS (with GLU, W's rows the gate|up pair; -DDOWN_LOCAL = the work-group size, with
//         OUTS * DOWN_LOCAL a multiple of 32): the feed-forward block in one launch. Each
//         work-group keeps its OUTS * DOWN_LOCAL activations (features f0 .. f0 + 2L) in local
//         memory and multiplies them by those columns of Wd (n_embd rows of n_out = n_ff
//         columns, W's encoding): parts[group][r][o] = sum_{f in the group's} Wd[o][f] act[r][f],
//         so that Wd . act is the sum over the groups, which the next launch adds (PARTS).
// NATIVE_DOT (with NATIVE_K = K, a multiple of 32; Q4_0, Q4_1, Q8_0 weights): the work-group
//         quantizes the input row (times nw under NORM, each block's sum of squares beside it)
//         to 8 bits per block in local memory, and each row's dot product runs in the CPU's
//         8-bit dot instruction (native_dot.cl).
// Wu, up_row0, nw, eps are ignored by the variants that do not use them.
#define ROWS 4  // weight rows per work-item
#ifdef GLU
#define OUTS 2  // gate rows 0, 1 and up rows 2, 3
#else
#define OUTS ROWS
#endif

// x and nw as 8-float vectors through aligned pointers: a row of x starts 32-byte aligned
// (every cl_mem is aligned to the device's base address alignment, at least 128 bytes, and
// K % 8 == 0), as does nw. PoCL 3.1 split vload16(x) * vload16(nw) into 2-float pieces (32
// loads and multiplies per block), which made each normed product 1.5-2.5x slower.
inline float8 x8(__global const float* p, int i) { return ((__global const float8*)p)[i]; }

// The products' input row: x[r] in global memory, or under NORM x[r] * nw in local memory.
#ifdef NORM
#ifndef NORM_K
#error "matvec.cl: NORM needs NORM_K, the input width (the size of the work-group's local copy)"
#endif
#define XSPACE __local
#else
#define XSPACE __global
#endif
inline float8 xin8(XSPACE const float* p, int i) { return ((XSPACE const float8*)p)[i]; }

// The row the work-group reads (x[r], or under PARTS the local sum of x[r] and the parts).
#ifdef PARTS
#ifndef NORM
#error "matvec.cl: PARTS needs NORM (the products of a residual row are normed)"
#endif
#define RSPACE __local
#else
#define RSPACE __global
#endif
inline float8 r8(RSPACE const float* p, int i) { return ((RSPACE const float8*)p)[i]; }

// Elements 32b .. 32b + 31 of the input row: elements 0-15 in xl, 16-31 in xh.
inline void x_block(XSPACE const float* xr, int b, float16* xl, float16* xh) {
  *xl = (float16)(xin8(xr, 4 * b), xin8(xr, 4 * b + 1));
  *xh = (float16)(xin8(xr, 4 * b + 2), xin8(xr, 4 * b + 3));
}

// w[0..K) . x, in 16 lanes that the caller sums.
inline float16 row_dot(__global const uchar* w, const int row_bytes, XSPACE const float* xr, const int K) {
  float16 acc = (float16)(0.0f);
  const int nb = K / 32;
  int b = 0;
#if WTYPE == T_Q4_0 || WTYPE == T_Q4_1
  // Scales-first rows: the scales of the next Q4_GROUP blocks (8 halves) convert as one
  // vector, where block_fma reads and converts each block's on its own.
  for (; b + Q4_GROUP <= nb; b += Q4_GROUP) {
    PREFETCH_AHEAD(q4_quants(w, nb, b));
    float sc[8];
    vstore8(halves_to_float8(convert_uint8(vload8(0, (__global const ushort*)q4_scales(w, b)))), 0, sc);
    for (int j = 0; j < Q4_GROUP; ++j) {
      float16 xl, xh;
      x_block(xr, b + j, &xl, &xh);
      acc = q4_fma(vload16(0, q4_quants(w, nb, b + j)), sc[j * Q4_HALVES], sc[j * Q4_HALVES + Q4_HALVES - 1], xl, xh,
                   acc);
    }
  }
#elif WTYPE == T_Q8_0
  // The scales of Q8_GROUP blocks convert as one vector, where block_fma converts each
  // block's on its own (`perf annotate` had the scalar conversion all over the LM head's loop).
  for (; b + Q8_GROUP <= nb; b += Q8_GROUP) {
    __global const uchar* blk = q8_block(w, b);
    PREFETCH_AHEAD(blk);
    PREFETCH_AHEAD(blk + 2 * Q8_0_BYTES);
    float d[Q8_GROUP];
    vstore4(q8_scales4(blk), 0, d);
    for (int j = 0; j < Q8_GROUP; ++j) {
      float16 xl, xh;
      x_block(xr, b + j, &xl, &xh);
      acc = q8_fma((__global const char*)(q8_block(w, b + j) + 2), d[j], xl, xh, acc);
    }
  }
#endif
  // Every other 32-element block (34 bytes of Q8_0, 18-26 of the K-quants, 64 of F16 ...) is
  // a cache line or more ahead; row_bytes / nb rounds the K-quants' bytes per block down.
  const int block_bytes = nb > 0 ? row_bytes / nb : 0;
  for (; b < nb; ++b) {
    if ((b & 1) == 0) PREFETCH_AHEAD(w + b * block_bytes);
    float16 xl, xh;
    x_block(xr, b, &xl, &xh);
    acc = block_fma(w, b, nb, xl, xh, acc);
  }
  // Tail of F32/F16 rows whose length is not a multiple of 32 (block formats have none).
  for (int k = (K / 32) * 32; k < K; k += 8) {
    acc.lo = fma(load8(w, k, K), xin8(xr, k / 8), acc.lo);
  }
  return acc;
}

inline float sum_of_squares(RSPACE const float* xr, const int K) {
  float16 sq = (float16)(0.0f);
  for (int b = 0; b < K / 32; ++b) {
    const float16 xl = (float16)(r8(xr, 4 * b), r8(xr, 4 * b + 1));
    const float16 xh = (float16)(r8(xr, 4 * b + 2), r8(xr, 4 * b + 3));
    sq = fma(xl, xl, fma(xh, xh, sq));
  }
  for (int k = (K / 32) * 32; k < K; k += 8) {
    const float8 xv = r8(xr, k / 8);
    sq.lo = fma(xv, xv, sq.lo);
  }
  return sum16(sq);
}

// Weight row i (< ROWS) of the work-item whose first output is o0.
inline __global const uchar* row_of(__global const uchar* W, __global const uchar* Wu, const int up_row0,
                                    const int row_bytes, const int o0, const int i) {
#ifdef GLU
  if (i >= OUTS) return Wu + (size_t)(up_row0 + o0 + i - OUTS) * row_bytes;
#endif
  return W + (size_t)(o0 + i) * row_bytes;
}

__kernel void matvec(__global const uchar* W, const int row_bytes, const int n_out, const int K,
                     __global const float* x, const int n_rows, __global float* y, const int y_off, const int ldy,
                     __global const uchar* Wu, const int up_row0, __global const float* nw, const float eps
#ifdef ROPE_KV
                     , __global const float2* cs, const int head_dim, const int n_rot, const int n_head,
                     const int n_kv_heads, __global kv_t* k_cache, __global kv_t* v_cache, const int cap,
                     const int slot0
#endif
#ifdef PARTS
                     , __global const float* parts, const int n_parts, __global float* x_out
#endif
#ifdef DOWN_PARTS
                     , __global const uchar* Wd, const int wd_row_bytes, const int n_embd, __global float* down_parts
#endif
                     ) {
  const int o0 = get_global_id(0) * OUTS;
  const int r = get_global_id(1);  // the same for the whole work-group (local size 1 in dim 1)
#ifdef PARTS
  // x[r] + the parts, once per work-group, before any item returns.
  __local float8 xp8[NORM_K / 8];
  __local const float* xr = (__local const float*)xp8;
  if (r < n_rows) {
    __global const float* xg = x + (size_t)r * K;
    for (int k8 = get_local_id(0); k8 < K / 8; k8 += get_local_size(0)) {
      float8 v = x8(xg, k8);
      for (int p = 0; p < n_parts; ++p) v += x8(parts + ((size_t)p * n_rows + r) * K, k8);
      xp8[k8] = v;
      if (get_group_id(0) == 0) ((__global float8*)(x_out + (size_t)r * K))[k8] = v;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#else
  __global const float* xr = x + (size_t)r * K;
#endif
#if defined(NATIVE_DOT)
  // The input row in 8 bits, once per work-group, before any item returns.
  const int nb = NATIVE_NB;  // K / 32
  __local int xq[(NATIVE_NB + NATIVE_UNIT) * 8];
  __local float xd[NATIVE_NB + NATIVE_UNIT], xsum[NATIVE_NB + NATIVE_UNIT], ssq[NATIVE_NB + NATIVE_UNIT];
  if (r < n_rows)
    for (int b = get_local_id(0); b < native_padded_blocks(nb); b += get_local_size(0))
      native_quantize_block(xr, nw, b, nb, xq, xd, xsum, ssq);
  barrier(CLK_LOCAL_MEM_FENCE);
#elif defined(NORM)
  // x[r] * nw, once per work-group, before any item returns (every item reaches the barrier).
  __local float8 xs8[NORM_K / 8];
  __local const float* xs = (__local const float*)xs8;
  if (r < n_rows)
    for (int k8 = get_local_id(0); k8 < K / 8; k8 += get_local_size(0)) xs8[k8] = r8(xr, k8) * x8(nw, k8);
  barrier(CLK_LOCAL_MEM_FENCE);
#else
  __global const float* xs = xr;
#endif
  const bool live = o0 < n_out && r < n_rows;
#ifndef DOWN_PARTS
  if (!live) return;
#endif
  const int no = live ? min(OUTS, n_out - o0) : 0;  // live outputs; row i is live when i % OUTS < no
  // One row after the other, each read front to back: a work-item's rows are adjacent, so
  // its reads (and its work-group's) form one ascending stream that the hardware prefetcher
  // follows; four rows read side by side are four streams of a few cache lines each, too
  // short to train it (decode then waits on memory). x stays in the L1 cache between rows.
  float s[ROWS];
  for (int i = 0; i < ROWS; ++i)
#ifdef NATIVE_DOT
    s[i] = i % OUTS < no ? native_row_dot(row_of(W, Wu, up_row0, row_bytes, o0, i), xq, xd, xsum) : 0.0f;
#else
    s[i] = i % OUTS < no ? sum16(row_dot(row_of(W, Wu, up_row0, row_bytes, o0, i), row_bytes, xs, K)) : 0.0f;
#endif
#if defined(NORM) && defined(NATIVE_DOT)
  const float inv_rms = rsqrt(native_sum_squares(ssq, nb) / (float)K + eps);
  for (int i = 0; i < ROWS; ++i) s[i] *= inv_rms;
#elif defined(NORM)
  const float inv_rms = rsqrt(sum_of_squares(xr, K) / (float)K + eps);
  for (int i = 0; i < ROWS; ++i) s[i] *= inv_rms;
#endif
#ifdef ROPE_KV
  // The same arithmetic as rope_store_kv, on the sums before they are stored.
  const int q_rows = n_head * head_dim, qk_rows = q_rows + n_kv_heads * head_dim, d = o0 % head_dim;
  if (o0 < qk_rows)
    for (int p = 0; p < 2; ++p) {
      const int j = d / 2 + p;
      if (2 * j < n_rot) {
        const float2 c = cs[r * (n_rot / 2) + j];
        const float x0 = s[2 * p], x1 = s[2 * p + 1];
        s[2 * p] = x0 * c.x - x1 * c.y;
        s[2 * p + 1] = x0 * c.y + x1 * c.x;
      }
    }
  if (o0 >= q_rows) {
    const bool is_k = o0 < qk_rows;
    const int g = (o0 - (is_k ? q_rows : qk_rows)) / head_dim;
    __global kv_t* dst = (is_k ? k_cache : v_cache) + ((size_t)g * cap + slot0 + r) * head_dim + d;
    for (int i = 0; i < ROWS; ++i) KV_STORE(s[i], dst + i);
  }
#endif
#ifdef DOWN_PARTS
  __local float act_l[OUTS * DOWN_LOCAL];  // the group's activations, features f0 ..
  for (int i = 0; i < OUTS; ++i)
#if GLU == 1
    act_l[get_local_id(0) * OUTS + i] = i < no ? silu(s[i]) * s[i + OUTS] : 0.0f;
#else
    act_l[get_local_id(0) * OUTS + i] = i < no ? gelu_tanh(s[i]) * s[i + OUTS] : 0.0f;
#endif
  barrier(CLK_LOCAL_MEM_FENCE);
  if (r >= n_rows) return;
  const int nbd = n_out / 32, b0 = get_group_id(0) * (OUTS * DOWN_LOCAL / 32);
  __global float* part = down_parts + ((size_t)get_group_id(0) * n_rows + r) * n_embd;
  for (int o = get_local_id(0); o < n_embd; o += DOWN_LOCAL) {
    __global const uchar* row = Wd + (size_t)o * wd_row_bytes;
    float16 acc = (float16)(0.0f);
    for (int j = 0; j < OUTS * DOWN_LOCAL / 32 && b0 + j < nbd; ++j)
      acc = block_fma(row, b0 + j, nbd, vload16(0, act_l + 32 * j), vload16(0, act_l + 32 * j + 16), acc);
    part[o] = sum16(acc);
  }
  return;
#endif
  __global float* yr = y + y_off + (size_t)r * ldy + o0;
  for (int i = 0; i < no; ++i) {
#if GLU == 1
    yr[i] = silu(s[i]) * s[i + OUTS];
#elif GLU == 2
    yr[i] = gelu_tanh(s[i]) * s[i + OUTS];
#elif defined(ACCUM)
    yr[i] += s[i];
#else
    yr[i] = s[i];
#endif
  }
}
