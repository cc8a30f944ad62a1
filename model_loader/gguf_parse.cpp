// GGUF structure parser. Layout (little-endian, spec: ggml/docs/gguf.md):
//   header:  "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv:      string key | u32 value_type | value          (string = u64 length | bytes)
//   array:   u32 elem_type | u64 count | count values
//   tensor:  string name | u32 n_dims | u64 dims[n_dims] | u32 type | u64 offset
//   padding to general.alignment, then the tensor data section (offsets are relative to it).
// The input is untrusted (it is fuzzed): every count and length is bounded by the bytes left
// before anything is allocated, and all size arithmetic is overflow-checked.
#include "model_loader/gguf_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string_view>
#include <unordered_map>

#include "model_loader/quant.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF parser reads little-endian fields with memcpy and needs a little-endian host"
#endif

namespace infinipot::gguf::detail {
namespace {

// Smallest encodings, used to bound the header counts by the bytes left in the file: a
// key-value pair needs a key length (8), a 1-byte key, a type (4) and a 1-byte value; a
// tensor info needs a name length (8), a 1-byte name, n_dims (4), one dim (8), a type (4) and
// an offset (8).
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
constexpr uint32_t kMaxDims = 4;
constexpr uint32_t kMaxValueType = static_cast<uint32_t>(ValueType::FLOAT64);

// Bounding counts by the bytes left stops impossible counts, but a parsed entry takes more
// memory than its encoding (an array element of 1 byte becomes a ~72-byte Value), so a large
// hostile file could still demand tens of GB. These caps keep the worst case near 1 GB and
// sit far above real models (SmolLM2: 33 keys, 272 tensors, ~98k array elements; the largest
// vocabularies have ~260k tokens).
constexpr uint64_t kMaxKv = uint64_t{1} << 16;
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 23;  // summed over all arrays of a file

// Names and keys go into error messages; a fuzzed name can be megabytes of binary.
std::string printable(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch < 0x7f) {
      out += static_cast<char>(ch);
    } else {
      out += fmt::format("\\x{:02x}", ch);
    }
  }
  if (s.size() > kMax) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

// Bytes one array element takes at least; strings are at least their 8-byte length.
uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    default: return 8;
  }
}

// Reads fields from the buffer. `ctx` arguments are callables returning a description of the
// field ("metadata key #3"); they only run when an error is reported, so the hot path of
// reading a 50k-entry vocabulary builds no strings.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& label)
      : data_(data), size_(size), label_(label) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  uint64_t size() const { return size_; }

  [[noreturn]] void fail(const std::string& msg) const { throw GgufError(label_ + ": " + msg); }

  template <typename Ctx>
  void need(uint64_t n, const Ctx& ctx) const {
    if (n > left()) {
      fail(fmt::format("{} at offset {} needs {} bytes but only {} remain; the file is truncated",
                       ctx(), pos_, n, left()));
    }
  }

  template <typename T, typename Ctx>
  T read(const Ctx& ctx) {
    need(sizeof(T), ctx);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  template <typename Ctx>
  std::string read_string(const Ctx& ctx) {
    uint64_t len = read<uint64_t>([&] { return ctx() + " (string length)"; });
    if (len > left()) {
      fail(fmt::format("{}: string length {} at offset {} exceeds the {} bytes left in the file; "
                       "the file is truncated or corrupt",
                       ctx(), len, pos_ - 8, left()));
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& label_;
};

template <typename Ctx>
ValueType read_value_type(Cursor& c, const Ctx& ctx) {
  uint32_t raw = c.read<uint32_t>([&] { return ctx() + " (value type)"; });
  if (raw > kMaxValueType) {
    c.fail(fmt::format("{}: unknown value type {} at offset {}; expected 0..{} (UINT8..FLOAT64)",
                       ctx(), raw, c.pos() - 4, kMaxValueType));
  }
  return static_cast<ValueType>(raw);
}

template <typename Ctx>
Value read_scalar(Cursor& c, ValueType t, const Ctx& ctx) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::UINT8: v.scalar = uint64_t{c.read<uint8_t>(ctx)}; break;
    case ValueType::INT8: v.scalar = int64_t{c.read<int8_t>(ctx)}; break;
    case ValueType::UINT16: v.scalar = uint64_t{c.read<uint16_t>(ctx)}; break;
    case ValueType::INT16: v.scalar = int64_t{c.read<int16_t>(ctx)}; break;
    case ValueType::UINT32: v.scalar = uint64_t{c.read<uint32_t>(ctx)}; break;
    case ValueType::INT32: v.scalar = int64_t{c.read<int32_t>(ctx)}; break;
    case ValueType::UINT64: v.scalar = c.read<uint64_t>(ctx); break;
    case ValueType::INT64: v.scalar = c.read<int64_t>(ctx); break;
    case ValueType::FLOAT32: v.scalar = double{c.read<float>(ctx)}; break;
    case ValueType::FLOAT64: v.scalar = c.read<double>(ctx); break;
    case ValueType::BOOL: {
      uint8_t b = c.read<uint8_t>(ctx);
      if (b > 1) c.fail(fmt::format("{}: BOOL value {} at offset {} is not 0 or 1", ctx(), b, c.pos() - 1));
      v.scalar = b == 1;
      break;
    }
    case ValueType::STRING: v.scalar = c.read_string(ctx); break;
    case ValueType::ARRAY: c.fail(ctx() + ": internal error, array read as a scalar");
  }
  return v;
}

