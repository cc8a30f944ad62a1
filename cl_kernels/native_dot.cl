// Decode products in the CPU's own 8-bit dot instruction (needs quant_formats.cl and
// vector_reduce.cl; matvec.cl calls it under -DNATIVE_DOT). Only for a PoCL device on an x86
// CPU that has AVX-512 VNNI, which the host checks (runtime/device.cpp): PoCL compiles kernels
// for its kernel-library variant (`skylake-avx512` lacks VNNI even where the CPU has it), and
// LLVM turns no portable OpenCL C into `vpdpbusd` (docs/benchmarks.md). So the function that
// multiplies carries its own target and stays out of line: inlined into PoCL's work-group
// functions, which lack the feature, the builtin cannot be selected.
//
//   NATIVE_DOT=1: AVX-512 VNNI, `vpdpbusd zmm`: 64 products of an unsigned and a signed byte,
//                 summed in fours into 16 int32 lanes, per instruction.
//   NATIVE_DOT=2: AVX2, `vpmaddubsw` + `vpmaddwd` on 256-bit halves: the same sums in fours, in
//                 two steps through 16-bit pairs (llama.cpp's path on CPUs without VNNI). Pairs
//                 saturate at 2^15: Q4 nibbles (<= 15) never reach it; Q8_0 weights go in as
//                 |qw| against qx with qw's sign (<= 2 x 128 x 127), not as qw + 128.
//
// Weights: Q4_0 and Q4_1 rows (scales first, quant_formats.cl) and Q8_0. The work-group first
// quantizes the input row into local memory as quantize_q8 (matvec_q8.cl) does, per 32-element
// block b: d = max|x| / 127, q = round_half_even(x / d), s = d * sum(q); then each weight row is
//   Q4_1:  sum_b dw dx sum(qw qx) + mw sx
//   Q4_0:  sum_b dw dx sum(qw qx) - 8 dw sx           ((qw - 8) qx with qw the unsigned nibble)
//   Q8_0:  sum_b dw dx sum((qw + 128) qx) - 128 dw sx  (qw + 128 = qw ^ 0x80, the unsigned operand)
// Q4 blocks go four at a time, one 512-bit vector of their 64 quant bytes: vpdpbusd's lane k
// sums 4 bytes, so lanes 4c .. 4c+3 hold block c's partial sums, and the input's block c sits
// in the same lanes (low nibbles against its elements 0-15, high against 16-31). Q8_0 blocks
// (34 bytes: a half scale, then 32 quants) go two to a vector, lanes 8c .. 8c+7 for block c.
// Each block's dw * dx is spread over its lanes and multiplies them in float; the 16 lanes sum
// at the end.
#ifdef NATIVE_DOT
#if NATIVE_DOT != 1 && NATIVE_DOT != 2
#error "native_dot.cl: NATIVE_DOT must be 1 (AVX-512 VNNI) or 2 (AVX2)"
#endif
#if WTYPE != T_Q4_0 && WTYPE != T_Q4_1 && WTYPE != T_Q8_0
#error "native_dot.cl reads Q4_0, Q4_1 or Q8_0 weights"
#endif
#if NATIVE_DOT == 1
#define NATIVE_TARGET __attribute__((noinline, target("avx512vnni,f16c")))
#define NATIVE_INLINE __attribute__((always_inline, target("avx512vnni,f16c"))) inline
// acc + the 4-byte dot products of unsigned w and signed x in each int32 lane.
#define NATIVE_DOT16(acc, w, x) __builtin_ia32_vpdpbusd512((acc), (w), (x))
#else
#define NATIVE_TARGET __attribute__((noinline, target("avx2,fma,f16c")))
#define NATIVE_INLINE __attribute__((always_inline, target("avx2,fma,f16c"))) inline
typedef char native_v32c __attribute__((__vector_size__(32)));
typedef short native_v16s __attribute__((__vector_size__(32)));
typedef int native_v8i __attribute__((__vector_size__(32)));
// The builtins take GCC-style vectors, which clang does not convert to OpenCL's: the same 32
// bytes seen as either.
typedef union {
  int8 cl;
  native_v32c c;
  native_v16s s;
  native_v8i i;
} native_ymm;
NATIVE_INLINE int8 native_dot8(const int8 w, const int8 x) {
  native_ymm a, b, ones, r;
  a.cl = w;
  b.cl = x;
  ones.cl = (int8)(0x00010001);
  r.i = __builtin_ia32_pmaddwd256(__builtin_ia32_pmaddubsw256(a.c, b.c), ones.s);
  return r.cl;
}
NATIVE_INLINE int16 native_dot16(const int16 acc, const int16 w, const int16 x) {
  return acc + (int16)(native_dot8(w.lo, x.lo), native_dot8(w.hi, x.hi));
}
#define NATIVE_DOT16(acc, w, x) native_dot16((acc), (w), (x))
// Q8_0 under AVX2: w's sign applied to x (vpsignb: negated where w < 0, 0 where w is 0); with
// w for x, |w| (-128 gives 0x80, 128 as the unsigned operand).
NATIVE_INLINE int8 native_sign8(const int8 x, const int8 w) {
  native_ymm a, b, r;
  a.cl = x;
  b.cl = w;
  r.c = __builtin_ia32_psignb256(a.c, b.c);
  return r.cl;
}
#endif
#define NATIVE_UNIT 4  // blocks per step of a row (a 512-bit vector of Q4 quants, two of Q8_0)
// Blocks per row, and those after the last whole unit, known when compiling: a row's loop has
// a fixed trip count and its tail no branches (a tail of runtime length, loaded and converted
// block by block, had cost 576-wide rows, 4 units and 2 blocks, as much as their 4 units).
#define NATIVE_NB (NATIVE_K / 32)

