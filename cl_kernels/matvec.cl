// Quantized matrix-vector products for decode (needs quant_formats.cl).
//   W: [n_out rows][row_bytes] (ggml blocks)   x: [n_rows][K] float   y: [n_rows][ldy] float from y_off
//   y[r][o] (+)= sum_k W[o][k] * x[r][k]          (K a multiple of 8; of 32 for block formats)
// One work-item computes ROWS consecutive outputs of one input row (global dim 1), reading x
// once per block for all of them. ACCUM (-D): add into y (fused residual add).
#define ROWS 4
__kernel void matvec(__global const uchar* W, const int row_bytes, const int n_out, const int K,
                     __global const float* x, const int n_rows, __global float* y, const int y_off, const int ldy) {
  const int o0 = get_global_id(0) * ROWS;
  const int r = get_global_id(1);
  if (o0 >= n_out || r >= n_rows) return;
  __global const float* xr = x + (size_t)r * K;
  __global const uchar* w0 = W + (size_t)o0 * row_bytes;
  const int nr = min(ROWS, n_out - o0);
  float16 acc[ROWS];
  for (int i = 0; i < ROWS; ++i) acc[i] = (float16)(0.0f);
  for (int b = 0; b < K / 32; ++b) {
    const float16 xl = vload16(0, xr + b * 32);
    const float16 xh = vload16(1, xr + b * 32);
    for (int i = 0; i < ROWS; ++i)
      if (i < nr) acc[i] = block_fma(w0 + (size_t)i * row_bytes, b, xl, xh, acc[i]);
  }
  // Tail of F32/F16 rows whose length is not a multiple of 32 (block formats have none).
  for (int k = (K / 32) * 32; k < K; k += 8) {
    const float8 xv = vload8(0, xr + k);
    for (int i = 0; i < nr; ++i) acc[i].lo = fma(load8(w0 + (size_t)i * row_bytes, k), xv, acc[i].lo);
  }
  for (int i = 0; i < nr; ++i) {
    const float8 a8 = acc[i].lo + acc[i].hi;
    const float4 a4 = a8.lo + a8.hi;
    const float s = (a4.x + a4.y) + (a4.z + a4.w);
#ifdef ACCUM
    y[y_off + (size_t)r * ldy + o0 + i] += s;
#else
    y[y_off + (size_t)r * ldy + o0 + i] = s;
#endif
  }
}
