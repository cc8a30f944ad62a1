// GGUF v2/v3 reader: the file is mmapped once; metadata is parsed into owned values,
// tensors are non-owning views into the mapping. Every structural problem is a GgufError
// naming the field and what was expected. Spec: ggml/docs/gguf.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace infinipot::gguf {

class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

// ggml tensor type ids as stored in the file.
enum class TensorType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

// One metadata value. Scalars keep their stored type; arrays hold their element type and
// elements (arrays of arrays are rejected by the parser: no GGUF model uses them).
struct Value {
  ValueType type = ValueType::UINT8;
  ValueType elem_type = ValueType::UINT8;  // meaningful when type == ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string> scalar;
  std::vector<Value> array;  // elements when type == ARRAY (scalars only)

  bool is_array() const { return type == ValueType::ARRAY; }
  bool is_integer() const;   // any UINT*/INT* scalar
  bool is_float() const;     // FLOAT32/FLOAT64 scalar
  uint64_t as_u64() const;   // integer scalar >= 0, else GgufError
  int64_t as_i64() const;    // integer scalar in range, else GgufError
  double as_f64() const;     // float or integer scalar, else GgufError
  bool as_bool() const;
  const std::string& as_string() const;
};

struct TensorInfo {
  std::string name;
  TensorType type = TensorType::F32;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous (row) dimension
  uint64_t offset = 0;         // relative to the start of the tensor data section
  uint64_t n_bytes = 0;        // validated against type block size
  int64_t n_elements() const;
  int64_t rows() const;        // product of shape[1..]
};

class GgufFile {
 public:
  // Maps and validates the whole file: magic, version (2 or 3), counts, string/array lengths,
  // value and tensor types, dimensions (<= 4, > 0, no overflow), alignment, tensor offsets and
  // sizes inside the file, no overlap, no duplicate keys or tensor names.
  static GgufFile open(const std::string& path);
  // Same checks on a caller-owned buffer (fuzzing, tests). The buffer must outlive the object.
  static GgufFile from_memory(const uint8_t* data, size_t size, const std::string& label = "<memory>");

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const;
  uint32_t version() const;
  uint64_t alignment() const;
  size_t file_size() const;
  uint64_t data_offset() const;  // start of the tensor data section (TensorInfo::offset base)

  const std::map<std::string, Value>& metadata() const;
  bool has(const std::string& key) const;
  const Value& get(const std::string& key) const;  // GgufError "missing required metadata key"
  // Typed getters: GgufError naming the key when missing or of the wrong type.
  uint64_t get_u64(const std::string& key) const;
  uint32_t get_u32(const std::string& key) const;
  float get_f32(const std::string& key) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<float> get_float_array(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find_tensor(const std::string& name) const;  // nullptr if absent
  const uint8_t* tensor_data(const TensorInfo& t) const;          // pointer into the mapping
  // Copies n bytes of a tensor from `offset` with checked reads of the file (pread), not
  // through the mapping: a file truncated or replaced while in use gives a GgufError here,
  // where touching the mapping would kill the process with SIGBUS. What the device upload
  // and everything after open() use.
  void read_tensor(const TensorInfo& t, void* dst, uint64_t offset, uint64_t n) const;
  // Tells the kernel that the file's pages of this tensor will not be read again (after the
  // weights went into memory the device shares with the host, they would be a second copy in
  // DRAM); pages another process still uses stay. No-op for a file opened from memory.
  void drop_cached(const TensorInfo& t) const;
  // The same for the whole tensor data section (pages that were still being read ahead when
  // their tensor was dropped are let go by this second pass).
  void drop_cached_data() const;
  // Bytes of the file now held in the page cache (mincore over the mapping); 0 when unknown.
  uint64_t cached_bytes() const;

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace infinipot::gguf
