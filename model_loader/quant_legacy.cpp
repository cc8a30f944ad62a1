// Reference (de)quantizers for the 32-element "legacy" formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.
// The quantizers are plain round-to-nearest with one scale (and min) per block; they compute
// the codes from the fp16-rounded scale so dequantization reproduces what was intended.
// Layouts: quant_blocks.h.
#include <algorithm>
#include <cmath>

#include "model_loader/quant_blocks.h"
#include "model_loader/quant_impl.h"

namespace infinipot::quant::detail {
namespace {

// Rounds v to the nearest integer in [lo, hi]; NaN goes to lo (never UB on bad input).
int round_clamp(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (!(v <= static_cast<float>(hi))) return hi;
  return static_cast<int>(std::lrintf(v));
}

float inverse(float d) { return d != 0.f ? 1.f / d : 0.f; }

// The element with the largest magnitude, keeping its sign: the symmetric formats map it to
// the most negative code (-8 / -16), which has one more level than the positive side.
float signed_absmax(const float* x, int n) {
  float best = 0.f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

void min_max(const float* x, int n, float& lo, float& hi) {
  lo = x[0];
  hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
}

// Fifth bits of a Q5 block as the little-endian uint32 they are stored as.
uint32_t load_qh(const uint8_t qh[4]) {
  return uint32_t{qh[0]} | uint32_t{qh[1]} << 8 | uint32_t{qh[2]} << 16 | uint32_t{qh[3]} << 24;
}
void store_qh(uint8_t qh[4], uint32_t bits) {
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(bits >> (8 * i));
}

}  // namespace

void dequantize_q4_0(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK) {
    auto blk = load_block<BlockQ4_0>(src, b);
    const float d = fp16_to_fp32(blk.d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((blk.qs[j] & 0x0f) - 8) * d;
      dst[j + kQK / 2] = static_cast<float>((blk.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK) {
    auto blk = load_block<BlockQ4_1>(src, b);
    const float d = fp16_to_fp32(blk.d), m = fp16_to_fp32(blk.m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(blk.qs[j] & 0x0f) * d + m;
      dst[j + kQK / 2] = static_cast<float>(blk.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK) {
    auto blk = load_block<BlockQ5_0>(src, b);
    const float d = fp16_to_fp32(blk.d);
    const uint32_t qh = load_qh(blk.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0f) | static_cast<int>((qh >> j) & 1u) << 4;
      const int hi = (blk.qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4;
      dst[j] = static_cast<float>(lo - 16) * d;
      dst[j + kQK / 2] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequantize_q5_1(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK) {
    auto blk = load_block<BlockQ5_1>(src, b);
    const float d = fp16_to_fp32(blk.d), m = fp16_to_fp32(blk.m);
    const uint32_t qh = load_qh(blk.qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0f) | static_cast<int>((qh >> j) & 1u) << 4;
      const int hi = (blk.qs[j] >> 4) | static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4;
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + kQK / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_q8_0(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK) {
    auto blk = load_block<BlockQ8_0>(src, b);
    const float d = fp16_to_fp32(blk.d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(blk.qs[j]) * d;
  }
}

void quantize_q4_0(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK) {
    BlockQ4_0 blk{};
    blk.d = fp32_to_fp16(signed_absmax(src, kQK) / -8.f);
    const float id = inverse(fp16_to_fp32(blk.d));
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = round_clamp(src[j] * id, -8, 7) + 8;
      const int hi = round_clamp(src[j + kQK / 2] * id, -8, 7) + 8;
      blk.qs[j] = static_cast<uint8_t>(lo | hi << 4);
    }
    store_block(dst, b, blk);
  }
}

void quantize_q4_1(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK) {
    BlockQ4_1 blk{};
    float lo, hi;
    min_max(src, kQK, lo, hi);
    blk.d = fp32_to_fp16((hi - lo) / 15.f);
    blk.m = fp32_to_fp16(lo);
    const float id = inverse(fp16_to_fp32(blk.d)), m = fp16_to_fp32(blk.m);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = round_clamp((src[j] - m) * id, 0, 15);
      const int q1 = round_clamp((src[j + kQK / 2] - m) * id, 0, 15);
      blk.qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
    store_block(dst, b, blk);
  }
}

void quantize_q5_0(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK) {
    BlockQ5_0 blk{};
    blk.d = fp32_to_fp16(signed_absmax(src, kQK) / -16.f);
    const float id = inverse(fp16_to_fp32(blk.d));
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = round_clamp(src[j] * id, -16, 15) + 16;
      const int q1 = round_clamp(src[j + kQK / 2] * id, -16, 15) + 16;
      blk.qs[j] = static_cast<uint8_t>((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
    }
    store_qh(blk.qh, qh);
    store_block(dst, b, blk);
  }
}

void quantize_q5_1(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK) {
    BlockQ5_1 blk{};
    float lo, hi;
    min_max(src, kQK, lo, hi);
    blk.d = fp32_to_fp16((hi - lo) / 31.f);
    blk.m = fp32_to_fp16(lo);
    const float id = inverse(fp16_to_fp32(blk.d)), m = fp16_to_fp32(blk.m);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = round_clamp((src[j] - m) * id, 0, 31);
      const int q1 = round_clamp((src[j + kQK / 2] - m) * id, 0, 31);
      blk.qs[j] = static_cast<uint8_t>((q0 & 0x0f) | (q1 & 0x0f) << 4);
      qh |= static_cast<uint32_t>(q0 >> 4) << j | static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
    }
    store_qh(blk.qh, qh);
    store_block(dst, b, blk);
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK) {
    BlockQ8_0 blk{};
    blk.d = fp32_to_fp16(std::fabs(signed_absmax(src, kQK)) / 127.f);
    const float id = inverse(fp16_to_fp32(blk.d));
    for (int j = 0; j < kQK; ++j) blk.qs[j] = static_cast<int8_t>(round_clamp(src[j] * id, -127, 127));
    store_block(dst, b, blk);
  }
}

}  // namespace infinipot::quant::detail
