// Reference (de)quantizers for the 256-element k-quant super-blocks Q4_K, Q5_K and Q6_K.
// A super-block has one fp16 scale (and min scale) and small integer scales per sub-block.
// The quantizers are simple: per sub-block min/max (or absmax), the sub-block scales rounded
// onto the super-block scale, then round-to-nearest codes against the rounded scales. They
// are not the error-minimising searches real converters use; they exist to write test
// models and to check the dequantizers. Layouts: quant_blocks.h.
#include <algorithm>
#include <cmath>

#include "model_loader/quant_blocks.h"
#include "model_loader/quant_impl.h"

namespace infinipot::quant::detail {
namespace {

int round_clamp(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;  // also catches NaN
  if (!(v <= static_cast<float>(hi))) return hi;
  return static_cast<int>(std::lrintf(v));
}

// The fp16 at or above x (x >= 0). Super-block scales round up so that the small integer
// sub-block scales derived from them never need more than their 6 or 8 bits; rounding down
// would clamp them and leave the largest values of a sub-block uncovered (noticeable when
// the scale is an fp16 subnormal, i.e. for very small weights).
uint16_t fp16_round_up(float x) {
  uint16_t h = fp32_to_fp16(x);
  if (fp16_to_fp32(h) < x) ++h;  // the next half up (positive halves are ordered as integers)
  return h;
}

// Q4_K/Q5_K pack 8 six-bit scales and 8 six-bit mins into 12 bytes: bytes 0-3 hold scales
// 0-3 (low 6 bits) and the top 2 bits of scales 4-7; bytes 4-7 the same for the mins;
// bytes 8-11 the low 4 bits of scale j+4 (low nibble) and min j+4 (high nibble).
void unpack_scale_min(const uint8_t q[12], int j, int& scale, int& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void pack_scale_min(const int scale[8], const int min[8], uint8_t q[12]) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>(scale[j] | (scale[j + 4] >> 4) << 6);
    q[j + 4] = static_cast<uint8_t>(min[j] | (min[j + 4] >> 4) << 6);
    q[j + 8] = static_cast<uint8_t>((scale[j + 4] & 0x0f) | (min[j + 4] & 0x0f) << 4);
  }
}

// Shared by Q4_K (max_q 15) and Q5_K (max_q 31): x ~= d*sc[j]*q - dmin*m[j] with q in
// [0, max_q]. Fills the 12 packed scale bytes, d, dmin and the 256 codes.
void quantize_scaled_min(const float* x, int max_q, uint16_t& d_out, uint16_t& dmin_out,
                         uint8_t scales[12], uint8_t codes[kQK_K]) {
  constexpr int kSub = 32;
  float sub_scale[8], sub_min[8];
  float max_scale = 0.f, max_min = 0.f;
  for (int j = 0; j < 8; ++j) {
    const float* s = x + j * kSub;
    float lo = std::min(0.f, *std::min_element(s, s + kSub));  // the min is subtracted, >= 0
    float hi = *std::max_element(s, s + kSub);
    sub_scale[j] = (hi - lo) / static_cast<float>(max_q);
    sub_min[j] = -lo;
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  d_out = fp16_round_up(max_scale / 63.f);
  dmin_out = fp16_round_up(max_min / 63.f);
  const float d = fp16_to_fp32(d_out), dmin = fp16_to_fp32(dmin_out);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    // Scales round up so the sub-block range stays covered; mins round to nearest.
    sc[j] = d > 0.f ? round_clamp(std::ceil(sub_scale[j] / d - 1e-4f), 0, 63) : 0;
    mn[j] = dmin > 0.f ? round_clamp(sub_min[j] / dmin, 0, 63) : 0;
    const float step = d * static_cast<float>(sc[j]);
    const float offset = dmin * static_cast<float>(mn[j]);
    for (int i = 0; i < kSub; ++i) {
      const float v = x[j * kSub + i];
      codes[j * kSub + i] = static_cast<uint8_t>(step > 0.f ? round_clamp((v + offset) / step, 0, max_q) : 0);
    }
  }
  pack_scale_min(sc, mn, scales);
}

}  // namespace

void dequantize_q4_k(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    auto blk = load_block<BlockQ4_K>(src, b);
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int c = 0; c < 4; ++c) {  // 64-element chunks: two sub-blocks sharing 32 bytes of qs
      int sc0, m0, sc1, m1;
      unpack_scale_min(blk.scales, 2 * c, sc0, m0);
      unpack_scale_min(blk.scales, 2 * c + 1, sc1, m1);
      const uint8_t* qs = blk.qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        *dst++ = d * static_cast<float>(sc0) * static_cast<float>(qs[l] & 0x0f) - dmin * static_cast<float>(m0);
      }
      for (int l = 0; l < 32; ++l) {
        *dst++ = d * static_cast<float>(sc1) * static_cast<float>(qs[l] >> 4) - dmin * static_cast<float>(m1);
      }
    }
  }
}

