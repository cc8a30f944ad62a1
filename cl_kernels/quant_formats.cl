// Weight formats, shared by embedding.cl, matvec.cl, matvec_q8.cl and dequant.cl (the host
// prepends this file). A weight matrix is stored as in the GGUF file, row-major rows of ggml
// blocks, `row_bytes` bytes per row, except that Q4_0 and Q4_1 rows hold their blocks'
// scales first (runtime/weight_layout.h): [nb scales][nb x 16 quant bytes], the same bytes.
// The host compiles with -DWTYPE=<ggml type id>.
//
//   load8(row, k, K): weights k..k+7 of a row of K as float8 (k a multiple of 8)
//
// Block layouts (ggml):
//   F32  (0):  float
//   F16  (1):  half
//   BF16 (30): ushort, the upper 16 bits of a float
//   Q4_0 (2):  32 elems, 18 B: half d; uchar qs[16]       w = ((q & 15) - 8) * d, low nibbles first
//   Q4_1 (3):  32 elems, 20 B: half d, m; uchar qs[16]    w = (q & 15) * d + m
//              (on the device each row's d (and m) come first, then its qs: q4_scales, q4_quants)
//   Q5_0 (6):  32 elems, 22 B: half d; uchar qh[4]; uchar qs[16]
//              w = ((q & 15 | bit_i(qh) << 4) - 16) * d; element i takes bit i of the LE uint32 qh
//   Q5_1 (7):  32 elems, 24 B: half d, m; uchar qh[4]; uchar qs[16]
//              w = (q & 15 | bit_i(qh) << 4) * d + m
//   Q8_0 (8):  32 elems, 34 B: half d; char qs[32]        w = q * d
//   Q4_K (12): 256 elems, 144 B: half d, dmin; uchar scales[12]; uchar qs[128]
//              8 sub-blocks of 32: w = d * sc[j] * q - dmin * m[j] (6-bit sc, m packed in scales,
//              see k_scale_min); sub-block j = 2c + h takes the low (h = 0) or high (h = 1)
//              nibbles of qs[32c .. 32c + 32)
//   Q5_K (13): 256 elems, 176 B: half d, dmin; uchar scales[12]; uchar qh[32]; uchar qs[128]
//              as Q4_K with a fifth bit: element l of sub-block j takes bit j of qh[l]
//   Q6_K (14): 256 elems, 210 B: uchar ql[128], qh[64]; char scales[16]; half d
// (model_loader/quant_blocks.h has the same layouts on the host.)

#ifndef WTYPE
#error "compile with -DWTYPE=<ggml type id>"
#endif

// PREFETCH_BYTES (-D, the tuning's matvec_prefetch; read by matvec.cl and native_dot.cl): each
// block group asks for the weights that many bytes ahead of it (clang's __builtin_prefetch,
// prefetcht0 on x86). A work-item's rows,
// and its work-group's, are one ascending stream, but each thread of a CPU device takes
// work-groups of a few KB here and there, so the hardware prefetcher keeps losing the stream.
#ifdef PREFETCH_BYTES
#define PREFETCH_AHEAD(p) __builtin_prefetch((__global const char*)(p) + PREFETCH_BYTES, 0, 3)
#else
#define PREFETCH_AHEAD(p)
#endif
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_BF16 30

