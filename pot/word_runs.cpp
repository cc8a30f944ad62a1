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
  bool punct = true;
  for (const unsigned char c : text) punct = punct && c < 0x80 && std::ispunct(c);
  if (punct) e |= kOnlyPunct;
  return e;
}

const char* unit_rule_name(UnitRule rule) {
  switch (rule) {
    case UnitRule::Word: return "word";
    case UnitRule::Plain: return "plain";
    case UnitRule::Alnum: return "alnum";
    case UnitRule::Token: return "token";
  }
  return "?";
}

std::optional<UnitRule> parse_unit_rule(const std::string& name) {
  for (const UnitRule r : {UnitRule::Word, UnitRule::Plain, UnitRule::Alnum, UnitRule::Token})
    if (name == unit_rule_name(r)) return r;
  return std::nullopt;
}

bool joins_run(unsigned char prev, unsigned char cur, UnitRule rule, bool prev_joined, int run_tokens) {
  if (rule == UnitRule::Token || run_tokens >= kMaxRunTokens) return false;
  const bool marks = rule != UnitRule::Alnum;
  if (cur & kStartsWord)
    return (prev & kEndsWord) || (marks && (prev & kOnlySpaces)) ||
           (rule == UnitRule::Word && prev_joined && (prev & kOnlyPunct));  // a mark inside a word
  return marks && (cur & kStartsPunct) && (prev & kEndsWord);
}

int run_start(unsigned char prev, unsigned char cur, UnitRule rule, int prev_start, int at) {
  const bool prev_joined = prev_start < at - 1;  // the token before began its run earlier
  return joins_run(prev, cur, rule, prev_joined, at - prev_start) ? prev_start : at;
}

}  // namespace infinipot