// Blocks past the last whole unit count as zeros: the local buffers hold nb rounded up to 4.
inline int native_padded_blocks(const int nb) { return (nb + NATIVE_UNIT - 1) / NATIVE_UNIT * NATIVE_UNIT; }

// Block b of the input row (lo: elements 0-15, hi: 16-31) quantized into the local buffers:
// unit u = b / 4 is 128 bytes at xq + 32u ints: for Q4 weights the 4 blocks' elements 0-15,
// then their 16-31 (block c of the unit at bytes 16c and 64 + 16c); for Q8_0 the blocks whole,
// in order (block c at bytes 32c). Its d and s go to xd[b], xs[b].
inline void native_store_block(const float16 lo, const float16 hi, const int b, __local int* xq, __local float* xd,
                               __local float* xs) {
  const float amax = max16(fmax(fabs(lo), fabs(hi)));
  const float d = amax / 127.0f;  // the divisions of quantize_q8 (and of the C++ reference)
  // |x / d| <= 127 (up to rounding): rint (half to even) and a plain conversion give
  // convert_char16_sat_rte's bytes in a fraction of its instructions under PoCL.
  const char16 qlo = d == 0.0f ? (char16)(0) : convert_char16(convert_int16(rint(lo / d)));
  const char16 qhi = d == 0.0f ? (char16)(0) : convert_char16(convert_int16(rint(hi / d)));
  const short16 qs = convert_short16(qlo) + convert_short16(qhi);
  const short8 s8 = qs.lo + qs.hi;
  const short4 s4 = s8.lo + s8.hi;
  const int qsum = (s4.x + s4.y) + (s4.z + s4.w);
  __local char* unit = (__local char*)(xq + 32 * (b / NATIVE_UNIT));
#if WTYPE == T_Q8_0
  vstore16(qlo, 0, unit + 32 * (b % NATIVE_UNIT));
  vstore16(qhi, 0, unit + 32 * (b % NATIVE_UNIT) + 16);
#else
  vstore16(qlo, 0, unit + 16 * (b % NATIVE_UNIT));
  vstore16(qhi, 0, unit + 64 + 16 * (b % NATIVE_UNIT));
#endif
  xd[b] = d;
  xs[b] = d * (float)qsum;
}

// Block b of x (times nw under NORM; zeros from nb on) through native_store_block; under NORM
// also the block's sum of squares of x into ssq[b] (0 past nb; native_sum_squares adds them up).
inline void native_quantize_block(__global const float* xr, __global const float* nw, const int b, const int nb,
                                  __local int* xq, __local float* xd, __local float* xs, __local float* ssq) {
  float16 lo = (float16)(0.0f), hi = (float16)(0.0f);
#ifdef NORM
  ssq[b] = 0.0f;
#endif
  if (b < nb) {
    // 8-float pieces through aligned pointers, as matvec.cl's x8 (PoCL splits vload16).
    __global const float8* x8p = (__global const float8*)(xr + 32 * b);
    lo = (float16)(x8p[0], x8p[1]);
    hi = (float16)(x8p[2], x8p[3]);
#ifdef NORM
    ssq[b] = sum16(fma(lo, lo, hi * hi));
    __global const float8* n8p = (__global const float8*)(nw + 32 * b);
    lo *= (float16)(n8p[0], n8p[1]);
    hi *= (float16)(n8p[2], n8p[3]);
#endif
  }
  native_store_block(lo, hi, b, xq, xd, xs);
}