// Element i of the half values at p (the block scales), as float: exact for every half,
// subnormals included, without float subnormal arithmetic (so also on devices that flush
// them), in a few integer operations and selects. PoCL's vload_half (CPUs have no
// cl_khr_fp16) is a longer software conversion with several branches per value, which cost
// decode more than the weight math it scales.
inline float half_bits_to_float(uint h) {
  const uint em = h & 0x7fffu;
  const float normal = as_float((em << 13) + 0x38000000u);  // exponent rebiased 15 -> 127
  const float subnormal = (float)em * 0x1.0p-24f;           // em < 2^10: exact, a normal float
  float mag = em < 0x400u ? subnormal : normal;
  mag = em >= 0x7c00u ? as_float((em << 13) | 0x7f800000u) : mag;  // infinities, NaNs
  return as_float(as_uint(mag) | ((h & 0x8000u) << 16));
}
inline float f16_at(__global const uchar* p, int i) { return half_bits_to_float(((__global const ushort*)p)[i]); }
// halves_to_floatN(h): the halves in the lanes of h as floats, half_bits_to_float lane by lane
// in one pass of vector operations (the selects as blends rather than the branches the scalar
// form compiles to).
#define DEFINE_HALVES_TO_FLOAT(N)                                                 \
  inline float##N halves_to_float##N(uint##N h) {                                \
    const uint##N em = h & 0x7fffu;                                              \
    const float##N normal = as_float##N((em << 13) + 0x38000000u);               \
    const float##N subnormal = convert_float##N(em) * 0x1.0p-24f;                \
    float##N mag = select(normal, subnormal, em < 0x400u);                       \
    mag = select(mag, as_float##N((em << 13) | 0x7f800000u), em >= 0x7c00u);     \
    return as_float##N(as_uint##N(mag) | ((h & 0x8000u) << 16));                 \
  }
DEFINE_HALVES_TO_FLOAT(2)
DEFINE_HALVES_TO_FLOAT(4)
DEFINE_HALVES_TO_FLOAT(8)
DEFINE_HALVES_TO_FLOAT(16)
// Halves 0 and 1 at p (a block's d and m), as f16_at gives them.
inline float2 f16x2_at(__global const uchar* p) {
  return halves_to_float2(convert_uint2(vload2(0, (__global const ushort*)p)));
}

#if WTYPE == T_Q4_0 || WTYPE == T_Q4_1
#define Q4_SCALE_BYTES (WTYPE == T_Q4_0 ? 2 : 4)
#define Q4_HALVES (Q4_SCALE_BYTES / 2)  // scale halves per block: d (Q4_0); d, m (Q4_1)
#define Q4_GROUP (8 / Q4_HALVES)        // blocks whose scales fill 8 halves
// Block b of a scales-first Q4 row of nb blocks: its scale halves, and its 16 quant bytes.
inline __global const uchar* q4_scales(__global const uchar* row, int b) { return row + b * Q4_SCALE_BYTES; }
inline __global const uchar* q4_quants(__global const uchar* row, int nb, int b) {
  return row + nb * Q4_SCALE_BYTES + 16 * b;
}
// One Q4 block's products, given its scale d (and, Q4_1, its min m): see block_fma.
inline float16 q4_fma(uchar16 q, float d, float m, float16 xl, float16 xh, float16 acc) {
  const float16 lo = convert_float16(q & (uchar16)(15));
  const float16 hi = convert_float16(q >> (uchar16)(4));
#if WTYPE == T_Q4_0
  return fma((float16)(d), fma(lo - 8.0f, xl, (hi - 8.0f) * xh), acc);
#else
  return fma((float16)(m), xl + xh, fma((float16)(d), fma(lo, xl, hi * xh), acc));
#endif
}
#endif

#if WTYPE == T_Q8_0
#define Q8_0_BYTES 34  // a Q8_0 block: half d, char qs[32]
#define Q8_GROUP 4     // blocks whose scales convert as one vector (q8_scales4)
// Block b of a Q8_0 row.
inline __global const uchar* q8_block(__global const uchar* row, int b) { return row + b * Q8_0_BYTES; }
// The scales of the Q8_GROUP blocks from blk, Q8_0_BYTES apart, as one vector conversion.
inline float4 q8_scales4(__global const uchar* blk) {
  __global const ushort* h = (__global const ushort*)blk;  // rows and blocks start 2-byte aligned
  const int s = Q8_0_BYTES / 2;
  return halves_to_float4((uint4)(h[0], h[s], h[2 * s], h[3 * s]));
}
// One Q8_0 block's products (q its 32 quants, d its scale): see block_fma.
inline float16 q8_fma(__global const char* q, float d, float16 xl, float16 xh, float16 acc) {
  return fma((float16)(d), fma(convert_float16(vload16(0, q)), xl, convert_float16(vload16(1, q)) * xh), acc);
}
#endif

