// Prefill products in the CPU's own integer dot instruction, the GEMM counterpart of the decode
// products of native_dot.cl (the host prepends quant_formats.cl, dequant.cl, vector_reduce.cl,
// native_dot.cl and gemm.cl, with -DNATIVE_DOT=1 -DNATIVE_K=K -DWTYPE=... for NATIVE_TARGET and
// -DTILE_M=8 -DPANEL_M=8 for gemm.cl's store_tile, which writes each tile as the float GEMM's). The packed
// float GEMM (gemm.cl) runs one fma lane per weight and input element; AVX-512 VNNI's
// `vpdpwssd` runs 32 multiply-adds of 16-bit integers per instruction, summed in pairs into 16
// int32 lanes, so a 4-bit weight goes in as the integer it is and the float work is left to
// one conversion and two fmas per 32-block.
//
// Why 16-bit inputs and not llama.cpp's 8 bits (`vpdpbusd`, 64 per instruction): SmolLM2's
// perplexity on data/perplexity.txt moved 7.8036 -> 7.8231 (+0.25%) with 8-bit inputs, past the
// 0.1% the float path is held to; 16 bits round each input 256x finer (docs/benchmarks.md).
//
//   gemm_native_quantize: X [M][K] float (ldx) -> for each row r < M_pad (M rounded up to 8,
//       the rows past M zeros) and 32-element block b: d = max|x| / 32767,
//       q = round_half_even(x / d) (0 when d = 0), s = d * sum(q), into one buffer xq: Aq
//       [M_pad][K] shorts in element order, then Ad [M_pad][K/32] floats (d), then As
//       [M_pad][K/32] floats (s).
//   gemm_native: C[m][n0 + o] (+)= sum_b dw dx sum(qw qx) + mw sx for W's rows row0 + o, o < N:
//         Q4_1: qw = the nibble, mw = the block's min
//         Q4_0: qw = the nibble - 8, mw = 0
//         Q8_0: qw = the quant, mw = 0
//       |qw qx| <= 128 x 32767 and 32 of them per block and lane stay far inside int32.
// A work-group takes one 16-row panel of W. Its items first rewrite the panel into Bp as
// [K/32 blocks][GN_RECORD bytes]: 16 steps of [16 rows][2 shorts] (block elements 2s, 2s+1 of
// each row: one 512-bit vector whose lane o is row o's pair), then the 16 rows' dw, then their
// mw. Then each item takes tiles of 8 input rows (tiles t, t + L, ...: L the local size): per
// block and input row, 16 vpdpwssd of the panel's steps against the row's pair broadcast, then
// one conversion and two fmas in float. The panel (K * 36 bytes) stays in the cache for every
// tile that reads it.
#define GN_STEPS 16                       // element pairs per 32-block
#define GN_RECORD (GN_STEPS * 64 + 128)  // bytes per block of a panel: the steps, 16 dw, 16 mw
#define GN_NB (NATIVE_K / 32)             // blocks per row
#define GN_TILE 8                         // input rows per tile (8 int32 and 8 float accumulators)
#if defined(NATIVE_DOT) && TILE_M != GN_TILE
#error "gemm_native.cl stores through gemm.cl's store_tile: compile it with -DTILE_M=8"
#endif

// The three parts of the quantized input of m_pad rows of k in xq.
inline __global float* gemm_native_d(__global uchar* xq, const int m_pad, const int k) {
  return (__global float*)(xq + (size_t)m_pad * k * 2);
}
inline __global float* gemm_native_s(__global uchar* xq, const int m_pad, const int k) {
  return gemm_native_d(xq, m_pad, k) + (size_t)m_pad * (k / 32);
}

