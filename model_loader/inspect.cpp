// GGUF summaries for `infinipot inspect`. Metadata comes from untrusted files, so strings are
// repaired to valid UTF-8 (nlohmann::json refuses to dump invalid UTF-8) and escaped and
// truncated in the text form.
#include "model_loader/inspect.h"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <string_view>

#include "model_loader/quant.h"
#include "model_loader/runnable.h"

namespace infinipot {
namespace {

using gguf::GgufFile;
using gguf::Value;
using gguf::ValueType;
using nlohmann::json;

constexpr size_t kMaxFullArray = 16;  // longer arrays are summarised
constexpr size_t kArrayHead = 8;      // elements shown in a summary

// Length of the valid UTF-8 sequence at s[i], or 0 if it is invalid (overlong forms,
// surrogates and code points above U+10FFFF are invalid too).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) { n = 2; cp = c & 0x1f; }
  else if ((c & 0xf0) == 0xe0) { n = 3; cp = c & 0x0f; }
  else if ((c & 0xf8) == 0xf0) { n = 4; cp = c & 0x07; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (cc & 0x3f);
  }
  static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD replacement character
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

// FLOAT32 values are stored as the double of the float; printing that double gives
// 9.999999747378752e-06 for 1e-5, so go through the float's shortest decimal form.
double float32_as_decimal(double v) {
  if (v != v || v - v != 0) return v;  // nan/inf: json dumps them as null anyway
  const std::string shortest = fmt::format("{}", static_cast<float>(v));
  return std::strtod(shortest.c_str(), nullptr);  // not stod: it throws on subnormals
}

json scalar_json(const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
      return std::get<uint64_t>(v.scalar);
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
      return std::get<int64_t>(v.scalar);
    case ValueType::FLOAT32: return float32_as_decimal(std::get<double>(v.scalar));
    case ValueType::FLOAT64: return std::get<double>(v.scalar);
    case ValueType::BOOL: return std::get<bool>(v.scalar);
    case ValueType::STRING: return valid_utf8(std::get<std::string>(v.scalar));
    case ValueType::ARRAY: break;
  }
  return nullptr;
}

std::string lower(const char* s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

json value_json(const Value& v) {
  if (!v.is_array()) return scalar_json(v);
  json elems = json::array();
  const size_t shown = v.array.size() > kMaxFullArray ? kArrayHead : v.array.size();
  for (size_t i = 0; i < shown; ++i) elems.push_back(scalar_json(v.array[i]));
  if (v.array.size() <= kMaxFullArray) return elems;
  return json{{"type", "array"},
              {"elem_type", lower(gguf::value_type_name(v.elem_type))},
              {"length", v.array.size()},
              {"head", std::move(elems)}};
}

// One-line rendering for the text summary: escaped, strings cut at 80 characters.
std::string short_text(const Value& v) {
  if (v.is_array()) {
    return fmt::format("[{} x {}]", gguf::value_type_name(v.elem_type), v.array.size());
  }
  if (v.type != ValueType::STRING) return scalar_json(v).dump();
  const std::string& s = std::get<std::string>(v.scalar);
  constexpr size_t kMax = 80;
  std::string shown = json(valid_utf8(s.substr(0, kMax))).dump();  // quoted, escaped
  if (s.size() > kMax) shown += fmt::format(" ... ({} bytes)", s.size());
  return shown;
}

std::string printable_key(const std::string& key) {
  std::string quoted = json(valid_utf8(key)).dump();  // escapes control characters
  return quoted.substr(1, quoted.size() - 2);
}

std::string mib(uint64_t bytes) { return fmt::format("{:.2f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0)); }

}  // namespace

json inspect_json(const GgufFile& file) {
  json meta = json::object();
  for (const auto& [key, value] : file.metadata()) meta[valid_utf8(key)] = value_json(value);
  json tensors = json::array();
  for (const gguf::TensorInfo& t : file.tensors()) {
    tensors.push_back({{"name", valid_utf8(t.name)},
                       {"type", quant::traits(t.type).name},
                       {"shape", t.shape},
                       {"offset", t.offset},
                       {"n_bytes", t.n_bytes}});
  }
  const Runnability verdict = check_runnable(file);
  return json{{"runnable", verdict.runnable},
              {"cannot_run", verdict.runnable ? json(nullptr) : json(valid_utf8(verdict.reason))},
              {"version", file.version()},
              {"alignment", file.alignment()},
              {"file_size", file.file_size()},
              {"data_offset", file.data_offset()},
              {"metadata", std::move(meta)},
              {"tensors", std::move(tensors)}};
}

std::string inspect_text(const GgufFile& file) {
  std::string out = fmt::format("{}: GGUF v{}, {} bytes, {} metadata keys, {} tensors, alignment {}\n",
                                valid_utf8(file.path()), file.version(), file.file_size(),
                                file.metadata().size(), file.tensors().size(), file.alignment());
  out += "\nmetadata:\n";
  for (const auto& [key, value] : file.metadata()) {
    out += fmt::format("  {:<40} {}\n", printable_key(key), short_text(value));
  }

  struct TypeStats {
    size_t count = 0;
    uint64_t bytes = 0;
  };
  std::map<std::string, TypeStats> by_type;
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    TypeStats& s = by_type[quant::traits(t.type).name];
    ++s.count;
    s.bytes += t.n_bytes;
    total += t.n_bytes;
  }
  out += "\ntensors by type:\n";
  for (const auto& [name, s] : by_type) {
    out += fmt::format("  {:<8} {:>6} tensors {:>14} bytes ({})\n", name, s.count, s.bytes, mib(s.bytes));
  }
  out += fmt::format("total tensor data: {} bytes ({})\n", total, mib(total));
  const Runnability verdict = check_runnable(file);
  if (verdict.runnable) out += "\nrunnable: yes (this runtime can run it)\n";
  else out += fmt::format("\ncannot run: {}\n", valid_utf8(verdict.reason));
  return out;
}

}  // namespace infinipot
