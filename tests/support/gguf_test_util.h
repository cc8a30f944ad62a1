// Helpers for the model_loader tests: a byte-level GGUF builder for malformed files, error
// message assertions, temporary directories and the path of the real model.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "model_loader/gguf.h"

namespace infinipot::test {

// Builds GGUF bytes field by field, with no validation: tests assemble exactly the broken
// structure they want. All fields are little-endian.
class RawGguf {
 public:
  RawGguf& raw(std::string_view bytes);
  RawGguf& u8(uint8_t v);
  RawGguf& u32(uint32_t v);
  RawGguf& u64(uint64_t v);
  RawGguf& str(std::string_view s);  // u64 length + bytes
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv);  // "GGUF" + fields
  RawGguf& kv_u32(std::string_view key, uint32_t v);
  RawGguf& kv_string(std::string_view key, std::string_view v);
  RawGguf& tensor_info(std::string_view name, const std::vector<uint64_t>& dims, uint32_t type,
                       uint64_t offset);
  RawGguf& pad_to(uint64_t alignment);
  RawGguf& zeros(size_t n);

  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Parses `bytes` with GgufFile::from_memory; success if it throws a GgufError whose message
// contains every needle (the message is printed when it does not).
::testing::AssertionResult parse_fails_with(const std::vector<uint8_t>& bytes,
                                            std::initializer_list<std::string_view> needles);
// The same for any action expected to throw a GgufError.
::testing::AssertionResult throws_gguf_error(const std::function<void()>& action,
                                             std::initializer_list<std::string_view> needles);

// A fresh directory under $TMPDIR, removed with its contents by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A random-weight tiny llama (tests/kit/tiny_model.h) of context n_ctx as dir/tiny.gguf;
// its path. The real binary runs it in seconds.
std::string tiny_model(const TempDir& dir, int n_ctx);

void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
std::vector<uint8_t> read_file(const std::string& path);

// $INFINIPOT_MODEL (set by ctest to the real SmolLM2 model). Returns "" and records a test
// failure, with how to fetch the model, when the variable is unset or the file is missing:
// tests of the real model must fail, not skip, when it is absent.
std::string real_model_path();

// The Gemma 3 270M model (models/gemma-3-270m-q4_k_m.gguf): $INFINIPOT_GEMMA_MODEL, else the
// path tests/CMakeLists.txt compiles in (INFINIPOT_TEST_GEMMA_MODEL). Like real_model_path,
// "" and a recorded failure naming `scripts/fetch-model.sh gemma3` when the file is missing.
std::string gemma_model_path();

}  // namespace infinipot::test
