#include "pot/word_runs.h"

#include <cctype>

namespace infinipot {

unsigned char token_edges(const std::string& text) {
  if (text.empty()) return 0;
  auto word_byte = [](unsigned char c) { return std::isalnum(c) || c >= 0x80; };
  const unsigned char first = text.front(), last = text.back();
  unsigned char e = (word_byte(first) ? kStartsWord : 0) | (word_byte(last) ? kEndsWord : 0);
  if (first < 0x80 && std::ispunct(first)) e |= kStartsPunct;
  if (text.find_first_not_of(' ') == std::string::npos) e |= kOnlySpaces;
  return e;
}

bool joins_run(unsigned char prev, unsigned char cur, bool alnum_only) {
  if (cur & kStartsWord) return (prev & kEndsWord) || (!alnum_only && (prev & kOnlySpaces));
  return !alnum_only && (cur & kStartsPunct) && (prev & kEndsWord);
}

}  // namespace infinipot
