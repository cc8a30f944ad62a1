#include "tests/support/gguf_test_util.h"

#include "tests/kit/tiny_model.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace infinipot::test {

RawGguf& RawGguf::raw(std::string_view bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

RawGguf& RawGguf::u8(uint8_t v) {
  bytes_.push_back(v);
  return *this;
}

RawGguf& RawGguf::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return *this;
}

RawGguf& RawGguf::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return *this;
}

RawGguf& RawGguf::str(std::string_view s) { return u64(s.size()).raw(s); }

RawGguf& RawGguf::header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
}

RawGguf& RawGguf::kv_u32(std::string_view key, uint32_t v) {
  return str(key).u32(static_cast<uint32_t>(gguf::ValueType::UINT32)).u32(v);
}

RawGguf& RawGguf::kv_string(std::string_view key, std::string_view v) {
  return str(key).u32(static_cast<uint32_t>(gguf::ValueType::STRING)).str(v);
}

RawGguf& RawGguf::tensor_info(std::string_view name, const std::vector<uint64_t>& dims,
                              uint32_t type, uint64_t offset) {
  str(name).u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) u64(d);
  return u32(type).u64(offset);
}

RawGguf& RawGguf::pad_to(uint64_t alignment) {
  while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  return *this;
}

RawGguf& RawGguf::zeros(size_t n) {
  bytes_.insert(bytes_.end(), n, 0);
  return *this;
}

::testing::AssertionResult throws_gguf_error(const std::function<void()>& action,
                                             std::initializer_list<std::string_view> needles) {
  try {
    action();
  } catch (const gguf::GgufError& e) {
    const std::string msg = e.what();
    for (std::string_view needle : needles) {
      if (msg.find(needle) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "error message lacks \"" << needle << "\"\n  message: " << msg;
      }
    }
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-GgufError: " << e.what();
  }
  return ::testing::AssertionFailure() << "no error was thrown";
}

::testing::AssertionResult parse_fails_with(const std::vector<uint8_t>& bytes,
                                            std::initializer_list<std::string_view> needles) {
  return throws_gguf_error(
      [&] { gguf::GgufFile::from_memory(bytes.data(), bytes.size(), "test.gguf"); }, needles);
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/infinipot-test-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error(fmt::format("mkdtemp {}: {}", pattern, std::strerror(errno)));
  }
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;  // never throw from a destructor
  std::filesystem::remove_all(path_, ec);
}

std::string tiny_model(const TempDir& dir, int n_ctx) {
  TinyLlamaOptions o;
  o.n_ctx = n_ctx;
  const std::string model = dir.file("tiny.gguf");
  write_tiny_llama(model, o);
  return model;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string real_model_path() {
  const char* env = std::getenv("INFINIPOT_MODEL");
  if (env == nullptr || *env == '\0') {
    ADD_FAILURE() << "INFINIPOT_MODEL is not set: run the tests through ctest, or set it to "
                     "models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh downloads it)";
    return "";
  }
  struct stat st {};
  if (stat(env, &st) != 0 || !S_ISREG(st.st_mode)) {
    ADD_FAILURE() << "the real model INFINIPOT_MODEL=" << env << " is missing: run "
                     "scripts/fetch-model.sh to download SmolLM2-135M-Instruct.Q4_1.gguf";
    return "";
  }
  return env;
}

std::string gemma_model_path() {
  std::string path;
  if (const char* env = std::getenv("INFINIPOT_GEMMA_MODEL"); env != nullptr && *env != '\0') {
    path = env;
  } else {
#ifdef INFINIPOT_TEST_GEMMA_MODEL_PATH
    path = INFINIPOT_TEST_GEMMA_MODEL_PATH;
#endif
  }
  if (path.empty()) {
    ADD_FAILURE() << "INFINIPOT_GEMMA_MODEL is not set and no path was compiled in: set it to "
                     "models/gemma-3-270m-q4_k_m.gguf (scripts/fetch-model.sh gemma3 downloads it)";
    return "";
  }
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    ADD_FAILURE() << "the Gemma 3 model " << path << " is missing: run scripts/fetch-model.sh gemma3 "
                     "to download gemma-3-270m-q4_k_m.gguf";
    return "";
  }
  return path;
}

}  // namespace infinipot::test