// Block b of a row in global memory as it is (no norm; zeros from nb on): a product's input
// that an earlier step wrote (decode_layer.cl: attention's output, the feed-forward activations).
inline void native_quantize_plain(__global const float* xr, const int b, const int nb, __local int* xq,
                                  __local float* xd, __local float* xs) {
  float16 lo = (float16)(0.0f), hi = (float16)(0.0f);
  if (b < nb) {
    __global const float8* x8p = (__global const float8*)(xr + 32 * b);
    lo = (float16)(x8p[0], x8p[1]);
    hi = (float16)(x8p[2], x8p[3]);
  }
  native_store_block(lo, hi, b, xq, xd, xs);
}

// The row's sum of squares from the blocks' (nb rounded up to 4 of them, the padding 0), as
// vectors: every work-item adds them, so a scalar chain of nb dependent adds would cost each
// item more than its share of the quantization.
inline float native_sum_squares(__local const float* ssq, const int nb) {
  float16 s16 = (float16)(0.0f);
  int b = 0;
  for (; b + 16 <= nb; b += 16) s16 += vload16(0, ssq + b);
  float4 s4 = (s16.lo.lo + s16.lo.hi) + (s16.hi.lo + s16.hi.hi);
  for (; b < native_padded_blocks(nb); b += 4) s4 += vload4(0, ssq + b);
  return (s4.x + s4.y) + (s4.z + s4.w);
}

#if WTYPE == T_Q8_0
// Blocks b, b+1 of a Q8_0 row (the second only when `second`; else zeros) as unsigned bytes,
// against the input's two blocks at x: the 16 int32 lane sums times each block's dw * dx.
NATIVE_INLINE float16 native_q8_pair_fma(__global const uchar* blk, const bool second, __local const int* x,
                                         const float dd0, const float dd1, const float16 acc) {
  __global const uchar* q0 = blk + 2;
  __global const uchar* q1 = blk + Q8_0_BYTES + 2;
  const int16 w = (int16)(as_int4(vload16(0, q0)), as_int4(vload16(1, q0)),
                          second ? as_int4(vload16(0, q1)) : (int4)(0), second ? as_int4(vload16(1, q1)) : (int4)(0));
  const int16 xv = *(__local const int16*)x;
#if NATIVE_DOT == 1
  const int16 dot = NATIVE_DOT16((int16)(0), w ^ (int16)(0x80808080), xv);  // qw + 128, unsigned
#else
  // |qw| unsigned against qx carrying qw's sign (0 where qw is): the same products, no offset.
  const int16 wa = (int16)(native_sign8(w.lo, w.lo), native_sign8(w.hi, w.hi));
  const int16 xs = (int16)(native_sign8(xv.lo, w.lo), native_sign8(xv.hi, w.hi));
  const int16 dot = NATIVE_DOT16((int16)(0), wa, xs);
#endif
  return fma(convert_float16(dot), (float16)((float8)(dd0), (float8)(dd1)), acc);
}
// The offset native_q8_pair_fma's sums carry per block, in units of dw sx: -128 under VNNI.
#define NATIVE_Q8_OFFSET (NATIVE_DOT == 1 ? -128.0f : 0.0f)

