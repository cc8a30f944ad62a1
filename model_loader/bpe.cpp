#include "model_loader/bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "model_loader/tokenizer.h"
#include "model_loader/unicode_utf8.h"

namespace infinipot {

BpeMerges::BpeMerges(const std::vector<std::string>& token_texts, const std::vector<std::string>& merges) {
  n_vocab_ = static_cast<Id>(token_texts.size());
  next_extra_ = n_vocab_;
  symbol_ids_.reserve(token_texts.size() + 64);
  for (Id id = 0; id < n_vocab_; ++id) symbol_ids_[token_texts[id]] = id;

  n_merges_ = merges.size();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    // Searching from 1 lets a left part that is itself a space survive (as llama.cpp does).
    const size_t sep = m.find(' ', 1);
    if (sep == std::string::npos) {
      throw TokenizerError(fmt::format("tokenizer.ggml.merges[{}] = \"{}\" has no space between its two parts",
                                       rank, m));
    }
    const std::string_view left(m.data(), sep);
    const std::string_view right(m.data() + sep + 1, m.size() - sep - 1);
    const Id l = symbol_of(left);
    const Id r = symbol_of(right);
    const Id result = symbol_of(m.substr(0, sep) + m.substr(sep + 1));
    merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});  // first rank wins
  }
}

BpeMerges::Id BpeMerges::symbol_of(std::string_view text) {
  auto [it, inserted] = symbol_ids_.emplace(std::string(text), 0);
  if (inserted) it->second = next_extra_++;
  return it->second;
}

BpeMerges::Id BpeMerges::find(std::string_view text) const {
  const auto it = symbol_ids_.find(std::string(text));
  return (it != symbol_ids_.end() && it->second < n_vocab_) ? it->second : -1;
}

void BpeMerges::encode_word(std::string_view word, std::vector<Id>& out) const {
  if (word.empty()) return;
  // One symbol per UTF-8 character of the byte-level text, chained as a linked list; merged
  // symbols grow in place and the absorbed right neighbour keeps len 0.
  struct Symbol {
    Id id;         // -1: a character nothing knows (it can never merge)
    int32_t prev;  // index of the previous live symbol, -1 at the start
    int32_t next;  // index of the next live symbol, -1 at the end
    uint32_t begin, len;
  };
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = std::min(word.size() - pos, utf8::sequence_length(static_cast<uint8_t>(word[pos])));
    const auto it = symbol_ids_.find(std::string(word.substr(pos, len)));
    const int32_t index = static_cast<int32_t>(syms.size());
    syms.push_back({it == symbol_ids_.end() ? -1 : it->second, index - 1, index + 1,
                    static_cast<uint32_t>(pos), static_cast<uint32_t>(len)});
    pos += len;
  }
  syms.back().next = -1;

  // Candidate merges of adjacent symbols; stale ones (a side changed since) are skipped when
  // popped. Order: lowest rank, then leftmost.
  struct Candidate {
    int32_t rank;
    int32_t left;
    Id left_id, right_id, result;
  };
  struct Later {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, Later> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Id l = syms[left].id, r = syms[right].id;
    if (l < 0 || r < 0) return;
    const auto it = merges_.find(pair_key(l, r));
    if (it != merges_.end()) queue.push({it->second.rank, left, l, r, it->second.result});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = syms[c.left];
    if (left.len == 0 || left.id != c.left_id || left.next < 0) continue;
    Symbol& right = syms[left.next];
    if (right.id != c.right_id) continue;
    left.id = c.result;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = syms[i].next) {
    const Symbol& s = syms[i];
    if (s.id >= 0 && s.id < n_vocab_) {
      out.push_back(s.id);
      continue;
    }
    for (uint32_t k = 0; k < s.len; ++k) {
      const Id byte_token = find(word.substr(s.begin + k, 1));
      if (byte_token >= 0) out.push_back(byte_token);
    }
  }
}

}  // namespace infinipot
