#include "tests/support/tiny_tokenizer.h"

#include <cstdint>
#include <vector>

#include "model_loader/gguf.h"
#include "tests/kit/tiny_model.h"

namespace infinipot::test {

const Tokenizer& tiny_tokenizer() {
  static const std::vector<uint8_t> bytes = tiny_llama_bytes(TinyLlamaOptions{});
  static const gguf::GgufFile file = gguf::GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
  static const Tokenizer tok = Tokenizer::from_gguf(file);
  return tok;
}

std::function<int(const std::string&)> tiny_token_counter() {
  return [](const std::string& s) { return static_cast<int>(tiny_tokenizer().encode(s, false, false).size()); };
}

}  // namespace infinipot::test