// Row w (nb blocks, a constant where it is inlined) against the quantized input: the whole
// dot product.
NATIVE_INLINE float native_row_dot_of(__global const uchar* w, __local const int* xq, __local const float* xd,
                                      __local const float* xs, const int nb) {
  float16 acc = (float16)(0.0f);
  float4 accm = (float4)(0.0f);  // NATIVE_Q8_OFFSET dw sx per block lane
  int b = 0;
  for (; b + NATIVE_UNIT <= nb; b += NATIVE_UNIT) {
    __global const uchar* blk = q8_block(w, b);
    PREFETCH_AHEAD(blk);
    PREFETCH_AHEAD(blk + 64);
    PREFETCH_AHEAD(blk + 128);
    const float4 dw = q8_scales4(blk);
    accm = fma(NATIVE_Q8_OFFSET * dw, vload4(0, xs + b), accm);
    const float4 dd = dw * vload4(0, xd + b);
    acc = native_q8_pair_fma(blk, true, xq + 8 * b, dd.s0, dd.s1, acc);
    acc = native_q8_pair_fma(blk + 2 * Q8_0_BYTES, true, xq + 8 * b + 16, dd.s2, dd.s3, acc);
  }
  for (; b < nb; b += 2) {  // the last 1-3 blocks, a pair at a time (the input past nb is zeros)
    const bool second = b + 1 < nb;
    const float d0 = f16_at(q8_block(w, b), 0), d1 = second ? f16_at(q8_block(w, b + 1), 0) : 0.0f;
    acc = native_q8_pair_fma(q8_block(w, b), second, xq + 8 * b, d0 * xd[b], d1 * xd[b + 1], acc);
    accm.s0 = fma(NATIVE_Q8_OFFSET * d0, xs[b], accm.s0);
    accm.s1 = fma(NATIVE_Q8_OFFSET * d1, xs[b + 1], accm.s1);
  }
  return sum16(acc) + ((accm.x + accm.y) + (accm.z + accm.w));
}
#else
// One unit: w its 64 quant bytes, x the input unit, dd each block's dw * dx.
NATIVE_INLINE float16 native_unit_fma(const int16 w, __local const int* x, const float4 dd, const float16 acc) {
  const int16 m = (int16)(0x0f0f0f0f);
  __local const int16* x16 = (__local const int16*)x;
  int16 dot = NATIVE_DOT16((int16)(0), w & m, x16[0]);
  dot = NATIVE_DOT16(dot, (w >> 4) & m, x16[1]);
  const float16 scale = shuffle(dd, (uint16)(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
  return fma(convert_float16(dot), scale, acc);
}

// Row w (nb blocks, a constant where it is inlined) against the quantized input: the whole
// dot product.
NATIVE_INLINE float native_row_dot_of(__global const uchar* w, __local const int* xq, __local const float* xd,
                                      __local const float* xs, const int nb) {
  __global const uchar* quants = q4_quants(w, nb, 0);
  float16 acc = (float16)(0.0f);
  float4 accm = (float4)(0.0f);  // mw sx (Q4_0: -8 dw sx) per block lane
  int b = 0;
  for (; b + NATIVE_UNIT <= nb; b += NATIVE_UNIT) {
    PREFETCH_AHEAD(quants + 16 * b);
    // The scale halves in F16C's vcvtph2ps (every CPU with AVX2 has it).
#if WTYPE == T_Q4_1
    const float8 dm = __builtin_ia32_vcvtph2ps256(vload8(0, (__global const short*)q4_scales(w, b)));
    const float4 dw = dm.even, mw = dm.odd;
#else
    const float4 dw = __builtin_ia32_vcvtph2ps(as_short8((int4)(vload2(0, (__global const int*)q4_scales(w, b)), 0, 0)));
    const float4 mw = -8.0f * dw;
#endif
    accm = fma(mw, vload4(0, xs + b), accm);
    acc = native_unit_fma(vload16(0, (__global const int*)(quants + 16 * b)), xq + 8 * b, dw * vload4(0, xd + b), acc);
  }
  const int tail = nb % NATIVE_UNIT;  // known when compiling, so no branch is left
  if (tail > 0) {  // the last 1-3 blocks, the rest of their unit zeros
    __global const int* qt = (__global const int*)(quants + 16 * b);
    const int16 q = (int16)(vload4(0, qt), tail > 1 ? vload4(1, qt) : (int4)(0),
                            tail > 2 ? vload4(2, qt) : (int4)(0), (int4)(0));
    // The scale halves of 4 blocks from b on: past the row's last block they read its first
    // quant bytes (in the row, which holds nb * 16 of them after the scales), then masked.
    const int4 live = (int4)(-1, tail > 1 ? -1 : 0, tail > 2 ? -1 : 0, 0);
#if WTYPE == T_Q4_1
    const float8 dm = __builtin_ia32_vcvtph2ps256(vload8(0, (__global const short*)q4_scales(w, b)));
    const float4 dw = as_float4(as_int4(dm.even) & live), mw = as_float4(as_int4(dm.odd) & live);
#else
    const float4 dw = as_float4(
        as_int4(__builtin_ia32_vcvtph2ps(as_short8((int4)(vload2(0, (__global const int*)q4_scales(w, b)), 0, 0)))) &
        live);
    const float4 mw = -8.0f * dw;
#endif
    accm = fma(mw, vload4(0, xs + b), accm);  // xd, xs are 0 past nb
    acc = native_unit_fma(q, xq + 8 * b, dw * vload4(0, xd + b), acc);
  }
  return sum16(acc) + ((accm.x + accm.y) + (accm.z + accm.w));
}
#endif

// A row of the product's own width (NATIVE_K): its own out-of-line function with its block
// count built in (so the unit loop has a fixed trip count and the tail no branch).
NATIVE_TARGET float native_row_dot(__global const uchar* w, __local const int* xq, __local const float* xd,
                                   __local const float* xs) {
  return native_row_dot_of(w, xq, xd, xs, NATIVE_NB);
}
// The same for rows of another width K (a multiple of 32), as fn: decode_layer.cl's products
// of three widths in one program.
#define NATIVE_ROW_DOT_OF_WIDTH(fn, K)                                                                 \
  NATIVE_TARGET float fn(__global const uchar* w, __local const int* xq, __local const float* xd,     \
                         __local const float* xs) {                                                    \
    return native_row_dot_of(w, xq, xd, xs, (K) / 32);                                                 \
  }
#endif  // NATIVE_DOT
