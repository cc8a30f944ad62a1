#include "model_loader/spm.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "model_loader/tokenizer.h"

namespace infinipot {

namespace {

// Bytes of the UTF-8 sequence a lead byte announces. Continuation and invalid bytes count as
// one, 0xF8..0xFF as four: the same table llama.cpp splits with, so malformed input is cut
// into the same pieces.
size_t utf8_piece_length(uint8_t lead) {
  static constexpr uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[lead >> 4];
}

// A run of the text: [begin, begin + len), linked to its live neighbours. len == 0 once
// merged into its left neighbour.
struct Piece {
  uint32_t begin, len;
  int32_t prev, next;
};

// Two adjacent pieces whose concatenation is a vocabulary entry. `len` is their joint length
// when the candidate was made: if either piece has changed since, the candidate is stale.
struct Candidate {
  float score;
  int32_t left, right;
  uint32_t len;
};

// Highest score first; among equal scores the leftmost pair.
struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmVocab::SpmVocab(const std::vector<std::string>& token_texts, std::vector<float> scores, Id unknown_id)
    : scores_(std::move(scores)) {
  if (scores_.size() != token_texts.size()) {
    throw TokenizerError(fmt::format("tokenizer.ggml.scores has {} entries for {} tokens", scores_.size(),
                                     token_texts.size()));
  }
  ids_.reserve(token_texts.size());
  for (size_t id = 0; id < token_texts.size(); ++id) ids_[token_texts[id]] = static_cast<Id>(id);
  for (int b = 0; b < 256; ++b) {
    Id id = find(fmt::format("<0x{:02X}>", b));
    if (id < 0) id = find(std::string(1, static_cast<char>(b)));  // a vocabulary without byte tokens
    byte_tokens_[b] = id >= 0 ? id : unknown_id;
  }
}

SpmVocab::Id SpmVocab::find(std::string_view text) const {
  auto it = ids_.find(std::string(text));
  return it == ids_.end() ? -1 : it->second;
}

void SpmVocab::encode(std::string_view text, std::vector<Id>& out) const {
  std::vector<Piece> pieces;
  for (size_t at = 0; at < text.size();) {
    const size_t len = std::min(utf8_piece_length(static_cast<uint8_t>(text[at])), text.size() - at);
    const auto index = static_cast<int32_t>(pieces.size());
    pieces.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(len), index - 1,
                      at + len == text.size() ? -1 : index + 1});
    at += len;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t len = pieces[left].len + pieces[right].len;  // neighbours are contiguous
    const Id id = find(text.substr(pieces[left].begin, len));
    if (id >= 0) queue.push({scores_[id], left, right, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(pieces.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Piece& left = pieces[c.left];
    Piece& right = pieces[c.right];
    // A piece only grows by taking its right neighbour, so both still alive with the same
    // joint length means both are as they were when the candidate was made.
    if (left.len == 0 || right.len == 0 || left.len + right.len != c.len) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (left.next >= 0) pieces[left.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  // Every merged piece is a vocabulary entry; only single characters can be missing from it.
  // (llama.cpp would also try to split such a piece along a recorded merge, which cannot
  // apply to a single character.)
  for (int32_t i = pieces.empty() ? -1 : 0; i >= 0; i = pieces[i].next) {
    const std::string_view piece = text.substr(pieces[i].begin, pieces[i].len);
    const Id id = find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char ch : piece) {
      const Id b = byte_tokens_[static_cast<uint8_t>(ch)];
      if (b >= 0) out.push_back(b);
    }
  }
}

}  // namespace infinipot