inline float8 bf16_8(__global const ushort* p) { return as_float8(convert_uint8(vload8(0, p)) << (uint8)(16)); }
inline float16 bf16_16(__global const ushort* p) { return as_float16(convert_uint16(vload16(0, p)) << (uint16)(16)); }

inline float8 nibbles_lo(uchar8 q) { return convert_float8(q & (uchar8)(15)); }
inline float8 nibbles_hi(uchar8 q) { return convert_float8(q >> (uchar8)(4)); }

// Q4_K/Q5_K: 6-bit scale and min of sub-block j from the 12 packed bytes (bytes 0-3 hold
// scales 0-3 and the top bits of scales 4-7, bytes 4-7 the same for the mins, bytes 8-11 the
// low nibbles of scale / min j + 4).
inline float2 k_scale_min(__global const uchar* q, int j) {
  if (j < 4) return (float2)((float)(q[j] & 63), (float)(q[j + 4] & 63));
  return (float2)((float)((q[j + 4] & 15) | ((q[j - 4] >> 6) << 4)), (float)((q[j + 4] >> 4) | ((q[j] >> 6) << 4)));
}

// Q5_0/Q5_1: the fifth bits of elements first .. first + 7 (16) of a block, from its 4-byte
// qh at byte `at` (2 for Q5_0, 4 for Q5_1).
inline uint q5_qh(__global const uchar* b, int at) {
  return (uint)b[at] | ((uint)b[at + 1] << 8) | ((uint)b[at + 2] << 16) | ((uint)b[at + 3] << 24);
}
inline uchar8 q5_bits8(uint qh, int first) {
  return convert_uchar8(((uint8)(qh >> first) >> (uint8)(0, 1, 2, 3, 4, 5, 6, 7)) & (uint8)(1)) << (uchar8)(4);
}
inline uchar16 q5_bits16(uint qh, int first) {
  return convert_uchar16(((uint16)(qh >> first) >> (uint16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) &
                         (uint16)(1))
         << (uchar16)(4);
}

inline float8 load8(__global const uchar* row, int k, int K) {
#if WTYPE == T_F32
  return vload8(0, (__global const float*)row + k);
#elif WTYPE == T_F16
  return vload_half8(0, (__global const half*)row + k);
#elif WTYPE == T_BF16
  return bf16_8((__global const ushort*)row + k);
#elif WTYPE == T_Q4_0 || WTYPE == T_Q4_1
  __global const uchar* sc = q4_scales(row, k >> 5);
  const int j = k & 31;
  const float d = f16_at(sc, 0);
  const uchar8 q = vload8(0, q4_quants(row, K / 32, k >> 5) + (j & 15));
  const float8 v = j < 16 ? nibbles_lo(q) : nibbles_hi(q);
#if WTYPE == T_Q4_0
  return (v - 8.0f) * d;
#else
  const float m = f16_at(sc, 1);
  return v * d + m;
#endif
#elif WTYPE == T_Q5_0
  __global const uchar* b = row + (k >> 5) * 22;
  const int j = k & 31;
  const float d = f16_at(b, 0);
  const uchar8 q = vload8(0, b + 6 + (j & 15));
  const uchar8 low4 = j < 16 ? (q & (uchar8)(15)) : (q >> (uchar8)(4));
  return (convert_float8(low4 | q5_bits8(q5_qh(b, 2), j)) - 16.0f) * d;
#elif WTYPE == T_Q5_1
  __global const uchar* b = row + (k >> 5) * 24;
  const int j = k & 31;
  const float d = f16_at(b, 0);
  const float m = f16_at(b, 1);
  const uchar8 q = vload8(0, b + 8 + (j & 15));
  const uchar8 low4 = j < 16 ? (q & (uchar8)(15)) : (q >> (uchar8)(4));
  return convert_float8(low4 | q5_bits8(q5_qh(b, 4), j)) * d + m;
#elif WTYPE == T_Q8_0
  __global const uchar* b = q8_block(row, k >> 5);
  const float d = f16_at(b, 0);
  return convert_float8(vload8(0, (__global const char*)(b + 2) + (k & 31))) * d;
#elif WTYPE == T_Q4_K || WTYPE == T_Q5_K
#if WTYPE == T_Q4_K
  __global const uchar* b = row + (k >> 8) * 144;
  const int qs_at = 16;
#else
  __global const uchar* b = row + (k >> 8) * 176;
  const int qs_at = 48;
#endif
  const int j = (k & 255) >> 5;  // sub-block
  const int l = k & 31;
  const float2 sm = k_scale_min(b + 4, j);
  const float d = f16_at(b, 0) * sm.x;
  const float m = f16_at(b, 1) * sm.y;
  const uchar8 q = vload8(0, b + qs_at + 32 * (j >> 1) + l);
  uchar8 v = (j & 1) ? (q >> (uchar8)(4)) : (q & (uchar8)(15));
#if WTYPE == T_Q5_K
  v |= ((vload8(0, b + 16 + l) >> (uchar8)(j)) & (uchar8)(1)) << (uchar8)(4);
#endif
  return convert_float8(v) * d - m;
#elif WTYPE == T_Q6_K
  __global const uchar* b = row + (k >> 8) * 210;
  const int j = k & 255;        // position in the super-block
  const int half_ = j >> 7;     // which 128-element half
  const int r = j & 127;
  const int quarter = r >> 5;   // 0..3: which of the 4 interleaved 32-runs
  const int l = r & 31;         // 0..31, multiple of 8
  __global const uchar* ql = b + half_ * 64;
  __global const uchar* qh = b + 128 + half_ * 32;
  __global const char* sc = (__global const char*)(b + 192) + half_ * 8;
  const float d = f16_at(b + 208, 0);
  const uchar8 lo = vload8(0, ql + l + ((quarter & 1) ? 32 : 0));
  const uchar8 hi = vload8(0, qh + l);
  const uchar8 low4 = (quarter < 2) ? (lo & (uchar8)(15)) : (lo >> (uchar8)(4));
  const uchar8 high2 = (hi >> (uchar8)(2 * quarter)) & (uchar8)(3);
  const float8 q = convert_float8(convert_int8(low4 | (high2 << (uchar8)(4))) - 32);
  return q * (d * (float)sc[(l >> 4) + 2 * quarter]);
#else
#error "unsupported WTYPE"
#endif
}

// block_fma(row, b, nb, xl, xh, acc): acc += weights[32b .. 32b+31] * x (a row of nb blocks of
// 32), where xl holds x for the block's elements 0..15 and xh for 16..31; the 16 lanes of
// acc are summed at the end.
// Keeping a vector accumulator (the Q4_1 offset m folds in as m*(xl+xh)) avoids a
// horizontal reduction per block, which is what makes decode matvec fast on CPUs.
inline float16 block_fma(__global const uchar* row, int b, int nb, float16 xl, float16 xh, float16 acc) {
#if WTYPE == T_F32
  __global const float* w = (__global const float*)row + b * 32;
  return fma(vload16(0, w), xl, fma(vload16(1, w), xh, acc));
#elif WTYPE == T_F16
  __global const half* w = (__global const half*)row + b * 32;
  return fma(vload_half16(0, w), xl, fma(vload_half16(1, w), xh, acc));
#elif WTYPE == T_BF16
  __global const ushort* w = (__global const ushort*)row + b * 32;
  return fma(bf16_16(w), xl, fma(bf16_16(w + 16), xh, acc));
#elif WTYPE == T_Q4_0
  return q4_fma(vload16(0, q4_quants(row, nb, b)), f16_at(q4_scales(row, b), 0), 0.0f, xl, xh, acc);
#elif WTYPE == T_Q4_1
  const float2 dm = f16x2_at(q4_scales(row, b));
  return q4_fma(vload16(0, q4_quants(row, nb, b)), dm.x, dm.y, xl, xh, acc);
#elif WTYPE == T_Q5_0
  __global const uchar* blk = row + b * 22;
  const float d = f16_at(blk, 0);
  const uint qh = q5_qh(blk, 2);
  const uchar16 q = vload16(0, blk + 6);
  const float16 lo = convert_float16((q & (uchar16)(15)) | q5_bits16(qh, 0)) - 16.0f;
  const float16 hi = convert_float16((q >> (uchar16)(4)) | q5_bits16(qh, 16)) - 16.0f;
  return fma((float16)(d), fma(lo, xl, hi * xh), acc);
#elif WTYPE == T_Q5_1
  __global const uchar* blk = row + b * 24;
  const float d = f16_at(blk, 0);
  const float m = f16_at(blk, 1);
  const uint qh = q5_qh(blk, 4);
  const uchar16 q = vload16(0, blk + 8);
  const float16 lo = convert_float16((q & (uchar16)(15)) | q5_bits16(qh, 0));
  const float16 hi = convert_float16((q >> (uchar16)(4)) | q5_bits16(qh, 16));
  return fma((float16)(m), xl + xh, fma((float16)(d), fma(lo, xl, hi * xh), acc));
#elif WTYPE == T_Q8_0
  __global const uchar* blk = q8_block(row, b);
  return q8_fma((__global const char*)(blk + 2), f16_at(blk, 0), xl, xh, acc);
#elif WTYPE == T_Q4_K || WTYPE == T_Q5_K
  // One 32-element sub-block j of super-block b / 8: w = d*sc*q - dmin*m, so the min folds
  // in as -(dmin*m) * (xl + xh), like Q4_1's offset. Q5_K: each q has a fifth bit, bit j of
  // qh[l] for element l.
#if WTYPE == T_Q4_K
  __global const uchar* sb = row + (b >> 3) * 144;
  const int qs_at = 16;
#else
  __global const uchar* sb = row + (b >> 3) * 176;
  const int qs_at = 48;
#endif
  const int j = b & 7;
  const float2 sm = k_scale_min(sb + 4, j);
  const float d = f16_at(sb, 0) * sm.x;
  const float m = f16_at(sb, 1) * sm.y;
  __global const uchar* qs = sb + qs_at + 32 * (j >> 1);
  const uchar16 q0 = vload16(0, qs), q1 = vload16(1, qs);
  uchar16 l0 = (j & 1) ? (q0 >> (uchar16)(4)) : (q0 & (uchar16)(15));
  uchar16 l1 = (j & 1) ? (q1 >> (uchar16)(4)) : (q1 & (uchar16)(15));
#if WTYPE == T_Q5_K
  l0 |= ((vload16(0, sb + 16) >> (uchar16)(j)) & (uchar16)(1)) << (uchar16)(4);
  l1 |= ((vload16(1, sb + 16) >> (uchar16)(j)) & (uchar16)(1)) << (uchar16)(4);
#endif
  return fma((float16)(-m), xl + xh, fma((float16)(d), fma(convert_float16(l0), xl, convert_float16(l1) * xh), acc));
#elif WTYPE == T_Q6_K
  __global const uchar* sb = row + (b >> 3) * 210;
  const int j = b & 7;           // which 32-run of the super-block
  const int half_ = j >> 2;
  const int quarter = j & 3;
  __global const uchar* ql = sb + half_ * 64 + ((quarter & 1) ? 32 : 0);
  __global const uchar* qh = sb + 128 + half_ * 32;
  __global const char* sc = (__global const char*)(sb + 192) + half_ * 8 + 2 * quarter;
  const float d = f16_at(sb + 208, 0);
  float16 out = acc;
  for (int p = 0; p < 2; ++p) {  // elements 0..15 then 16..31 (each has its own scale)
    const uchar16 lo = vload16(p, ql);
    const uchar16 hi = vload16(p, qh);
    const uchar16 low4 = (quarter < 2) ? (lo & (uchar16)(15)) : (lo >> (uchar16)(4));
    const uchar16 high2 = (hi >> (uchar16)(2 * quarter)) & (uchar16)(3);
    const float16 q = convert_float16(convert_int16(low4 | (high2 << (uchar16)(4))) - 32);
    out = fma((float16)(d * (float)sc[p]), q * (p ? xh : xl), out);
  }
  return out;
#endif
}
