#include "model_loader/metadata_read.h"

#include <fmt/format.h>

#include <cmath>

namespace infinipot::meta {

void fail(const gguf::GgufFile& f, const std::string& msg) { throw gguf::GgufError(f.path() + ": " + msg); }

std::string shape_str(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

int get_int(const gguf::GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  const uint64_t v = f.get_u64(key);
  if (v < static_cast<uint64_t>(lo) || v > static_cast<uint64_t>(hi))
    fail(f, fmt::format("metadata '{}' is {}; expected {} to {}", key, v, lo, hi));
  return static_cast<int>(v);
}

int get_int_or(const gguf::GgufFile& f, const std::string& key, int64_t lo, int64_t hi, int fallback) {
  return f.has(key) ? get_int(f, key, lo, hi) : fallback;
}

float get_positive_float_or(const gguf::GgufFile& f, const std::string& key, float fallback) {
  if (!f.has(key)) return fallback;
  const float v = f.get_f32(key);
  if (!std::isfinite(v) || v <= 0.f) fail(f, fmt::format("metadata '{}' is {}; expected a positive number", key, v));
  return v;
}

}  // namespace infinipot::meta
