// Small text helpers the nih benchmark's files share (engine/nih.cpp, nih_results.cpp and
// the tasks in engine/tasks/): whitespace, sentence ends, lists, number formatting, hashing.
#pragma once
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace infinipot::nih::text {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
inline bool is_closer(char c) { return c == '\'' || c == '"' || c == ')' || c == ']'; }

// Whether s[..e) ends a sentence: ".", "!" or "?", maybe followed by closing quotes/brackets.
inline bool ends_sentence(const std::string& s, size_t e) {
  while (e > 0 && is_closer(s[e - 1])) --e;
  return e > 0 && (s[e - 1] == '.' || s[e - 1] == '!' || s[e - 1] == '?');
}

inline std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return s.substr(a, b - a);
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

inline std::string fmt_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline bool parse_int(const std::string& s, long long& out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  out = std::stoll(s);
  return true;
}

}  // namespace infinipot::nih::text
