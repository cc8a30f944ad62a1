// Byte layouts of the quantized blocks we (de)quantize, as stored in GGUF files. Scales are
// IEEE half floats stored as raw uint16 bits (quant::fp16_to_fp32). Blocks are read with
// memcpy, so the structs never alias the (possibly unaligned) file bytes. Tests and device
// kernel tests use these to hand-build blocks.
#pragma once
#include <cstdint>

namespace infinipot::quant {

inline constexpr int kQK = 32;    // elements per block of the "legacy" formats
inline constexpr int kQK_K = 256; // elements per super-block of the k-quants

// x[i] = (nibble_i - 8) * d. Element i < 16 is the low nibble of qs[i], element i + 16 the
// high nibble of qs[i] (the same split for every 32-element legacy format below).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// x[i] = nibble_i * d + m
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// x[i] = ((nibble_i | bit_i << 4) - 16) * d, bit_i = bit i of the little-endian uint32 qh.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[i] = (nibble_i | bit_i << 4) * d + m
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x[i] = qs[i] * d
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};

// 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed into `scales` (see
// quant_kquants.cpp): x = d * sc[j] * q - dmin * m[j]. In each 64-element chunk c, the first
// 32 elements are the low nibbles of qs[32c .. 32c+32), the next 32 the high nibbles.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K plus a fifth bit: element 64c + l takes bit 2c of qh[l], element 64c + 32 + l
// takes bit 2c + 1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16 with signed 8-bit scales: x = d * scales[i / 16] * (q - 32), q 6 bits.
// Each 128-element half h uses ql[64h..], qh[32h..]; for l < 32 the four elements
// l, l+32, l+64, l+96 take their low 4 bits from ql[l] lo, ql[l+32] lo, ql[l] hi, ql[l+32] hi
// and their top 2 bits from qh[l] bits 0-1, 2-3, 4-5, 6-7.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20, "ggml block layout");
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24, "ggml block layout");
static_assert(sizeof(BlockQ8_0) == 34, "ggml block layout");
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176, "ggml block layout");
static_assert(sizeof(BlockQ6_K) == 210, "ggml block layout");

}  // namespace infinipot::quant
