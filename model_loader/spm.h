// SentencePiece-style merging by score (GGUF "llama" tokenizer model), the way llama.cpp
// applies it to GGUF vocabularies: the text is cut into UTF-8 characters, then the adjacent
// pair whose concatenation is the vocabulary entry with the highest score is merged, again and
// again (leftmost first among equal scores) until no adjacent pair forms an entry. A final
// piece that is not an entry is spelled with byte tokens (<0xXX>).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace infinipot {

class SpmVocab {
 public:
  using Id = int32_t;

  // token_texts and scores: one per id (sizes must match; a TokenizerError otherwise).
  // unknown_id: used for a byte with neither a <0xXX> token nor a one-byte token (llama.cpp
  // aborts there; vocabularies with byte fallback have all 256); -1 drops such bytes.
  SpmVocab(const std::vector<std::string>& token_texts, std::vector<float> scores, Id unknown_id);

  // Vocabulary id of an exact token text, -1 if none (a duplicated text maps to its last id,
  // as in llama.cpp). Any token type can be formed by merging, control tokens included.
  Id find(std::string_view text) const;

  // Appends the tokens of `text`, already whitespace-escaped ("▁" for spaces). Bytes are taken
  // as they are: invalid UTF-8 is not repaired (a stray byte is its own piece, a lead byte takes
  // the bytes its length says), as llama.cpp does for this tokenizer.
  void encode(std::string_view text, std::vector<Id>& out) const;

  Id byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

 private:
  std::unordered_map<std::string, Id> ids_;
  std::vector<float> scores_;
  Id byte_tokens_[256];
};

}  // namespace infinipot
