// Dequantize a weight matrix into the packed panel layout gemm_packed reads (needs
// quant_formats.cl):
//   W:  [n_out rows][row_bytes] ggml blocks (device order, quant_formats.cl)
//   Bp: [n_out_pad/16 panels][K][16] float, rows past n_out zero
// so that panel p, step k holds weights (16p .. 16p+15, k) contiguously.
// One work-item per (output row, group of 8 along K).
// row0: first source row, so a tile of a large matrix (the LM head) can be dequantized alone.
// Weights 8g .. 8g + 7 of row row0 + o of W into their places in the panels (zeros for o >=
// n_out, the padding of the last panel); shared with gemm.cl's gemm_dequant.
inline void dequant_panel8(__global const uchar* W, const int row_bytes, const int row0, const int n_out, const int K,
                           const int o, const int g, __global float* panels) {
  const float8 w = o < n_out ? load8(W + (size_t)(row0 + o) * row_bytes, g * 8, K) : (float8)(0.0f);
  __global float* dst = panels + ((size_t)(o >> 4) * K + g * 8) * 16 + (o & 15);
  dst[0] = w.s0; dst[16] = w.s1; dst[32] = w.s2; dst[48] = w.s3;
  dst[64] = w.s4; dst[80] = w.s5; dst[96] = w.s6; dst[112] = w.s7;
}

__kernel void dequant_to_panels(__global const uchar* W, const int row_bytes, const int row0, const int n_out,
                                const int K, __global float* Bp, const int bp_off, const int n_out_pad) {
  const int g = get_global_id(0);  // k / 8
  const int o = get_global_id(1);
  if (g * 8 >= K || o >= n_out_pad) return;
  dequant_panel8(W, row_bytes, row0, n_out, K, o, g, Bp + bp_off);
}

// Plain row-major dequantization (tests, CPU-side references, F32 copies).
// Rows row0 .. row0 + get_global_size(1) - 1 of W to out[0 ..].
__kernel void dequant_rows(__global const uchar* W, const int row_bytes, const int row0, const int K,
                           __global float* out) {
  const int g = get_global_id(0);
  const int o = get_global_id(1);
  if (g * 8 >= K) return;
  vstore8(load8(W + (size_t)(row0 + o) * row_bytes, g * 8, K), 0, out + (size_t)o * K + g * 8);
}
