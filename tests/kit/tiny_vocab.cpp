// The tiny model's byte-level BPE vocabulary: GPT-2 byte tokens plus merges learned greedily
// from a short built-in English sample (most frequent adjacent pair first, ties broken by
// the pair's text so the result is deterministic). Word splitting is a simplified GPT-2
// pre-tokenizer: a word is an optional leading space plus a run of letters, of digits or of
// other non-space characters; whitespace runs are words of their own.
#include <fmt/format.h>

#include <map>
#include <set>
#include <utility>

#include "model_loader/gguf.h"
#include "tests/kit/tiny_model.h"

namespace infinipot {
namespace {

constexpr const char* kSample =
    "The quick brown fox jumps over the lazy dog. A small model can still learn the shape of "
    "the language: it sees that the same words come back again and again, and that some "
    "letters like to stand next to each other. In the morning the baker opens the shop, and "
    "the smell of warm bread fills the street. Children walk to school, talking about the "
    "games they will play in the afternoon. The teacher writes the lesson on the board and "
    "asks them to read it aloud. Reading is a skill that grows with practice; the more you "
    "read, the better you understand. There are three apples on the table and two oranges in "
    "the bowl. In 2024 the city planted 1500 trees along the river. Hello! How are you today? "
    "I am fine, thank you. What would you like to know? Please tell me about the weather, the "
    "history of the town, and the people who live there. The weather is mild and the sky is "
    "clear, with a light wind from the west. The town was founded on the bank of the river, "
    "where the water was calm and the land was good for farming. People here are friendly "
    "and they like to help each other. When the sun goes down, the lights in the windows come "
    "on one by one, and the evening is quiet and peaceful. You are a helpful assistant. The "
    "user asks a question and the assistant gives a short, clear and correct answer.\n"
    "def add(a, b):\n    return a + b\n";

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

// Printable bytes map to themselves; the others (controls, space, 0x7f-0xa0, 0xad) map to
// code points from 256 upwards in byte order.
bool maps_to_itself(uint32_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

enum class CharClass { kSpace, kLetter, kDigit, kOther };
CharClass classify(unsigned char c) {
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return CharClass::kSpace;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::kLetter;
  if (c >= '0' && c <= '9') return CharClass::kDigit;
  return CharClass::kOther;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    CharClass cls = classify(static_cast<unsigned char>(text[i]));
    if (text[i] == ' ' && i + 1 < text.size() &&
        classify(static_cast<unsigned char>(text[i + 1])) != CharClass::kSpace) {
      cls = classify(static_cast<unsigned char>(text[i + 1]));  // " word": space joins the word
      ++i;
    }
    while (i < text.size() && classify(static_cast<unsigned char>(text[i])) == cls) ++i;
    words.push_back(text.substr(start, i - start));
  }
  return words;
}

using Symbols = std::vector<std::string>;

std::vector<std::string> learn_merges(int n_merges) {
  std::map<Symbols, int> words;  // word as symbols -> count
  for (const std::string& w : split_words(kSample)) {
    Symbols s;
    for (unsigned char c : w) s.push_back(gpt2_byte_to_unicode(c));
    ++words[s];
  }
  std::vector<std::string> merges;
  while (static_cast<int>(merges.size()) < n_merges) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [syms, count] : words) {
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += count;
    }
    if (pairs.empty()) break;
    // std::map iterates in key order, so the first maximum is the lexicographically smallest.
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    const auto [left, right] = best->first;
    merges.push_back(left + " " + right);
    std::map<Symbols, int> merged;
    for (const auto& [syms, count] : words) {
      Symbols out;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == left && syms[i + 1] == right) {
          out.push_back(left + right);
          ++i;
        } else {
          out.push_back(syms[i]);
        }
      }
      merged[out] += count;
    }
    words = std::move(merged);
  }
  return merges;
}

}  // namespace

std::string gpt2_byte_to_unicode(uint8_t byte) {
  if (maps_to_itself(byte)) return utf8(byte);
  uint32_t n = 0;
  for (uint32_t b = 0; b < byte; ++b) {
    if (!maps_to_itself(b)) ++n;
  }
  return utf8(256 + n);
}

TinyVocab make_tiny_vocab(int n_merges, int n_vocab) {
  TinyVocab v;
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.emplace_back(special);
    v.token_types.push_back(3);
  }
  // GPT-2 vocabularies list the byte tokens printable-first, then the remapped ones.
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t b = 0; b < 256; ++b) {
      if (maps_to_itself(b) == (pass == 0)) {
        v.tokens.push_back(gpt2_byte_to_unicode(static_cast<uint8_t>(b)));
        v.token_types.push_back(1);
      }
    }
  }
  std::set<std::string> seen(v.tokens.begin(), v.tokens.end());
  v.merges = learn_merges(n_merges);
  for (const std::string& m : v.merges) {
    std::string merged = m;
    merged.erase(merged.find(' '), 1);  // symbols never contain a raw space (it is "Ġ")
    if (seen.insert(merged).second) {
      v.tokens.push_back(merged);
      v.token_types.push_back(1);
    }
  }
  const int n_real = static_cast<int>(v.tokens.size());
  int target = n_vocab > 0 ? n_vocab : (n_real + 31) / 32 * 32;
  if (target < n_real) {
    throw gguf::GgufError(fmt::format("tiny model: n_vocab {} is smaller than the {} tokens of the "
                                      "tokenizer", n_vocab, n_real));
  }
  for (int id = n_real; id < target; ++id) {
    v.tokens.push_back(fmt::format("[PAD{}]", id));
    v.token_types.push_back(5);
  }
  return v;
}

}  // namespace infinipot
