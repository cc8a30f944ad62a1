// Integer-dot matrix-vector products for decode (needs quant_formats.cl for the T_* ids).
// The input rows are first quantized to 8 bits per 32-element block (quantize_q8); the
// product then multiplies 4-bit or 8-bit weights with 8-bit activations in integers and
// scales once per block in float. On a CPU this replaces the float path's per-weight
// int->float conversion and FMA (compute-bound) with 16-bit multiplies and pair-sums.
//
//   X:  [n_rows][K] float                         K a multiple of 32
//   Xq: [n_rows][K/32] Q8 blocks of 40 bytes:     float d; float s; char q[32]
//       d = max|x| / 127, q = round_half_even(x / d) (0 when d = 0), s = d * sum(q)
//       q holds the block's elements in the order  0 2 4 .. 14 | 1 3 .. 15 | 16 18 .. 30 | 17 19 .. 31
//       (even, odd of each half): the order in which a 16-bit lane of a Q4 weight row splits
//       into its four nibbles, so no lane ever moves (below).
//   W:  [n_out][row_bytes] Q4_0, Q4_1 or Q8_0 blocks (WTYPE; Q4 rows scales first, quant_formats.cl)
//   y:  [n_rows][ldy] float from y_off;  y[r][o] (+)= sum_b block_dot(W[o] block b, Xq[r] block b)
//
// Per block (dw, mw the weight block's scale and min, qw its quants, qx the input's):
//   Q4_0: dw * dx * sum((qw - 8) * qx)
//   Q4_1: dw * dx * sum(qw * qx) + mw * sx          (the min times the block's quantized input sum)
//   Q8_0: dw * dx * sum(qw * qx)
// Q4 weights are read as 16-bit lanes: lane i of the 16 quant bytes holds bytes 2i and 2i+1,
// i.e. elements 2i, 2i+1 (low nibbles) and 16+2i, 17+2i (high nibbles). Shifts and masks
// inside a lane give four 8-lane 16-bit vectors that line up with the input's four runs.
// Q8_0 weights are sign-extended to 16 bits in element order and the input's runs are
// interleaved back into element order once per block (shared by every row). Products are
// summed in 16 bits: |4 * 15 * 127|, |4 * 8 * 127| and |2 * 128 * 127| are < 2^15. LLVM turns
// this into vpmullw/vpaddw (x86) or 16-bit mul/mla (NEON) with no per-weight int->float
// conversion; one conversion per block and output remains. Two rows share one 16-lane
// vector (a 256-bit register on AVX2).
// ACCUM (-D): add into y (fused residual add).

#define Q8_BLOCK_BYTES 40

// x[r] -> Xq[r]: one work-item per (32-element block, row).
__kernel void quantize_q8(__global const float* x, const int K, const int n_rows, __global uchar* xq) {
  const int b = get_global_id(0);
  const int r = get_global_id(1);
  if (b >= K / 32 || r >= n_rows) return;
  __global const float* xb = x + (size_t)r * K + b * 32;
  const float16 lo = vload16(0, xb);
  const float16 hi = vload16(1, xb);
  const float16 a16 = fmax(fabs(lo), fabs(hi));
  const float8 a8 = fmax(a16.lo, a16.hi);
  const float4 a4 = fmax(a8.lo, a8.hi);
  const float amax = fmax(fmax(a4.x, a4.y), fmax(a4.z, a4.w));
  // Divide (not multiply by 127/amax): the C++ reference does the same two correctly
  // rounded divisions, so both round the same quotients.
  const float d = amax / 127.0f;
  const char16 qlo = d == 0.0f ? (char16)(0) : convert_char16_sat_rte(lo / d);
  const char16 qhi = d == 0.0f ? (char16)(0) : convert_char16_sat_rte(hi / d);
  const short16 qs = convert_short16(qlo) + convert_short16(qhi);
  const short8 s8 = qs.lo + qs.hi;
  const short4 s4 = s8.lo + s8.hi;
  const int qsum = (s4.x + s4.y) + (s4.z + s4.w);
  __global uchar* blk = xq + ((size_t)r * (K / 32) + b) * Q8_BLOCK_BYTES;
  vstore2((float2)(d, d * (float)qsum), 0, (__global float*)blk);
  __global char* q = (__global char*)(blk + 8);
  vstore8(qlo.even, 0, q);
  vstore8(qlo.odd, 1, q);
  vstore8(qhi.even, 2, q);
  vstore8(qhi.odd, 3, q);
}

