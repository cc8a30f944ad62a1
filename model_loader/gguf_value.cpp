// Value accessors and value type names. A Value keeps the type it was stored with, so the
// accessors convert between integer widths only when the number fits, and say what they
// found otherwise; GgufFile's typed getters add the key name to these messages.
#include <fmt/format.h>

#include <limits>

#include "model_loader/gguf.h"

namespace infinipot::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8: return "UINT8";
    case ValueType::INT8: return "INT8";
    case ValueType::UINT16: return "UINT16";
    case ValueType::INT16: return "INT16";
    case ValueType::UINT32: return "UINT32";
    case ValueType::INT32: return "INT32";
    case ValueType::FLOAT32: return "FLOAT32";
    case ValueType::BOOL: return "BOOL";
    case ValueType::STRING: return "STRING";
    case ValueType::ARRAY: return "ARRAY";
    case ValueType::UINT64: return "UINT64";
    case ValueType::INT64: return "INT64";
    case ValueType::FLOAT64: return "FLOAT64";
  }
  return "UNKNOWN";
}

namespace {

bool is_unsigned_type(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
         t == ValueType::UINT64;
}
bool is_signed_type(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
         t == ValueType::INT64;
}

// "an ARRAY of STRING" / "a FLOAT32": used in "expected X, found Y" messages.
std::string describe(const Value& v) {
  if (v.is_array()) return fmt::format("an ARRAY of {}", value_type_name(v.elem_type));
  return fmt::format("a {}", value_type_name(v.type));
}

}  // namespace

bool Value::is_integer() const { return is_unsigned_type(type) || is_signed_type(type); }

bool Value::is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }

uint64_t Value::as_u64() const {
  if (is_unsigned_type(type)) return std::get<uint64_t>(scalar);
  if (is_signed_type(type)) {
    int64_t v = std::get<int64_t>(scalar);
    if (v >= 0) return static_cast<uint64_t>(v);
    throw GgufError(fmt::format("expected a non-negative integer, found {} {}", describe(*this), v));
  }
  throw GgufError(fmt::format("expected an integer, found {}", describe(*this)));
}

int64_t Value::as_i64() const {
  if (is_signed_type(type)) return std::get<int64_t>(scalar);
  if (is_unsigned_type(type)) {
    uint64_t v = std::get<uint64_t>(scalar);
    if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return static_cast<int64_t>(v);
    }
    throw GgufError(fmt::format("integer {} does not fit in int64", v));
  }
  throw GgufError(fmt::format("expected an integer, found {}", describe(*this)));
}

double Value::as_f64() const {
  if (is_float()) return std::get<double>(scalar);
  if (is_unsigned_type(type)) return static_cast<double>(std::get<uint64_t>(scalar));
  if (is_signed_type(type)) return static_cast<double>(std::get<int64_t>(scalar));
  throw GgufError(fmt::format("expected a number, found {}", describe(*this)));
}

bool Value::as_bool() const {
  if (type == ValueType::BOOL) return std::get<bool>(scalar);
  throw GgufError(fmt::format("expected a BOOL, found {}", describe(*this)));
}

const std::string& Value::as_string() const {
  if (type == ValueType::STRING) return std::get<std::string>(scalar);
  throw GgufError(fmt::format("expected a STRING, found {}", describe(*this)));
}

}  // namespace infinipot::gguf
