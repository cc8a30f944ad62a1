// What the tasks share: finding values in answers, scoring, the per-trial random stream and
// the magic-number needle.
#include "engine/tasks/task.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <stdexcept>

#include "engine/nih_text.h"

namespace infinipot::nih {

namespace {

bool alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether s[i..) is 8-4-4-4-12 hex groups.
bool uuid_at(const std::string& s, size_t i) {
  static const int groups[] = {8, 4, 4, 4, 12};
  for (int g = 0; g < 5; ++g) {
    if (g > 0) {
      if (i >= s.size() || s[i] != '-') return false;
      ++i;
    }
    for (int k = 0; k < groups[g]; ++k, ++i)
      if (i >= s.size() || !hex(s[i])) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> answer_values(const std::string& a, ValueKind kind) {
  std::vector<std::string> out;
  switch (kind) {
    case ValueKind::Number:
      for (size_t i = 0; i < a.size();) {
        if (!std::isdigit(static_cast<unsigned char>(a[i]))) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < a.size() && std::isdigit(static_cast<unsigned char>(a[j]))) ++j;
        const size_t nz = a.find_first_not_of('0', i);
        out.push_back(nz >= j ? std::string("0") : a.substr(nz, j - nz));
        i = j;
      }
      break;
    case ValueKind::Uuid:
      // A uuid inside a longer run of letters and digits ("x1b4e...") is not one.
      for (size_t i = 0; i + 36 <= a.size(); ++i)
        if ((i == 0 || !alnum(a[i - 1])) && uuid_at(a, i) && (i + 36 == a.size() || !alnum(a[i + 36]))) {
          out.push_back(lower(a.substr(i, 36)));
          i += 35;
        }
      break;
    case ValueKind::Word:
      for (size_t i = 0; i < a.size();) {
        if (!alnum(a[i])) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < a.size() && alnum(a[j])) ++j;
        out.push_back(lower(a.substr(i, j - i)));
        i = j;
      }
      break;
  }
  return out;
}

Score score_answer(const std::string& answer, const std::vector<std::string>& references, ValueKind kind, Rule rule) {
  Score s;
  s.total = static_cast<int>(references.size());
  if (references.empty()) throw std::invalid_argument("a trial has no references to score against");
  const std::vector<std::string> got = answer_values(answer, kind);
  // References go through the same normalisation as the answer.
  auto norm = [&](const std::string& r) {
    const auto v = answer_values(r, kind);
    return v.size() == 1 ? v[0] : lower(r);
  };
  if (rule == Rule::First) {
    s.present = !got.empty() && got[0] == norm(references[0]);
    s.total = 1;
  } else {
    const std::set<std::string> have(got.begin(), got.end());
    for (const auto& r : references) s.present += have.count(norm(r)) > 0;
  }
  s.fraction = double(s.present) / s.total;
  s.found = s.present == s.total;
  return s;
}

// ---------------------------------------------------------------------------------------

TrialRng::TrialRng(const std::string& task, const TrialSpec& t) {
  const std::string id = task + "|" + t.haystack + "|" + std::to_string(t.length) + "|" + text::fmt_g(t.depth) + "|" +
                         std::to_string(t.trial);
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the trial's identity, mixed with the seed
  for (unsigned char c : id) h = (h ^ c) * 0x100000001B3ull;
  state_ = text::splitmix64(h ^ text::splitmix64(t.seed));
}

uint64_t TrialRng::next() {
  state_ += 0x9E3779B97F4A7C15ull;  // splitmix64's stream
  return text::splitmix64(state_);
}

uint64_t TrialRng::below(uint64_t n) { return n == 0 ? 0 : next() % n; }

std::string TrialRng::digits(int k) {
  std::string s(1, char('1' + below(9)));
  while (static_cast<int>(s.size()) < k) s += char('0' + below(10));
  return s;
}

std::vector<std::string> TrialRng::numbers(size_t n, int k) {
  std::vector<std::string> out;
  while (out.size() < n) {
    std::string v = digits(k);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
  }
  return out;
}

std::string TrialRng::uuid() {
  static const char* hexd = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) s += '-';
    int v = static_cast<int>(below(16));
    if (i == 12) v = 4;                 // version 4
    if (i == 16) v = 8 + (v & 3);       // the RFC 4122 variant
    s += hexd[v];
  }
  return s;
}

std::vector<std::string> TrialRng::words(size_t n, const std::vector<std::string>& avoid) {
  const auto& all = word_list();
  std::set<std::string> taken(avoid.begin(), avoid.end());
  if (n + taken.size() > all.size()) throw std::invalid_argument("the word list is too short for this task");
  std::vector<std::string> out;
  while (out.size() < n) {
    const std::string& w = all[below(all.size())];
    if (taken.insert(w).second) out.push_back(w);
  }
  return out;
}

std::string magic_needle(const std::string& key, const std::string& value, ValueKind kind) {
  return "One of the special magic " + std::string(kind == ValueKind::Uuid ? "uuids" : "numbers") + " for " + key +
         " is: " + value + ".";
}

std::vector<double> spread_depths(double depth, size_t n) {
  std::vector<double> out;
  for (size_t k = 0; k < n; ++k) {
    double d = depth + double(k) / double(n);
    if (d > 1.0) d -= 1.0;
    out.push_back(d);
  }
  return out;
}

std::string and_list(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += i + 1 == items.size() ? " and " : ", ";
    s += items[i];
  }
  return s;
}

}  // namespace infinipot::nih