// Rows of X into xq: one work-item per (block, row), rows up to M_pad = the global size.
__kernel void gemm_native_quantize(__global const float* X, const int M, const int K, const int ldx,
                                   __global uchar* xq) {
  const int b = get_global_id(0);
  const int r = get_global_id(1);
  const int m_pad = get_global_size(1);
  if (b >= K / 32) return;
  float16 lo = (float16)(0.0f), hi = (float16)(0.0f);
  if (r < M) {
    __global const float* xb = X + (size_t)r * ldx + b * 32;
    lo = vload16(0, xb);
    hi = vload16(1, xb);
  }
  const float16 a16 = fmax(fabs(lo), fabs(hi));
  const float8 a8 = fmax(a16.lo, a16.hi);
  const float4 a4 = fmax(a8.lo, a8.hi);
  const float d = fmax(fmax(a4.x, a4.y), fmax(a4.z, a4.w)) / 32767.0f;
  // x times 1 / d, not x / d: one division a block instead of 32 (the quotient may round to
  // the other integer at a tie, within the d / 2 the rounding allows anyway). |x / d| <= 32767
  // (up to rounding): rint (half to even) and a plain conversion.
  const float id = d == 0.0f ? 0.0f : 1.0f / d;
  const int16 qlo = convert_int16(rint(lo * id));
  const int16 qhi = convert_int16(rint(hi * id));
  const int16 qs = qlo + qhi;
  const int8 s8 = qs.lo + qs.hi;
  const int4 s4 = s8.lo + s8.hi;
  const int qsum = (s4.x + s4.y) + (s4.z + s4.w);
  __global short* q = (__global short*)xq + (size_t)r * K + b * 32;
  vstore16(convert_short16(qlo), 0, q);
  vstore16(convert_short16(qhi), 1, q);
  gemm_native_d(xq, m_pad, K)[(size_t)r * (K / 32) + b] = d;
  gemm_native_s(xq, m_pad, K)[(size_t)r * (K / 32) + b] = d * (float)qsum;
}

#ifdef NATIVE_DOT
#if NATIVE_DOT != 1
#error "gemm_native.cl runs in AVX-512 VNNI only (NATIVE_DOT=1): 16 accumulators of 512 bits"
#endif

// Block b of W's row `row` (zeros where not live) into its place in the panel's record.
inline void gemm_native_repack(__global const uchar* W, const int row_bytes, const int row, const bool live,
                               const int o, const int b, __global uchar* panel) {
  short16 lo = (short16)(0), hi = (short16)(0);  // elements 0-15 and 16-31
  float dw = 0.0f, mw = 0.0f;
  if (live) {
    __global const uchar* w = W + (size_t)row * row_bytes;
#if WTYPE == T_Q8_0
    __global const uchar* blk = q8_block(w, b);
    dw = f16_at(blk, 0);
    lo = convert_short16(as_char16(vload16(0, blk + 2)));
    hi = convert_short16(as_char16(vload16(1, blk + 2)));
#else
    const short16 q = convert_short16(vload16(0, q4_quants(w, GN_NB, b)));
    lo = q & (short16)(15);
    hi = q >> (short16)(4);
#if WTYPE == T_Q4_1
    const float2 dm = f16x2_at(q4_scales(w, b));
    dw = dm.x;
    mw = dm.y;
#else
    dw = f16_at(q4_scales(w, b), 0);
    lo -= (short16)(8);
    hi -= (short16)(8);
#endif
#endif
  }
  __global uchar* rec = panel + (size_t)b * GN_RECORD;
  __global uint* steps = (__global uint*)rec;  // [16 steps][16 rows] of 2 shorts
  const uint8 l = as_uint8(lo), h = as_uint8(hi);
  steps[0 * 16 + o] = l.s0, steps[1 * 16 + o] = l.s1, steps[2 * 16 + o] = l.s2, steps[3 * 16 + o] = l.s3;
  steps[4 * 16 + o] = l.s4, steps[5 * 16 + o] = l.s5, steps[6 * 16 + o] = l.s6, steps[7 * 16 + o] = l.s7;
  steps[8 * 16 + o] = h.s0, steps[9 * 16 + o] = h.s1, steps[10 * 16 + o] = h.s2, steps[11 * 16 + o] = h.s3;
  steps[12 * 16 + o] = h.s4, steps[13 * 16 + o] = h.s5, steps[14 * 16 + o] = h.s6, steps[15 * 16 + o] = h.s7;
  __global float* scales = (__global float*)(rec + GN_STEPS * 64);
  scales[o] = dw;
  scales[16 + o] = mw;
}

