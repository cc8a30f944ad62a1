// --round-activations: a product's input rounded, in place, to the values llama.cpp's CPU
// backend multiplies after quantizing it to the weight's "vec_dot_type" (ggml-cpu.c), kept as
// floats. Multiplying the rounded floats by the dequantized weights then gives llama.cpp's
// integer dot products up to float summation order, so perplexity and greedy output can be
// compared under the same numerics. It costs precision: a tool for comparison, not a default.
//   x: [n_rows][K] float; one work-item per BLOCK elements of one row (global dims: blocks, rows)
// KIND 1 (Q8_0, also Q8_1's values; blocks of 32; ggml's AVX2 quantize_row_q8_0):
//   d = amax / 127 stored as half; q = rint(x * 127 / amax); value q * half(d)
// KIND 2 (Q8_K; blocks of 256; quantize_row_q8_K_ref): m = the element of largest magnitude,
//   iscale = -127 / m; q = min(127, rint(iscale * x)); value q * (1 / iscale)
// KIND 3 (F16; BLOCK 1): each element rounded to half (F16 weights multiply half inputs).
// rint and vstore_half round to nearest, ties to even, as ggml's SIMD paths do.

float to_half_and_back(float v) {
  ushort h;
  vstore_half(v, 0, (__private half*)&h);
  return vload_half(0, (__private const half*)&h);
}

__kernel void round_activations(__global float* x, const int K, const int n_rows) {
  const int b = get_global_id(0), r = get_global_id(1);
  if (b >= K / BLOCK || r >= n_rows) return;
  __global float* p = x + (size_t)r * K + (size_t)b * BLOCK;
#if KIND == 3
  p[0] = to_half_and_back(p[0]);
#else
  float amax = 0.0f, m = 0.0f;
  for (int j = 0; j < BLOCK; ++j) {
    const float a = fabs(p[j]);
    if (a > amax) { amax = a; m = p[j]; }
  }
  if (amax == 0.0f) {
    for (int j = 0; j < BLOCK; ++j) p[j] = 0.0f;
    return;
  }
#if KIND == 1
  const float id = 127.0f / amax, d = to_half_and_back(amax / 127.0f);
  for (int j = 0; j < BLOCK; ++j) p[j] = rint(p[j] * id) * d;
#elif KIND == 2
  const float iscale = -127.0f / m, d = 1.0f / iscale;
  for (int j = 0; j < BLOCK; ++j) p[j] = fmin(127.0f, rint(iscale * p[j])) * d;
#else
#error "KIND must be 1 (Q8_0), 2 (Q8_K) or 3 (F16)"
#endif
#endif
}
