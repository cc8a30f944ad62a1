// Internal: the GGUF structure parser behind GgufFile::open/from_memory. It reads only from
// the given buffer, bounds every count and length by the bytes left before allocating, and
// throws GgufError("<label>: <what is wrong>") on the first problem.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model_loader/gguf.h"

namespace infinipot::gguf::detail {

inline constexpr uint32_t kDefaultAlignment = 32;

struct ParsedGguf {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;  // general.alignment or the default
  uint64_t data_offset = 0;                // start of the tensor data section in the buffer
  std::map<std::string, Value> metadata;
  std::vector<TensorInfo> tensors;         // in file order
};

ParsedGguf parse_gguf(const uint8_t* data, size_t size, const std::string& label);

}  // namespace infinipot::gguf::detail