void dequantize_q5_k(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    auto blk = load_block<BlockQ5_K>(src, b);
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int c = 0; c < 4; ++c) {
      int sc0, m0, sc1, m1;
      unpack_scale_min(blk.scales, 2 * c, sc0, m0);
      unpack_scale_min(blk.scales, 2 * c + 1, sc1, m1);
      const uint8_t* qs = blk.qs + 32 * c;
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[l] & 0x0f) | ((blk.qh[l] >> (2 * c)) & 1) << 4;
        *dst++ = d * static_cast<float>(sc0) * static_cast<float>(q) - dmin * static_cast<float>(m0);
      }
      for (int l = 0; l < 32; ++l) {
        const int q = (qs[l] >> 4) | ((blk.qh[l] >> (2 * c + 1)) & 1) << 4;
        *dst++ = d * static_cast<float>(sc1) * static_cast<float>(q) - dmin * static_cast<float>(m1);
      }
    }
  }
}

void dequantize_q6_k(const void* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, dst += kQK_K) {
    auto blk = load_block<BlockQ6_K>(src, b);
    const float d = fp16_to_fp32(blk.d);
    for (int h = 0; h < 2; ++h) {  // two 128-element halves
      const uint8_t* ql = blk.ql + 64 * h;
      const uint8_t* qh = blk.qh + 32 * h;
      float* y = dst + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {
            ((ql[l] & 0x0f) | ((qh[l] >> 0) & 3) << 4) - 32,
            ((ql[l + 32] & 0x0f) | ((qh[l] >> 2) & 3) << 4) - 32,
            ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32,
            ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32,
        };
        for (int k = 0; k < 4; ++k) {
          const int pos = 128 * h + l + 32 * k;  // scale index is the 16-element sub-block
          y[l + 32 * k] = d * static_cast<float>(blk.scales[pos / 16]) * static_cast<float>(q[k]);
        }
      }
    }
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK_K) {
    BlockQ4_K blk{};
    uint8_t codes[kQK_K];
    quantize_scaled_min(src, 15, blk.d, blk.dmin, blk.scales, codes);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        blk.qs[32 * c + l] = static_cast<uint8_t>(codes[64 * c + l] | codes[64 * c + 32 + l] << 4);
      }
    }
    store_block(dst, b, blk);
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK_K) {
    BlockQ5_K blk{};
    uint8_t codes[kQK_K];
    quantize_scaled_min(src, 31, blk.d, blk.dmin, blk.scales, codes);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = codes[64 * c + l], hi = codes[64 * c + 32 + l];
        blk.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | (hi & 0x0f) << 4);
        blk.qh[l] = static_cast<uint8_t>(blk.qh[l] | (lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
      }
    }
    store_block(dst, b, blk);
  }
}

void quantize_q6_k(const float* src, void* dst, int64_t n_blocks) {
  constexpr int kSub = 16;
  for (int64_t b = 0; b < n_blocks; ++b, src += kQK_K) {
    BlockQ6_K blk{};
    // Per sub-block scale maps its largest-magnitude element to code -32 (as in Q4_0).
    float sub_scale[kQK_K / kSub];
    float max_abs_scale = 0.f;
    for (int j = 0; j < kQK_K / kSub; ++j) {
      float m = 0.f;
      for (int i = 0; i < kSub; ++i) {
        if (std::fabs(src[j * kSub + i]) > std::fabs(m)) m = src[j * kSub + i];
      }
      sub_scale[j] = m / -32.f;
      max_abs_scale = std::max(max_abs_scale, std::fabs(sub_scale[j]));
    }
    blk.d = fp16_round_up(max_abs_scale / 127.f);
    const float d = fp16_to_fp32(blk.d);
    uint8_t codes[kQK_K];  // q + 32, in [0, 63]
    for (int j = 0; j < kQK_K / kSub; ++j) {
      const int sc = d > 0.f ? round_clamp(sub_scale[j] / d, -128, 127) : 0;
      blk.scales[j] = static_cast<int8_t>(sc);
      const float step = d * static_cast<float>(sc);
      for (int i = 0; i < kSub; ++i) {
        const float v = src[j * kSub + i];
        codes[j * kSub + i] = static_cast<uint8_t>((step != 0.f ? round_clamp(v / step, -32, 31) : 0) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      const uint8_t* q = codes + 128 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((q[l] & 0x0f) | (q[l + 64] & 0x0f) << 4);
        ql[l + 32] = static_cast<uint8_t>((q[l + 32] & 0x0f) | (q[l + 96] & 0x0f) << 4);
        qh[l] = static_cast<uint8_t>(q[l] >> 4 | (q[l + 32] >> 4) << 2 | (q[l + 64] >> 4) << 4 |
                                     (q[l + 96] >> 4) << 6);
      }
    }
    store_block(dst, b, blk);
  }
}

}  // namespace infinipot::quant::detail
