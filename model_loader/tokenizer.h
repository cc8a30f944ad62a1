// The tokenizer of a GGUF model, built from its metadata: byte-level BPE with the model's
// pre-tokenizer (tokenizer.ggml.model "gpt2": SmolLM2) or SentencePiece merging by score
// ("llama": Gemma 3). Matches llama.cpp's llama_tokenize token for token.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>
#include "model_loader/gguf.h"

namespace infinipot {

using TokenId = int32_t;

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model,pre,tokens,token_type,merges (gpt2),scores (llama),
  // add_space_prefix (llama),bos_token_id,eos_token_id,...}.
  // Unsupported tokenizer models or pre-tokenizers are a TokenizerError naming the value.
  static Tokenizer from_gguf(const gguf::GgufFile& file);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // parse_special: text of control/user-defined tokens ("<|im_start|>") becomes that token.
  // add_bos: prepend BOS (only when the model has one).
  // Invalid UTF-8 is not an error. gpt2: each malformed byte becomes U+FFFD before splitting,
  // as llama.cpp does (details in unicode_utf8.h); llama (SentencePiece): bytes are kept and
  // spelled with byte tokens (<0xXX>), as llama.cpp does.
  std::vector<TokenId> encode(const std::string& text, bool add_bos, bool parse_special) const;
  // The same for text that goes on from raw text already encoded (a prompt cut into parts):
  // SentencePiece's space prefix (tokenizer.ggml.add_space_prefix) is not added at its start,
  // only after a special token inside it, so the parts add up to the whole text's encoding.
  std::vector<TokenId> encode_continuation(const std::string& text, bool parse_special) const;
  // Whether `text`, special tokens parsed, ends with one (an empty text counts as one: what
  // follows opens the prompt).
  bool ends_with_special_token(const std::string& text) const;
  // Text of one token (byte-level decoded, or "▁" as a space); control tokens decode to ""
  // unless render_special.
  std::string decode_token(TokenId id, bool render_special = false) const;
  // The tokens' texts joined; with SentencePiece's add_space_prefix, one leading space of the
  // first token is dropped (llama.cpp's llama_detokenize).
  std::string decode(const std::vector<TokenId>& ids, bool render_special = false) const;

  int n_vocab() const;
  TokenId bos() const;   // -1 if none
  TokenId eos() const;   // -1 if none
  TokenId eot() const;   // end of turn (<|im_end|> for ChatML models), -1 if none
  // eos, eot, and any token whose text llama.cpp treats as end of generation
  // (<|endoftext|>, <|im_end|>, <|eot_id|>, ...), so generation stops where llama.cpp's does.
  bool is_end_of_generation(TokenId id) const;
  TokenId find_token(const std::string& text) const;  // exact vocabulary entry, -1 if absent
  // tokenizer.ggml.add_bos_token: whether the model expects BOS (llama.cpp's add_special).
  bool add_bos_default() const;
  const std::string& pre_tokenizer() const;          // tokenizer.ggml.pre ("default" if absent)
  const std::string& token_text(TokenId id) const;   // raw vocabulary text (byte-level alphabet or "▁")

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace infinipot
