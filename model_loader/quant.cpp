// Type traits for every ggml tensor type id, fp16 conversion, and the dispatch to the
// per-format reference (de)quantizers. Types we cannot dequantize are still "known" so a
// model using them parses and map_weights can name the unsupported type.
#include "model_loader/quant.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "model_loader/quant_impl.h"

namespace infinipot::quant {
namespace {

constexpr size_t kMaxTypeId = 35;

// Indexed by the type id stored in the file. Ids 4, 5 (removed Q4_2/Q4_3) and 31-33
// (removed repacked Q4_0 variants) are unknown: no current file uses them.
std::array<std::optional<TypeTraits>, kMaxTypeId + 1> make_table() {
  std::array<std::optional<TypeTraits>, kMaxTypeId + 1> t{};
  auto set = [&](uint32_t id, const char* name, int64_t elems, size_t bytes, bool supported) {
    // Keep in step with WTYPE in cl_kernels/quant_formats.cl.
    const bool on_device = id == 0 || id == 1 || id == 2 || id == 3 || id == 6 || id == 7 || id == 8 || id == 12 ||
                           id == 13 || id == 14 || id == 30;
    t[id] = TypeTraits{name, elems, bytes, supported, on_device};
  };
  set(0, "F32", 1, 4, true);
  set(1, "F16", 1, 2, true);
  set(2, "Q4_0", 32, 18, true);
  set(3, "Q4_1", 32, 20, true);
  set(6, "Q5_0", 32, 22, true);
  set(7, "Q5_1", 32, 24, true);
  set(8, "Q8_0", 32, 34, true);
  set(9, "Q8_1", 32, 36, false);
  set(10, "Q2_K", 256, 84, false);
  set(11, "Q3_K", 256, 110, false);
  set(12, "Q4_K", 256, 144, true);
  set(13, "Q5_K", 256, 176, true);
  set(14, "Q6_K", 256, 210, true);
  set(15, "Q8_K", 256, 292, false);
  set(16, "IQ2_XXS", 256, 66, false);
  set(17, "IQ2_XS", 256, 74, false);
  set(18, "IQ3_XXS", 256, 98, false);
  set(19, "IQ1_S", 256, 50, false);
  set(20, "IQ4_NL", 32, 18, false);
  set(21, "IQ3_S", 256, 110, false);
  set(22, "IQ2_S", 256, 82, false);
  set(23, "IQ4_XS", 256, 136, false);
  set(24, "I8", 1, 1, false);
  set(25, "I16", 1, 2, false);
  set(26, "I32", 1, 4, false);
  set(27, "I64", 1, 8, false);
  set(28, "F64", 1, 8, false);
  set(29, "IQ1_M", 256, 56, false);
  set(30, "BF16", 1, 2, true);
  set(34, "TQ1_0", 256, 54, false);
  set(35, "TQ2_0", 256, 66, false);
  return t;
}

const std::array<std::optional<TypeTraits>, kMaxTypeId + 1>& table() {
  static const auto t = make_table();
  return t;
}

// Checks n against the block size and that a reference implementation exists; returns the
// number of blocks.
int64_t checked_blocks(TensorType t, int64_t n, const char* what) {
  const TypeTraits& tr = traits(t);
  if (!tr.supported) {
    throw gguf::GgufError(fmt::format("no reference {} for tensor type {}", what, tr.name));
  }
  if (n < 0 || n % tr.block_elems != 0) {
    throw gguf::GgufError(fmt::format("{} of {} elements of type {}: not a multiple of the block "
                                      "size {}", what, n, tr.name, tr.block_elems));
  }
  return n / tr.block_elems;
}

}  // namespace

const TypeTraits& traits(TensorType t) {
  auto id = static_cast<uint32_t>(t);
  if (!is_known_type(id)) throw gguf::GgufError(fmt::format("unknown tensor type id {}", id));
  return *table()[id];
}

bool is_known_type(uint32_t raw_type_id) {
  return raw_type_id <= kMaxTypeId && table()[raw_type_id].has_value();
}

std::string device_type_names() {
  std::string names;
  for (uint32_t id = 0; id <= kMaxTypeId; ++id)
    if (table()[id].has_value() && table()[id]->on_device) names += (names.empty() ? "" : ", ") + std::string(table()[id]->name);
  return names;
}

size_t row_bytes(TensorType t, int64_t n) {
  const TypeTraits& tr = traits(t);
  if (n < 0 || n % tr.block_elems != 0) {
    throw gguf::GgufError(fmt::format("row of {} elements of type {} is not a multiple of the "
                                      "block size {}", n, tr.name, tr.block_elems));
  }
  return static_cast<size_t>(n / tr.block_elems) * tr.block_bytes;
}

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
  int64_t nb = checked_blocks(t, n, "dequantizer");
  switch (t) {
    case TensorType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case TensorType::F16: {
      const auto* p = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    }
    case TensorType::BF16: {  // the upper half of a float's bits
      const auto* p = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(dst + i, &bits, 4);
      }
      return;
    }
    case TensorType::Q4_0: return detail::dequantize_q4_0(src, dst, nb);
    case TensorType::Q4_1: return detail::dequantize_q4_1(src, dst, nb);
    case TensorType::Q5_0: return detail::dequantize_q5_0(src, dst, nb);
    case TensorType::Q5_1: return detail::dequantize_q5_1(src, dst, nb);
    case TensorType::Q8_0: return detail::dequantize_q8_0(src, dst, nb);
    case TensorType::Q4_K: return detail::dequantize_q4_k(src, dst, nb);
    case TensorType::Q5_K: return detail::dequantize_q5_k(src, dst, nb);
    case TensorType::Q6_K: return detail::dequantize_q6_k(src, dst, nb);
    default: break;
  }
  throw gguf::GgufError(fmt::format("no reference dequantizer for tensor type {}", traits(t).name));
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n) {
  int64_t nb = checked_blocks(t, n, "quantizer");
  switch (t) {
    case TensorType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case TensorType::F16: {
      auto* p = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = fp32_to_fp16(src[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    }
    case TensorType::BF16: {  // rounded to nearest, ties to even; a NaN stays a (quiet) NaN
      auto* p = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, src + i, 4);
        const uint16_t h = std::isnan(src[i]) ? static_cast<uint16_t>((bits >> 16) | 0x40)
                                              : static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    }
    case TensorType::Q4_0: return detail::quantize_q4_0(src, dst, nb);
    case TensorType::Q4_1: return detail::quantize_q4_1(src, dst, nb);
    case TensorType::Q5_0: return detail::quantize_q5_0(src, dst, nb);
    case TensorType::Q5_1: return detail::quantize_q5_1(src, dst, nb);
    case TensorType::Q8_0: return detail::quantize_q8_0(src, dst, nb);
    case TensorType::Q4_K: return detail::quantize_q4_k(src, dst, nb);
    case TensorType::Q5_K: return detail::quantize_q5_k(src, dst, nb);
    case TensorType::Q6_K: return detail::quantize_q6_k(src, dst, nb);
    default: break;
  }
  throw gguf::GgufError(fmt::format("no reference quantizer for tensor type {}", traits(t).name));
}

// IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in float.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or nan keeping its payload
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest, ties to even; overflow gives inf, nan stays nan (quiet).
uint16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
  const int e = static_cast<int>(exp) - 127 + 15;  // exponent in half's bias
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    // Half subnormal: value = h * 2^-24 with h = full 24-bit mantissa >> (14 - e).
    if (e < -10) return sign;  // below half the smallest subnormal: rounds to zero
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may round up to inf
  return static_cast<uint16_t>(sign | h);
}

}  // namespace infinipot::quant