// `array_budget` is what is left of kMaxArrayElements for this file.
template <typename Ctx>
Value read_value(Cursor& c, ValueType t, const Ctx& ctx, uint64_t& array_budget) {
  if (t != ValueType::ARRAY) return read_scalar(c, t, ctx);
  Value v;
  v.type = ValueType::ARRAY;
  v.elem_type = read_value_type(c, [&] { return ctx() + " array element"; });
  if (v.elem_type == ValueType::ARRAY) {
    c.fail(ctx() + ": arrays of arrays are not supported (no GGUF model uses them)");
  }
  uint64_t count = c.read<uint64_t>([&] { return ctx() + " (array length)"; });
  uint64_t min_bytes = min_value_bytes(v.elem_type);
  if (count > c.left() / min_bytes) {
    c.fail(fmt::format("{}: array of {} {} elements needs at least {} bytes per element but only "
                       "{} bytes remain; the file is truncated or corrupt",
                       ctx(), count, value_type_name(v.elem_type), min_bytes, c.left()));
  }
  if (count > array_budget) {
    c.fail(fmt::format("{}: array of {} elements exceeds the loader's limit of {} array elements "
                       "per file", ctx(), count, kMaxArrayElements));
  }
  array_budget -= count;
  v.array.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    v.array.push_back(read_scalar(c, v.elem_type, [&] {
      return fmt::format("{} element {} of {}", ctx(), i, count);
    }));
  }
  return v;
}

