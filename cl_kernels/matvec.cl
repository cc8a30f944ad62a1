// Quantized matrix-vector products for decode (needs quant_formats.cl, activations.cl).
//   W: [n_out rows][row_bytes] (ggml blocks)   x: [n_rows][K] float   y: [n_rows][ldy] float from y_off
//   y[r][o] (+)= sum_k W[o][k] * x[r][k]          (K a multiple of 8; of 32 for block formats)
// One work-item computes ROWS consecutive outputs of one input row (global dim 1), reading x
// once per block for all of them. ACCUM (-D): add into y (fused residual add).
//
// Decode fusions (-D), each removing a launch and a round trip of an activation through memory:
//   NORM: x is read as RMSNorm(x[r]) * nw (nw: [K] float, eps): the sum of squares of x[r] is
//         accumulated in the same pass that reads x, nw multiplies x as it is loaded, and the
//         row's 1 / rms scales each finished dot product (a per-row scalar factors out of it),
//         so no normed copy of x is ever written. Every work-item recomputes the sum (K <= a
//         few thousand floats it reads anyway).
//   GLU=1 (SiLU) or GLU=2 (GELU-tanh): a gate|up product with its activation. A work-item
//         computes OUTS = 2 outputs: its 4 accumulator rows are gate rows o0, o0+1 of W and up
//         rows up_row0 + o0, +1 of Wu (the same matrix with up_row0 = n_out when gate|up is
//         fused, else the up weight with up_row0 = 0; same encoding and row_bytes), then
//         y[r][o] = act(gate) * up. n_out is n_ff; y's ldy is n_ff.
// Wu, up_row0, nw, eps are ignored by the variants that do not use them.
#define ROWS 4  // weight rows per work-item (accumulators: 4 float16 fill half of AVX2's registers)
#ifdef GLU
#define OUTS 2  // gate rows 0, 1 and up rows 2, 3
#else
#define OUTS ROWS
#endif

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
                     __global const uchar* Wu, const int up_row0, __global const float* nw, const float eps) {
  const int o0 = get_global_id(0) * OUTS;
  const int r = get_global_id(1);
  if (o0 >= n_out || r >= n_rows) return;
  __global const float* xr = x + (size_t)r * K;
  const int no = min(OUTS, n_out - o0);  // live outputs; row i is live when i % OUTS < no
  __global const uchar* w[ROWS];
  for (int i = 0; i < ROWS; ++i) w[i] = row_of(W, Wu, up_row0, row_bytes, o0, i % OUTS < no ? i : 0);
  float16 acc[ROWS];
  for (int i = 0; i < ROWS; ++i) acc[i] = (float16)(0.0f);
#ifdef NORM
  float16 sq = (float16)(0.0f);
#endif
  for (int b = 0; b < K / 32; ++b) {
    float16 xl = vload16(0, xr + b * 32);
    float16 xh = vload16(1, xr + b * 32);
#ifdef NORM
    sq = fma(xl, xl, fma(xh, xh, sq));
    xl *= vload16(0, nw + b * 32);
    xh *= vload16(1, nw + b * 32);
#endif
    for (int i = 0; i < ROWS; ++i)
      if (i % OUTS < no) acc[i] = block_fma(w[i], b, xl, xh, acc[i]);
  }
  // Tail of F32/F16 rows whose length is not a multiple of 32 (block formats have none).
  for (int k = (K / 32) * 32; k < K; k += 8) {
    float8 xv = vload8(0, xr + k);
#ifdef NORM
    sq.lo = fma(xv, xv, sq.lo);
    xv *= vload8(0, nw + k);
#endif
    for (int i = 0; i < ROWS; ++i)
      if (i % OUTS < no) acc[i].lo = fma(load8(w[i], k), xv, acc[i].lo);
  }
  float s[ROWS];
  for (int i = 0; i < ROWS; ++i) {
    const float8 a8 = acc[i].lo + acc[i].hi;
    const float4 a4 = a8.lo + a8.hi;
    s[i] = (a4.x + a4.y) + (a4.z + a4.w);
  }
#ifdef NORM
  const float8 q8 = sq.lo + sq.hi;
  const float4 q4 = q8.lo + q8.hi;
  const float inv_rms = rsqrt(((q4.x + q4.y) + (q4.z + q4.w)) / (float)K + eps);
  for (int i = 0; i < ROWS; ++i) s[i] *= inv_rms;
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