#define ROWS 4  // even: rows go in pairs
// Block b of a weight row: where its scale halves (d, then Q4_1's m) and its quants start.
// Q4 rows hold their scales first (quant_formats.cl), Q8_0 rows are whole blocks of 34 bytes.
#if WTYPE == T_Q4_0 || WTYPE == T_Q4_1
#define W_SCALES(row, b) q4_scales(row, b)
#define W_QUANTS(row, b) q4_quants(row, nb, b)
#else
#define W_SCALES(row, b) q8_block(row, b)
#define W_QUANTS(row, b) (q8_block(row, b) + 2)
#endif
// One work-item computes ROWS consecutive outputs of one input row (global dim 1), reading
// the input block once for all of them, as matvec.cl does. A float8 accumulator per output
// takes each block's 8 lane sums scaled by dw*dx, so the only horizontal sum is at the end.
__kernel void matvec_q8(__global const uchar* W, const int row_bytes, const int n_out, const int K,
                        __global const uchar* xq, const int n_rows, __global float* y, const int y_off,
                        const int ldy) {
  const int o0 = get_global_id(0) * ROWS;
  const int r = get_global_id(1);
  if (o0 >= n_out || r >= n_rows) return;
  const int nb = K / 32;
  __global const uchar* xr = xq + (size_t)r * nb * Q8_BLOCK_BYTES;
  __global const uchar* w0 = W + (size_t)o0 * row_bytes;
  const int nr = min(ROWS, n_out - o0);
  float8 acc[ROWS];
  float accm[ROWS];  // Q4_1: sum of mw * sx
  for (int i = 0; i < ROWS; ++i) acc[i] = (float8)(0.0f), accm[i] = 0.0f;
  // Rows past n_out read the last row again (in bounds); their sums are never written.
  __global const uchar* rows[ROWS];
  for (int i = 0; i < ROWS; ++i) rows[i] = w0 + (size_t)min(i, nr - 1) * row_bytes;
  for (int b = 0; b < nb; ++b) {
    __global const uchar* xb = xr + b * Q8_BLOCK_BYTES;
    const float2 ds = vload2(0, (__global const float*)xb);
    __global const char* xqb = (__global const char*)(xb + 8);
    const short8 x0 = convert_short8(vload8(0, xqb));  // elements 0 2 .. 14
    const short8 x1 = convert_short8(vload8(1, xqb));  // 1 3 .. 15
    const short8 x2 = convert_short8(vload8(2, xqb));  // 16 18 .. 30
    const short8 x3 = convert_short8(vload8(3, xqb));  // 17 19 .. 31
#if WTYPE == T_Q8_0
    const short16 XN0 = shuffle2(x0, x1, (ushort16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
    const short16 XN1 = shuffle2(x2, x3, (ushort16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
#else  // each run twice: for the two rows of a pair
    const short16 X0 = (short16)(x0, x0), X1 = (short16)(x1, x1), X2 = (short16)(x2, x2), X3 = (short16)(x3, x3);
#endif
    for (int i = 0; i < ROWS; i += 2) {
      if (i >= nr) break;
      __global const uchar* sa = W_SCALES(rows[i], b);
      __global const uchar* sb = W_SCALES(rows[i + 1], b);
      __global const uchar* qa = W_QUANTS(rows[i], b);
      __global const uchar* qb = W_QUANTS(rows[i + 1], b);
#if WTYPE == T_Q4_0 || WTYPE == T_Q4_1
      const short16 w = (short16)(vload8(0, (__global const short*)qa), vload8(0, (__global const short*)qb));
      const short16 m = (short16)(15), off = (short16)(WTYPE == T_Q4_0 ? 8 : 0);
      const short16 p = ((w & m) - off) * X0 + (((w >> 8) & m) - off) * X1 + (((w >> 4) & m) - off) * X2 +
                        (((w >> 12) & m) - off) * X3;
      const float16 s = convert_float16(convert_int16(p));
#if WTYPE == T_Q4_1
      accm[i] = fma(f16_at(sa, 1), ds.y, accm[i]);
      accm[i + 1] = fma(f16_at(sb, 1), ds.y, accm[i + 1]);
#endif
#elif WTYPE == T_Q8_0
      const short16 pa = convert_short16(vload16(0, (__global const char*)qa)) * XN0 +
                         convert_short16(vload16(1, (__global const char*)qa)) * XN1;
      const short16 pb = convert_short16(vload16(0, (__global const char*)qb)) * XN0 +
                         convert_short16(vload16(1, (__global const char*)qb)) * XN1;
      const float16 s = (float16)(convert_float8(convert_int8(pa.lo) + convert_int8(pa.hi)),
                                  convert_float8(convert_int8(pb.lo) + convert_int8(pb.hi)));
#else
#error "matvec_q8 reads Q4_0, Q4_1 or Q8_0 weights"
#endif
      acc[i] = fma(s.lo, (float8)(f16_at(sa, 0) * ds.x), acc[i]);
      acc[i + 1] = fma(s.hi, (float8)(f16_at(sb, 0) * ds.x), acc[i + 1]);
    }
  }
  for (int i = 0; i < nr; ++i) {
    const float4 a4 = acc[i].lo + acc[i].hi;
    const float s = (a4.x + a4.y) + (a4.z + a4.w) + accm[i];
#ifdef ACCUM
    y[y_off + (size_t)r * ldy + o0 + i] += s;
#else
    y[y_off + (size_t)r * ldy + o0 + i] = s;
#endif
  }
}