void read_header(Cursor& c, ParsedGguf& out, uint64_t& n_tensors, uint64_t& n_kv) {
  if (c.size() == 0) c.fail("the file is empty (0 bytes); expected a GGUF model file");
  auto magic_ctx = [] { return std::string("header magic"); };
  c.need(4, magic_ctx);
  char magic[4];
  for (char& m : magic) m = static_cast<char>(c.read<uint8_t>(magic_ctx));
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    c.fail(fmt::format("bad magic \"{}\": expected \"GGUF\"; this is not a GGUF model file",
                       printable(std::string_view(magic, 4))));
  }
  out.version = c.read<uint32_t>([] { return std::string("header version"); });
  if (out.version == 1) {
    c.fail("unsupported GGUF version 1: re-convert the model with a current converter");
  }
  if (out.version == 0x02000000u || out.version == 0x03000000u) {
    c.fail(fmt::format("GGUF version field reads {:#010x}: this looks like a big-endian GGUF "
                       "file; only little-endian files are supported", out.version));
  }
  if (out.version != 2 && out.version != 3) {
    c.fail(fmt::format("unsupported GGUF version {}: expected 2 or 3", out.version));
  }
  n_tensors = c.read<uint64_t>([] { return std::string("header tensor_count"); });
  n_kv = c.read<uint64_t>([] { return std::string("header metadata kv_count"); });
  if (n_tensors > c.left() / kMinTensorInfoBytes) {
    c.fail(fmt::format("header tensor_count {} is impossible: {} tensor infos need at least {} "
                       "bytes each but only {} bytes follow the header; the file is corrupt",
                       n_tensors, n_tensors, kMinTensorInfoBytes, c.left()));
  }
  if (n_kv > (c.left() - n_tensors * kMinTensorInfoBytes) / kMinKvBytes) {
    c.fail(fmt::format("header metadata kv_count {} is impossible: each key-value pair needs at "
                       "least {} bytes but only {} bytes follow the header; the file is corrupt",
                       n_kv, kMinKvBytes, c.left()));
  }
  if (n_tensors > kMaxTensors) {
    c.fail(fmt::format("header tensor_count {} exceeds the loader's limit of {} tensors",
                       n_tensors, kMaxTensors));
  }
  if (n_kv > kMaxKv) {
    c.fail(fmt::format("header metadata kv_count {} exceeds the loader's limit of {} keys", n_kv, kMaxKv));
  }
}

void read_metadata(Cursor& c, ParsedGguf& out, uint64_t n_kv) {
  uint64_t array_budget = kMaxArrayElements;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string([&] { return fmt::format("metadata key #{}", i); });
    if (key.empty()) c.fail(fmt::format("metadata key #{} is empty", i));
    auto ctx = [&] { return fmt::format("metadata '{}'", printable(key)); };
    ValueType t = read_value_type(c, ctx);
    Value v = read_value(c, t, ctx, array_budget);
    if (!out.metadata.emplace(key, std::move(v)).second) {
      c.fail(fmt::format("duplicate metadata key '{}' (key-value pair #{})", printable(key), i));
    }
  }
  auto it = out.metadata.find("general.alignment");
  if (it == out.metadata.end()) return;
  const Value& a = it->second;
  if (a.type != ValueType::UINT32) {
    c.fail(fmt::format("metadata 'general.alignment' has type {}; expected UINT32",
                       a.is_array() ? "ARRAY" : value_type_name(a.type)));
  }
  uint64_t align = std::get<uint64_t>(a.scalar);
  if (align == 0 || (align & (align - 1)) != 0) {
    c.fail(fmt::format("metadata 'general.alignment' is {}; expected a power of two", align));
  }
  out.alignment = align;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

