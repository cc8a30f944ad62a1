// Quantized matrix-vector products for decode (needs quant_formats.cl).
//   W: [n_out rows][row_bytes] (ggml blocks)   x: [n_rows][K] float   y: [n_rows][ldy] float from y_off
//   y[r][o] (+)= sum_k W[o][k] * x[r][k]
// One work-item per output o; it loops over the (few) rows so each weight is read once.
// ACCUM (host -D): add into y instead of overwriting (fused residual add).
#ifndef MAX_ROWS
#define MAX_ROWS 4
#endif
__kernel void matvec(__global const uchar* W, const int row_bytes, const int n_out, const int K,
                     __global const float* x, const int n_rows, __global float* y, const int y_off, const int ldy) {
  const int o = get_global_id(0);
  if (o >= n_out) return;
  __global const uchar* row = W + (size_t)o * row_bytes;
  float8 acc[MAX_ROWS];
  for (int r = 0; r < MAX_ROWS; ++r) acc[r] = (float8)(0.0f);
  for (int k = 0; k < K; k += 8) {
    const float8 w = load8(row, k);
    for (int r = 0; r < n_rows; ++r) acc[r] = fma(w, vload8(0, x + (size_t)r * K + k), acc[r]);
  }
  for (int r = 0; r < n_rows; ++r) {
    const float8 a = acc[r];
    const float s = (a.s0 + a.s1) + (a.s2 + a.s3) + (a.s4 + a.s5) + (a.s6 + a.s7);
#ifdef ACCUM
    y[y_off + (size_t)r * ldy + o] += s;
#else
    y[y_off + (size_t)r * ldy + o] = s;
#endif
  }
}
