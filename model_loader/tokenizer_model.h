// The part of a tokenizer that differs between GGUF tokenizer families, behind one interface:
// how runs of plain text become ids and how a normal token's vocabulary text renders. What
// they share (special-token splitting, BOS, control-token rendering, end-of-generation ids)
// stays in Tokenizer (tokenizer.cpp). Internal to model_loader.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model_loader/gguf.h"
#include "model_loader/tokenizer.h"

namespace infinipot {

// A piece of the input: raw text [begin, begin+len) when token < 0, else a special token.
struct Fragment {
  TokenId token;
  size_t begin, len;
};

class TokenizerModel {
 public:
  virtual ~TokenizerModel() = default;

  // Appends the ids of `fragments` (cut from `text` by the special-token split), in order:
  // special tokens as they are, raw text through the family's algorithm. continues_text: the
  // text goes on from raw text encoded before it (SentencePiece adds no space prefix at its
  // start then, only after a special token).
  virtual void encode(std::string_view text, const std::vector<Fragment>& fragments, std::vector<TokenId>& out,
                      bool continues_text) const = 0;
  // The bytes a normal token stands for, from its vocabulary text.
  virtual std::string render_normal(const std::string& text) const = 0;
  // Exact vocabulary entry, -1 if absent.
  virtual TokenId find(std::string_view text) const = 0;
  // tokenizer.ggml.pre as this family uses it.
  virtual const std::string& pre_tokenizer() const = 0;
  // Whether decoding drops one leading space of the first token (SentencePiece's added prefix).
  virtual bool strips_space_prefix() const = 0;
  // The special-token ids and add_bos the family assumes when the file does not say.
  virtual TokenId default_bos() const = 0;
  virtual TokenId default_eos() const = 0;
  virtual bool default_add_bos() const = 0;
};

// tokenizer.ggml.model "gpt2": byte-level BPE with a pre-tokenizer (tokenizer_bpe.cpp).
std::unique_ptr<TokenizerModel> make_bpe_model(const gguf::GgufFile& file, const std::vector<std::string>& texts);
// tokenizer.ggml.model "llama": SentencePiece merging by score (tokenizer_spm.cpp).
std::unique_ptr<TokenizerModel> make_spm_model(const gguf::GgufFile& file, const std::vector<std::string>& texts);

}  // namespace infinipot
