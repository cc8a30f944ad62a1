// A small GGUF v3 writer for tests, fuzz seeds and tiny models: metadata of every value type
// (arrays included) in insertion order, then tensor infos, then the aligned tensor data.
// It writes only well-formed files; tests that need malformed bytes patch the output.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model_loader/gguf.h"

namespace infinipot::gguf {

// Value builders (the Value struct keeps a stored type next to the C++ value).
Value value_u8(uint8_t v);
Value value_i8(int8_t v);
Value value_u16(uint16_t v);
Value value_i16(int16_t v);
Value value_u32(uint32_t v);
Value value_i32(int32_t v);
Value value_u64(uint64_t v);
Value value_i64(int64_t v);
Value value_f32(float v);
Value value_f64(double v);
Value value_bool(bool v);
Value value_string(std::string v);
// An array of scalars, all of elem_type (GgufError otherwise, or for nested arrays).
Value value_array(ValueType elem_type, std::vector<Value> elems);

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);

  // Adds a key; a second value for the same key is a GgufError (the format forbids it).
  void set(const std::string& key, Value v);
  void set_u32(const std::string& key, uint32_t v) { set(key, value_u32(v)); }
  void set_i32(const std::string& key, int32_t v) { set(key, value_i32(v)); }
  void set_u64(const std::string& key, uint64_t v) { set(key, value_u64(v)); }
  void set_f32(const std::string& key, float v) { set(key, value_f32(v)); }
  void set_bool(const std::string& key, bool v) { set(key, value_bool(v)); }
  void set_string(const std::string& key, std::string v) { set(key, value_string(std::move(v))); }
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  // Editing, so tests can derive broken variants from a good file: replace sets or
  // overwrites; erase/erase_tensor return false when the entry was not there.
  void replace(const std::string& key, Value v);
  bool erase(const std::string& key);
  bool erase_tensor(const std::string& name);

  // Raw tensor bytes of `type`: data.size() must equal the size the shape implies.
  // shape is in ggml order (shape[0] contiguous).
  void add_tensor(const std::string& name, TensorType type, const std::vector<int64_t>& shape,
                  std::vector<uint8_t> data);
  // float values quantized row by row to `type` with quant::quantize_row.
  void add_tensor_f32(const std::string& name, TensorType type, const std::vector<int64_t>& shape,
                      const std::vector<float>& values);

  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;  // GgufError naming the path on I/O failure

 private:
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace infinipot::gguf