TensorInfo read_tensor_info(Cursor& c, uint64_t index) {
  TensorInfo t;
  t.name = c.read_string([&] { return fmt::format("tensor info #{} name", index); });
  if (t.name.empty()) c.fail(fmt::format("tensor info #{} has an empty name", index));
  const std::string name = printable(t.name);
  auto ctx = [&] { return fmt::format("tensor '{}'", name); };

  uint32_t n_dims = c.read<uint32_t>([&] { return ctx() + " n_dims"; });
  if (n_dims < 1 || n_dims > kMaxDims) {
    c.fail(fmt::format("tensor '{}' has {} dimensions; expected 1 to {}", name, n_dims, kMaxDims));
  }
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = c.read<uint64_t>([&] { return fmt::format("{} dimension {}", ctx(), d); });
    if (dim == 0) {
      c.fail(fmt::format("tensor '{}': dimension {} is 0; every dimension must be > 0", name, d));
    }
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      c.fail(fmt::format("tensor '{}': dimension {} is {}, which does not fit in int64", name, d, dim));
    }
    t.shape.push_back(static_cast<int64_t>(dim));
    if (__builtin_mul_overflow(n_elements, t.shape.back(), &n_elements)) {
      c.fail(fmt::format("tensor '{}': the element count of shape {}... overflows int64", name,
                         shape_str(t.shape)));
    }
  }

  uint32_t raw_type = c.read<uint32_t>([&] { return ctx() + " type"; });
  if (!quant::is_known_type(raw_type)) {
    c.fail(fmt::format("tensor '{}' has unknown tensor type id {}", name, raw_type));
  }
  t.type = static_cast<TensorType>(raw_type);
  const quant::TypeTraits& tr = quant::traits(t.type);
  if (t.shape[0] % tr.block_elems != 0) {
    c.fail(fmt::format("tensor '{}' of type {} has row length {}, which is not a multiple of the "
                       "block size {}", name, tr.name, t.shape[0], tr.block_elems));
  }
  // n_elements fits in int64, but bytes per element can exceed 1 (F32), so the byte size can
  // still overflow.
  uint64_t row_bytes = 0;
  uint64_t blocks = static_cast<uint64_t>(t.shape[0] / tr.block_elems);
  if (__builtin_mul_overflow(blocks, static_cast<uint64_t>(tr.block_bytes), &row_bytes) ||
      __builtin_mul_overflow(row_bytes, static_cast<uint64_t>(t.rows()), &t.n_bytes)) {
    c.fail(fmt::format("tensor '{}': the byte size of shape {} overflows", name, shape_str(t.shape)));
  }
  t.offset = c.read<uint64_t>([&] { return ctx() + " offset"; });
  return t;
}

void check_tensor_data(const Cursor& c, const ParsedGguf& out) {
  if (out.tensors.empty()) return;
  if (out.data_offset > c.size()) {
    c.fail(fmt::format("the tensor data section starts at offset {} (after padding to the "
                       "alignment {}) but the file is only {} bytes; the file is truncated",
                       out.data_offset, out.alignment, c.size()));
  }
  const uint64_t data_size = c.size() - out.data_offset;
  for (const TensorInfo& t : out.tensors) {
    if (t.offset % out.alignment != 0) {
      c.fail(fmt::format("tensor '{}': data offset {} is not a multiple of the alignment {}",
                         printable(t.name), t.offset, out.alignment));
    }
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      c.fail(fmt::format("tensor '{}': data [offset {}, {} bytes] runs past the end of the file "
                         "(size {}, data section starts at {}); the file is truncated or corrupt",
                         printable(t.name), t.offset, t.n_bytes, c.size(), out.data_offset));
    }
  }
  std::vector<size_t> order(out.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return out.tensors[a].offset < out.tensors[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const TensorInfo& a = out.tensors[order[i - 1]];
    const TensorInfo& b = out.tensors[order[i]];
    if (a.offset + a.n_bytes > b.offset) {  // no overflow: both ranges are inside the file
      c.fail(fmt::format("tensors '{}' [offset {}, {} bytes] and '{}' [offset {}, {} bytes] "
                         "overlap", printable(a.name), a.offset, a.n_bytes, printable(b.name),
                         b.offset, b.n_bytes));
    }
  }
}

}  // namespace

ParsedGguf parse_gguf(const uint8_t* data, size_t size, const std::string& label) {
  Cursor c(data, size, label);
  ParsedGguf out;
  uint64_t n_tensors = 0, n_kv = 0;
  read_header(c, out, n_tensors, n_kv);
  read_metadata(c, out, n_kv);

  out.tensors.reserve(static_cast<size_t>(n_tensors));  // bounded by the file size above
  std::unordered_map<std::string, uint64_t> seen;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t = read_tensor_info(c, i);
    auto [it, inserted] = seen.emplace(t.name, i);
    if (!inserted) {
      c.fail(fmt::format("duplicate tensor name '{}' (tensor infos #{} and #{})",
                         printable(t.name), it->second, i));
    }
    out.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment (<= 2^31, so no overflow).
  out.data_offset = (c.pos() + out.alignment - 1) / out.alignment * out.alignment;
  check_tensor_data(c, out);
  return out;
}

}  // namespace infinipot::gguf::detail
