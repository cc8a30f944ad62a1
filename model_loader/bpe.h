// Byte-level BPE merging of one pre-tokenized word, by merge rank, the way llama.cpp does it.
//
// Symbols are integers: a vocabulary id, or an "extra" id (>= n_vocab) for a string a merge
// produces or consumes that is not itself in the vocabulary. Keeping such strings mergeable
// is what llama.cpp's string-based merging does; with a consistent vocabulary none exist.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace infinipot {

class BpeMerges {
 public:
  using Id = int32_t;

  // token_texts: the vocabulary (byte-level alphabet text); merges: "left right" strings,
  // rank = index (a repeated pair keeps its first rank). A merge without a separating space
  // is a TokenizerError naming its index.
  BpeMerges(const std::vector<std::string>& token_texts, const std::vector<std::string>& merges);

  // Vocabulary id of an exact token text, -1 if none (a duplicated text maps to its last id,
  // as in llama.cpp).
  Id find(std::string_view text) const;

  // Appends the tokens of one byte-level-encoded word. Merges lowest rank first, leftmost
  // first among equal ranks. A final symbol that is not a vocabulary token falls back to the
  // single-byte tokens of its bytes (bytes with no such token are dropped, like llama.cpp).
  void encode_word(std::string_view word, std::vector<Id>& out) const;

  size_t n_merges() const { return n_merges_; }

 private:
  Id symbol_of(std::string_view text);  // vocabulary id or a (new) extra id
  static uint64_t pair_key(Id left, Id right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  struct Merge {
    int32_t rank;
    Id result;
  };

  Id n_vocab_ = 0;
  Id next_extra_ = 0;  // next id for a merge string outside the vocabulary
  size_t n_merges_ = 0;
  std::unordered_map<std::string, Id> symbol_ids_;  // vocabulary texts and extra strings
  std::unordered_map<uint64_t, Merge> merges_;     // (left, right) -> rank and result
};

}  // namespace infinipot
