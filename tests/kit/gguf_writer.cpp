// GGUF v3 writer. Layout written: header, key-value pairs in insertion order, tensor infos in
// insertion order, zero padding to the alignment, then each tensor's data padded to the
// alignment (offsets are relative to the data section).
#include "tests/kit/gguf_writer.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>

#include "model_loader/quant.h"

namespace infinipot::gguf {
namespace {

Value scalar(ValueType t, std::variant<uint64_t, int64_t, double, bool, std::string> v) {
  Value out;
  out.type = t;
  out.scalar = std::move(v);
  return out;
}

class Bytes {
 public:
  template <typename T>
  void put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    buf_.insert(buf_.end(), raw, raw + sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    buf_.insert(buf_.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (buf_.size() % alignment != 0) buf_.push_back(0);
  }
  void append(const std::vector<uint8_t>& v) { buf_.insert(buf_.end(), v.begin(), v.end()); }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t> take() { return std::move(buf_); }

 private:
  std::vector<uint8_t> buf_;
};

void put_scalar(Bytes& b, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: b.put(static_cast<uint8_t>(std::get<uint64_t>(v.scalar))); break;
    case ValueType::INT8: b.put(static_cast<int8_t>(std::get<int64_t>(v.scalar))); break;
    case ValueType::UINT16: b.put(static_cast<uint16_t>(std::get<uint64_t>(v.scalar))); break;
    case ValueType::INT16: b.put(static_cast<int16_t>(std::get<int64_t>(v.scalar))); break;
    case ValueType::UINT32: b.put(static_cast<uint32_t>(std::get<uint64_t>(v.scalar))); break;
    case ValueType::INT32: b.put(static_cast<int32_t>(std::get<int64_t>(v.scalar))); break;
    case ValueType::UINT64: b.put(std::get<uint64_t>(v.scalar)); break;
    case ValueType::INT64: b.put(std::get<int64_t>(v.scalar)); break;
    case ValueType::FLOAT32: b.put(static_cast<float>(std::get<double>(v.scalar))); break;
    case ValueType::FLOAT64: b.put(std::get<double>(v.scalar)); break;
    case ValueType::BOOL: b.put(static_cast<uint8_t>(std::get<bool>(v.scalar) ? 1 : 0)); break;
    case ValueType::STRING: b.put_string(std::get<std::string>(v.scalar)); break;
    case ValueType::ARRAY: throw GgufError("GgufWriter: nested arrays cannot be written");
  }
}

void put_value(Bytes& b, const Value& v) {
  b.put(static_cast<uint32_t>(v.type));
  if (!v.is_array()) return put_scalar(b, v);
  b.put(static_cast<uint32_t>(v.elem_type));
  b.put<uint64_t>(v.array.size());
  for (const Value& e : v.array) put_scalar(b, e);
}

}  // namespace

Value value_u8(uint8_t v) { return scalar(ValueType::UINT8, uint64_t{v}); }
Value value_i8(int8_t v) { return scalar(ValueType::INT8, int64_t{v}); }
Value value_u16(uint16_t v) { return scalar(ValueType::UINT16, uint64_t{v}); }
Value value_i16(int16_t v) { return scalar(ValueType::INT16, int64_t{v}); }
Value value_u32(uint32_t v) { return scalar(ValueType::UINT32, uint64_t{v}); }
Value value_i32(int32_t v) { return scalar(ValueType::INT32, int64_t{v}); }
Value value_u64(uint64_t v) { return scalar(ValueType::UINT64, v); }
Value value_i64(int64_t v) { return scalar(ValueType::INT64, v); }
// FLOAT32 values are kept as the double of the float, as the parser stores them.
Value value_f32(float v) { return scalar(ValueType::FLOAT32, double{v}); }
Value value_f64(double v) { return scalar(ValueType::FLOAT64, v); }
Value value_bool(bool v) { return scalar(ValueType::BOOL, v); }
Value value_string(std::string v) { return scalar(ValueType::STRING, std::move(v)); }

Value value_array(ValueType elem_type, std::vector<Value> elems) {
  if (elem_type == ValueType::ARRAY) throw GgufError("GgufWriter: arrays of arrays are not supported");
  for (size_t i = 0; i < elems.size(); ++i) {
    if (elems[i].type != elem_type) {
      throw GgufError(fmt::format("GgufWriter: array element {} is {}, expected {}", i,
                                  value_type_name(elems[i].type), value_type_name(elem_type)));
    }
  }
  Value out;
  out.type = ValueType::ARRAY;
  out.elem_type = elem_type;
  out.array = std::move(elems);
  return out;
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(32) {
  if (alignment != 32) set_u32("general.alignment", alignment);
}

void GgufWriter::set(const std::string& key, Value v) {
  for (const auto& kv : kv_) {
    if (kv.first == key) throw GgufError(fmt::format("GgufWriter: duplicate metadata key '{}'", key));
  }
  if (key == "general.alignment") {
    if (v.type != ValueType::UINT32) throw GgufError("GgufWriter: general.alignment must be a UINT32");
    uint64_t a = std::get<uint64_t>(v.scalar);
    if (a == 0 || (a & (a - 1)) != 0) {
      throw GgufError(fmt::format("GgufWriter: alignment {} is not a power of two", a));
    }
    alignment_ = static_cast<uint32_t>(a);
  }
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::replace(const std::string& key, Value v) {
  erase(key);
  set(key, std::move(v));
}

bool GgufWriter::erase(const std::string& key) {
  for (auto it = kv_.begin(); it != kv_.end(); ++it) {
    if (it->first == key) {
      if (key == "general.alignment") alignment_ = 32;
      kv_.erase(it);
      return true;
    }
  }
  return false;
}

bool GgufWriter::erase_tensor(const std::string& name) {
  for (auto it = tensors_.begin(); it != tensors_.end(); ++it) {
    if (it->name == name) {
      tensors_.erase(it);
      return true;
    }
  }
  return false;
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (const std::string& s : v) elems.push_back(value_string(s));
  set(key, value_array(ValueType::STRING, std::move(elems)));
}

void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (int32_t x : v) elems.push_back(value_i32(x));
  set(key, value_array(ValueType::INT32, std::move(elems)));
}

void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (float x : v) elems.push_back(value_f32(x));
  set(key, value_array(ValueType::FLOAT32, std::move(elems)));
}

void GgufWriter::add_tensor(const std::string& name, TensorType type,
                            const std::vector<int64_t>& shape, std::vector<uint8_t> data) {
  for (const auto& t : tensors_) {
    if (t.name == name) throw GgufError(fmt::format("GgufWriter: duplicate tensor '{}'", name));
  }
  if (shape.empty() || shape.size() > 4) {
    throw GgufError(fmt::format("GgufWriter: tensor '{}' has {} dimensions", name, shape.size()));
  }
  int64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  const size_t expected = quant::row_bytes(type, shape[0]) * static_cast<size_t>(rows);
  if (data.size() != expected) {
    throw GgufError(fmt::format("GgufWriter: tensor '{}' has {} bytes of data, its shape and type "
                                "need {}", name, data.size(), expected));
  }
  tensors_.push_back({name, type, shape, std::move(data)});
}

void GgufWriter::add_tensor_f32(const std::string& name, TensorType type,
                                const std::vector<int64_t>& shape, const std::vector<float>& values) {
  if (shape.empty()) throw GgufError(fmt::format("GgufWriter: tensor '{}' has no dimensions", name));
  const int64_t row = shape[0];
  int64_t rows = 1;
  for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  if (static_cast<int64_t>(values.size()) != row * rows) {
    throw GgufError(fmt::format("GgufWriter: tensor '{}' got {} values for {} elements", name,
                                values.size(), row * rows));
  }
  const size_t rb = quant::row_bytes(type, row);
  std::vector<uint8_t> data(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    quant::quantize_row(type, values.data() + r * row, data.data() + static_cast<size_t>(r) * rb, row);
  }
  add_tensor(name, type, shape, std::move(data));
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  Bytes b;
  b.put<uint8_t>('G');
  b.put<uint8_t>('G');
  b.put<uint8_t>('U');
  b.put<uint8_t>('F');
  b.put<uint32_t>(3);
  b.put<uint64_t>(tensors_.size());
  b.put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    b.put_string(key);
    put_value(b, value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    b.put_string(t.name);
    b.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) b.put<uint64_t>(static_cast<uint64_t>(d));
    b.put<uint32_t>(static_cast<uint32_t>(t.type));
    b.put<uint64_t>(offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  b.pad_to(alignment_);
  for (const PendingTensor& t : tensors_) {
    b.append(t.data);
    b.pad_to(alignment_);
  }
  return b.take();
}

void GgufWriter::write(const std::string& path) const {
  std::vector<uint8_t> bytes = to_bytes();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw GgufError(fmt::format("{}: cannot open for writing", path));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw GgufError(fmt::format("{}: write failed", path));
}

}  // namespace infinipot::gguf
