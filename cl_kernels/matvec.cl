// Quantized matrix-vector products for decode (needs quant_formats.cl, activations.cl,
// kv_format.cl, vector_reduce.cl, rope.cl).
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
//   BIAS: bias[o] ([n_out] float) added to each output o before the epilogue (Qwen2's q|k|v
//         biases, so that RoPE rotates the biased sums); not with GLU.
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

inline float sum_of_squares(__global const float* xr, const int K) {
  float16 sq = (float16)(0.0f);
  for (int b = 0; b < K / 32; ++b) {
    const float16 xl = (float16)(x8(xr, 4 * b), x8(xr, 4 * b + 1));
    const float16 xh = (float16)(x8(xr, 4 * b + 2), x8(xr, 4 * b + 3));
    sq = fma(xl, xl, fma(xh, xh, sq));
  }
  for (int k = (K / 32) * 32; k < K; k += 8) {
    const float8 xv = x8(xr, k / 8);
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
#ifdef BIAS
                     , __global const float* bias
#endif
#ifdef ROPE_KV
                     , __global const float2* cs, const int head_dim, const int n_rot, const int n_head,
                     const int n_kv_heads, __global kv_t* k_cache, __global kv_t* v_cache, const int cap,
                     const int slot0
#endif
                     ) {
  const int o0 = get_global_id(0) * OUTS;
  const int r = get_global_id(1);  // the same for the whole work-group (local size 1 in dim 1)
  __global const float* xr = x + (size_t)r * K;
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
    for (int k8 = get_local_id(0); k8 < K / 8; k8 += get_local_size(0)) xs8[k8] = x8(xr, k8) * x8(nw, k8);
  barrier(CLK_LOCAL_MEM_FENCE);
#else
  __global const float* xs = xr;
#endif
  if (o0 >= n_out || r >= n_rows) return;
  const int no = min(OUTS, n_out - o0);  // live outputs; row i is live when i % OUTS < no
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
#ifdef BIAS
#if defined(GLU)
#error "BIAS adds one bias per output row: not with GLU's paired rows"
#endif
  for (int i = 0; i < no; ++i) s[i] += bias[o0 + i];  // before RoPE, as the model adds it
#endif
#ifdef ROPE_KV
  // rope.cl's epilogue, on the sums before they are stored (ROWS == 4: whole pairs of one head).
  rope_store_rows4(s, o0, cs + r * (n_rot / 2), head_dim, n_rot, n_head * head_dim, n_kv_heads, k_cache, v_cache,
                   cap, slot0 + r);
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