// One tile: input rows m0 .. m0 + 7 (Aq rows as ints, a pair of elements each; m0 a multiple of
// 8) against the panel; C rows m0 .. (< M), columns n0 .. n0 + 15 (< N) (+)= the tile.
NATIVE_TARGET void gemm_native_tile(__global const uchar* panel, __global const int* aq, __global const float* ad,
                                    __global const float* asum, const int m0, const int M, const int N, const int n0,
                                    __global float* C, const int c_off, const int ldc) {
  const int kp = NATIVE_K / 2;  // pairs per input row
  __global const int* a0 = aq + (size_t)m0 * kp;
  __global const float* d0 = ad + (size_t)m0 * GN_NB;
  __global const float* s0 = asum + (size_t)m0 * GN_NB;
  float16 c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0;
  for (int b = 0; b < GN_NB; ++b) {
    __global const uchar* rec = panel + (size_t)b * GN_RECORD;
    int16 i0 = 0, i1 = 0, i2 = 0, i3 = 0, i4 = 0, i5 = 0, i6 = 0, i7 = 0;
#pragma unroll
    for (int s = 0; s < GN_STEPS; ++s) {
      const int16 w = vload16(0, (__global const int*)(rec + 64 * s));
      const int k = GN_STEPS * b + s;
      i0 = __builtin_ia32_vpdpwssd512(i0, w, (int16)(a0[k]));
      i1 = __builtin_ia32_vpdpwssd512(i1, w, (int16)(a0[kp + k]));
      i2 = __builtin_ia32_vpdpwssd512(i2, w, (int16)(a0[2 * kp + k]));
      i3 = __builtin_ia32_vpdpwssd512(i3, w, (int16)(a0[3 * kp + k]));
      i4 = __builtin_ia32_vpdpwssd512(i4, w, (int16)(a0[4 * kp + k]));
      i5 = __builtin_ia32_vpdpwssd512(i5, w, (int16)(a0[5 * kp + k]));
      i6 = __builtin_ia32_vpdpwssd512(i6, w, (int16)(a0[6 * kp + k]));
      i7 = __builtin_ia32_vpdpwssd512(i7, w, (int16)(a0[7 * kp + k]));
    }
    const float16 dw = vload16(0, (__global const float*)(rec + GN_STEPS * 64));
    const float16 mw = vload16(1, (__global const float*)(rec + GN_STEPS * 64));
#define GN_SCALE(t) \
  c##t = fma(mw, (float16)(s0[(t) * GN_NB + b]), fma(convert_float16(i##t), dw * d0[(t) * GN_NB + b], c##t))
    GN_SCALE(0); GN_SCALE(1); GN_SCALE(2); GN_SCALE(3);
    GN_SCALE(4); GN_SCALE(5); GN_SCALE(6); GN_SCALE(7);
#undef GN_SCALE
  }
  const float16 acc[GN_TILE] = {c0, c1, c2, c3, c4, c5, c6, c7};
  store_tile(acc, M, N, m0 / GN_TILE, n0 / 16, C, c_off, ldc);
}

// C[m][n0 ..] (+)= the product of rows row0 .. row0 + N - 1 of W: a work-group per 16-row panel
// (group p on dimension 1), Bp the panels' records (the whole matrix's, each group its own),
// xq the quantized input of M rows (gemm_native_quantize, M rounded up to 8).
__kernel void gemm_native(const int M, const int N, __global uchar* xq, __global const uchar* W, const int row_bytes,
                          const int row0, __global uchar* Bp, __global float* C, const int c_off, const int ldc) {
  const int p = get_group_id(1);
  const int m_pad = (M + GN_TILE - 1) / GN_TILE * GN_TILE;
  __global uchar* panel = Bp + (size_t)p * GN_NB * GN_RECORD;
  for (int u = get_local_id(0); u < 16 * GN_NB; u += get_local_size(0)) {
    const int o = u / GN_NB, b = u - o * GN_NB;
    gemm_native_repack(W, row_bytes, row0 + 16 * p + o, 16 * p + o < N, o, b, panel);
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
  for (int t = get_local_id(0); t * GN_TILE < M; t += get_local_size(0))
    gemm_native_tile(panel, (__global const int*)xq, gemm_native_d(xq, m_pad, NATIVE_K),
                     gemm_native_s(xq, m_pad, NATIVE_K), t * GN_TILE, M, N, 16 * p, C, c_off, ldc);
}
#endif  // NATIVE_DOT
