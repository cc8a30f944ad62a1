// Byte-level BPE (GGUF "gpt2"): each raw fragment goes through the pre-tokenizer regex cascade
// (pretokenizer.h), each word's bytes are mapped to the GPT-2 byte alphabet and merged by rank
// (bpe.h).
#include <fmt/format.h>

#include <string_view>
#include <unordered_map>

#include "model_loader/bpe.h"
#include "model_loader/pretokenizer.h"
#include "model_loader/tokenizer_model.h"
#include "model_loader/unicode_utf8.h"

namespace infinipot {
namespace {

// llama.cpp's rendering of a normal token: every character is one byte of the byte-level
// alphabet; a character outside it is shown as [UNK_BYTE_0x..] followed by the token text.
std::string decode_byte_level(const std::string& text) {
  const auto& alphabet = utf8::ByteAlphabet::get();
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const uint32_t cp = utf8::decode_lenient(text, pos);
    const int byte = alphabet.decode(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    out += "[UNK_BYTE_0x";
    std::string encoded;
    utf8::append(encoded, cp);
    for (char c : encoded) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out += text;  // llama.cpp appends the whole token text
    out += "]";
  }
  return out;
}

class BpeModel final : public TokenizerModel {
 public:
  BpeModel(const std::vector<std::string>& texts, const std::vector<std::string>& merges, PreTokenizer pre)
      : bpe_(texts, merges), pre_(std::move(pre)) {}

  void encode(std::string_view text, const std::vector<Fragment>& fragments, std::vector<TokenId>& out,
              bool /*continues_text: byte-level BPE adds no prefix*/) const override {
    // Words repeat a lot in real text; merging each distinct word once is most of the speed.
    std::unordered_map<std::string, std::vector<TokenId>> cache;
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        encode_fragment(text.substr(f.begin, f.len), out, cache);
      }
    }
  }
  std::string render_normal(const std::string& text) const override { return decode_byte_level(text); }
  TokenId find(std::string_view text) const override { return bpe_.find(text); }
  const std::string& pre_tokenizer() const override { return pre_.name(); }
  bool strips_space_prefix() const override { return false; }
  TokenId default_bos() const override { return -1; }
  TokenId default_eos() const override { return -1; }
  bool default_add_bos() const override { return false; }

 private:
  void encode_fragment(std::string_view text, std::vector<TokenId>& out,
                       std::unordered_map<std::string, std::vector<TokenId>>& cache) const {
    const auto& alphabet = utf8::ByteAlphabet::get();
    std::string encoded;
    for (const std::string& word : pre_.split(text)) {
      encoded.clear();
      for (char c : word) encoded += alphabet.encode(static_cast<uint8_t>(c));
      if (pre_.ignore_merges()) {
        const TokenId whole = bpe_.find(encoded);
        if (whole >= 0) {
          out.push_back(whole);
          continue;
        }
      }
      auto [it, inserted] = cache.try_emplace(encoded);
      if (inserted) bpe_.encode_word(encoded, it->second);
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }

  BpeMerges bpe_;
  PreTokenizer pre_;
};

}  // namespace

std::unique_ptr<TokenizerModel> make_bpe_model(const gguf::GgufFile& file, const std::vector<std::string>& texts) {
  // llama.cpp also takes a missing pre-tokenizer as "default" (with a warning).
  const std::string pre = file.has("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";
  PreTokenizer pre_tok = PreTokenizer::for_name(pre);
  if (!file.has("tokenizer.ggml.merges")) throw TokenizerError("missing tokenizer.ggml.merges (required for gpt2 BPE)");
  return std::make_unique<BpeModel>(texts, file.get_string_array("tokenizer.ggml.merges"), std::move(pre_tok));
}

}  // namespace infinipot
