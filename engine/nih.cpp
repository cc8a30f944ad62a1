#include "engine/nih.h"
#include "model_loader/setting_names.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "engine/nih_text.h"

namespace infinipot::nih {

const char* const kTaskLine =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there.";
const char* const kFiller = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
// The usual question with the answer's form asked for: a 135M chat model asked only "What is
// the pass key?" tends to explain what a pass key is instead (docs/results.md).
const char* const kQuestion = "What is the pass key? Answer with the number only.";

const char* const kNeedle = "The pass key is {key}. Remember it. {key} is the pass key.";

std::string needle(const std::string& key) { return needle(kNeedle, key); }

std::string needle(const std::string& sentence, const std::string& key) {
  static const std::string slot = "{key}";
  std::string out;
  size_t from = 0;
  for (size_t at; (at = sentence.find(slot, from)) != std::string::npos; from = at + slot.size())
    out += sentence.substr(from, at - from) + key;
  return out + sentence.substr(from);
}

void check_needle(const std::string& sentence) {
  if (sentence.find("{key}") == std::string::npos)
    throw SettingError("needle", "", "", "{needle} must say where the key goes with {key} (e.g. {needle} \"The vault code is "
                                "{key}.\"), got '" + sentence + "'");
  if (text::trim(needle(sentence, "")).empty())
    throw SettingError("needle", "", "", "{needle} needs words around {key}, got '" + sentence + "'");
}

using namespace text;

Haystack passkey_haystack() { return {"passkey", kTaskLine, kFiller, " "}; }

Haystack prose_haystack(const std::string& name, const std::string& raw) {
  std::string text;
  text.reserve(raw.size());
  size_t i = 0;
  while (i < raw.size()) {
    if (!is_space(raw[i])) {
      text += raw[i++];
      continue;
    }
    int newlines = 0;
    while (i < raw.size() && is_space(raw[i])) newlines += raw[i++] == '\n';
    text += newlines >= 2 ? "\n\n" : " ";
  }
  text = trim(text);
  if (text.empty())
    throw std::invalid_argument("haystack '" + name + "' has no text (the file is empty or only whitespace); "
                                "give a file of prose");
  return {name, "", text, "\n\n"};
}

// ---------------------------------------------------------------------------------------
// Documents

DocumentBuilder::DocumentBuilder(Haystack haystack, CountTokens count) : h_(std::move(haystack)), count_(std::move(count)) {
  if (h_.text.empty()) throw std::invalid_argument("haystack '" + h_.name + "' has no text");
  stream_ = h_.opening.empty() ? h_.text : h_.opening + " " + h_.text;
}

int DocumentBuilder::count(const std::string& s) {
  ++n_counts_;
  bytes_counted_ += s.size();
  return count_(s);
}

const std::string& DocumentBuilder::stream(size_t min_chars) {
  while (stream_.size() < min_chars) stream_ += h_.joiner + h_.text;
  return stream_;
}

double DocumentBuilder::chars_per_token() {
  if (cpt_ > 0) return cpt_;
  // A sample of a few thousand tokens, cut at a word end, measured once.
  const size_t want = h_.opening.size() + 24000;
  const std::string& s = stream(want + 4096);
  size_t e = want;
  while (e < s.size() && !(is_space(s[e]) && e > 0 && !is_space(s[e - 1]))) ++e;
  const int n = count(s.substr(0, e));
  cpt_ = n > 0 ? double(e) / n : 4.0;
  return cpt_;
}

// The cut nearest `want` bytes: a sentence end within +-window bytes if there is one, else
// the nearest word end. The cut never goes below the opening.
size_t DocumentBuilder::snap(size_t want, size_t window) {
  const size_t min_cut = h_.opening.size();
  const std::string& s = stream(want + window + 8192);
  auto word_end = [&](size_t e) { return e > 0 && e < s.size() && !is_space(s[e - 1]) && is_space(s[e]); };
  want = std::max(want, min_cut);
  for (size_t d = 0; d <= window; ++d) {
    if (word_end(want + d) && ends_sentence(s, want + d)) return want + d;
    if (d <= want - min_cut && word_end(want - d) && ends_sentence(s, want - d)) return want - d;
  }
  for (size_t d = 0;; ++d) {
    const bool down = d <= want - min_cut, up = want + d < s.size();
    if (!down && !up) return s.size();  // no word end at all (cannot happen: the stream runs on)
    if (down && word_end(want - d)) return want - d;
    if (up && word_end(want + d)) return want + d;
  }
}

DocumentBuilder::Cut DocumentBuilder::cut_for(int body_tokens, int tolerance) {
  auto it = cuts_.find(body_tokens);
  if (it != cuts_.end()) return it->second;
  double cpt = chars_per_token();
  double want = body_tokens * cpt;
  Cut best;
  bool have = false;
  for (int iter = 0; iter < 4; ++iter) {
    const size_t window = static_cast<size_t>(std::max(0.0, 0.5 * tolerance * cpt));
    const size_t e = snap(static_cast<size_t>(std::max(0.0, want)), window);
    const int n = count(stream(e).substr(0, e));
    if (!have || std::abs(n - body_tokens) < std::abs(best.tokens - body_tokens)) best = {e, n};
    have = true;
    if (std::abs(n - body_tokens) <= tolerance || n <= 0) break;
    cpt = double(e) / n;  // what this text really takes per token
    const double next = e + (body_tokens - n) * cpt;
    if (std::abs(next - double(e)) < 1) break;  // no finer cut to make
    want = next;
  }
  cuts_[body_tokens] = best;
  return best;
}

int DocumentBuilder::tokens(const std::string& text) { return count(text); }

Document DocumentBuilder::build(int target_tokens, double depth, const std::string& key, const std::string& sentence) {
  Document d = build(target_tokens, {{depth, needle(sentence, key)}});
  d.key = key;
  return d;
}

Document DocumentBuilder::build(int target_tokens, const std::vector<Insert>& inserts) {
  if (target_tokens < 1) throw std::invalid_argument("a document needs at least 1 token, got " + std::to_string(target_tokens));
  if (inserts.empty()) throw std::invalid_argument("a document needs at least one needle");
  int insert_tokens = 0;
  for (const Insert& in : inserts) {
    if (!(in.depth >= 0.0 && in.depth <= 1.0)) throw std::invalid_argument("depth must be in [0, 1], got " + fmt_g(in.depth));
    insert_tokens += count(in.text);
  }
  const int tol_doc = std::max(1, static_cast<int>(target_tokens * 0.01));
  const int tol_body = std::max(1, tol_doc / 2);
  const size_t region = h_.opening.empty() ? 0 : h_.opening.size() + 1;

  Document d;
  d.target = target_tokens;
  int body_target = std::max(1, target_tokens - insert_tokens);
  // Three tries: each one corrects the body by what the joints around the needles cost.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const Cut cut = cut_for(body_target, tol_body);
    const std::string body = stream(cut.chars).substr(0, cut.chars);
    const size_t rs = std::min(region, body.size());
    // Where a needle may go: the filler's start, its sentence (or paragraph) starts, its end.
    std::vector<size_t> starts = {rs};
    for (size_t p = rs + 1; p < body.size(); ++p)
      if (!is_space(body[p]) && is_space(body[p - 1])) {
        size_t q = p - 1;
        while (q > rs && is_space(body[q - 1])) --q;
        const bool paragraph = body.compare(q, 2, "\n\n") == 0;
        if (paragraph || ends_sentence(body, q)) starts.push_back(p);
      }
    if (starts.back() != body.size()) starts.push_back(body.size());
    // Each needle at the start nearest its depth (a tie goes to the earlier one).
    std::vector<size_t> at(inserts.size());
    for (size_t i = 0; i < inserts.size(); ++i) {
      const double aim = rs + inserts[i].depth * double(body.size() - rs);
      auto it = std::lower_bound(starts.begin(), starts.end(), aim, [](size_t p, double v) { return double(p) < v; });
      if (it == starts.end() || (it != starts.begin() && aim - double(*(it - 1)) <= double(*it) - aim)) --it;
      at[i] = *it;
    }
    // Needles that meet at one start go in the order given (a variable chain stays in order).
    std::vector<size_t> order(inserts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return at[x] < at[y]; });
    std::string out;
    out.reserve(body.size() + 64 * inserts.size());
    d.inserts_at.assign(inserts.size(), 0);
    size_t prev = 0;
    for (size_t i : order) {
      if (at[i] > prev) {
        if (!out.empty() && !is_space(out.back())) out += ' ';
        out.append(body, prev, at[i] - prev);
        prev = at[i];
      }
      if (!out.empty() && !is_space(out.back())) out += ' ';
      d.inserts_at[i] = out.size();
      out += inserts[i].text;
    }
    if (prev < body.size()) {
      if (!out.empty() && !is_space(out.back())) out += ' ';
      out.append(body, prev, std::string::npos);
    }
    d.text = std::move(out);
    d.needle_at = d.inserts_at[0];
    d.needle_depth = body.size() > rs ? double(at[0] - rs) / double(body.size() - rs) : 0.0;
    d.tokens = count(d.text);
    if (std::abs(d.tokens - target_tokens) <= tol_doc) break;
    body_target = std::max(1, body_target - (d.tokens - target_tokens));  // the needles' joints were off: once more
  }
  return d;
}

// ---------------------------------------------------------------------------------------
// Keys and scoring

std::string derive_key(uint64_t seed, const std::string& haystack, int length, double depth, int trial) {
  const std::string id = haystack + "|" + std::to_string(length) + "|" + fmt_g(depth) + "|" + std::to_string(trial);
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a of the trial's identity, mixed with the seed
  for (unsigned char c : id) h = (h ^ c) * 0x100000001B3ull;
  h = splitmix64(h ^ splitmix64(seed));
  return std::to_string(10000 + h % 90000);
}

std::optional<std::string> first_integer(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && !std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == text.size()) return std::nullopt;
  size_t j = i;
  while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
  return text.substr(i, j - i);
}

bool key_found(const std::string& answer, const std::string& key) {
  const auto n = first_integer(answer);
  if (!n) return false;
  auto strip = [](const std::string& s) {
    const size_t k = s.find_first_not_of('0');
    return k == std::string::npos ? std::string("0") : s.substr(k);
  };
  return strip(*n) == strip(key);
}

// ---------------------------------------------------------------------------------------
// Command-line lists

void resolve_positions(std::vector<PolicySpec>& specs, const std::string& architecture) {
  std::vector<PolicySpec> out;
  std::set<std::string> seen;
  for (PolicySpec& s : specs) {
    if (s.positions == PositionRule::Auto) s.positions = default_position_rule(architecture);
    if (seen.insert(s.config()).second) out.push_back(s);  // "infinipot" and its rule named: one config
  }
  specs = std::move(out);
}

std::vector<PolicySpec> parse_policies(const std::string& list, int default_pot, int default_keep) {
  const std::string usage = " ({policy} takes a comma list of NAME or NAME:key=value:..., keys pot, keep, nuc_ratio, nuc_stride, "
                            "pool, ahead, recent, heads=per-head, layers=per-layer, units=word|plain|alnum|token, cap_rows=all, "
                            "catalyst=general, cr_rope=0, positions=reset|fit|gaps|auto, gap=G, oracle=1; e.g. "
                            "{policy} full,infinipot,h2o:pot=2048)";
  std::vector<PolicySpec> out;
  std::set<std::string> seen;
  for (const std::string& raw : split(list, ',')) {
    const std::string entry = trim(raw);
    if (entry.empty()) throw SettingError("policy", "", "", "{policy} has an empty entry in '" + list + "'" + usage);
    PolicySpec p;
    try {
      p = parse_policy_spec(entry, default_pot, default_keep);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();  // find_policy's error names {policy} itself
      throw SettingError("policy", "", "", (what.rfind("{policy}", 0) == 0 ? what : "{policy} " + what) + usage);
    }
    if (!seen.insert(p.config()).second)
      throw SettingError("policy", "", "", "{policy} lists '" + p.config() + "' twice; drop one");
    out.push_back(p);
  }
  return out;
}

std::vector<int> parse_lengths(const std::string& list, const std::string& flag) {
  std::vector<int> out;
  for (const std::string& raw : split(list, ',')) {
    std::string e = trim(raw);
    long long mult = 1;
    if (!e.empty() && (e.back() == 'k' || e.back() == 'K')) mult = 1024, e.pop_back();
    else if (!e.empty() && (e.back() == 'm' || e.back() == 'M')) mult = 1024 * 1024, e.pop_back();
    long long n = 0;
    if (!parse_int(e, n) || n * mult < 1 || n * mult > (1 << 24))
      throw std::invalid_argument(flag + " takes a comma list of token counts (e.g. 4096,8192 or 4K,128K,1M), got '" +
                                  trim(raw) + "' in '" + list + "'");
    if (std::find(out.begin(), out.end(), int(n * mult)) != out.end())
      throw std::invalid_argument(flag + " lists " + std::to_string(n * mult) + " twice; drop one");
    out.push_back(static_cast<int>(n * mult));
  }
  return out;
}

std::vector<double> parse_depths(const std::string& list, const std::string& flag) {
  std::vector<double> out;
  for (const std::string& raw : split(list, ',')) {
    const std::string e = trim(raw);
    char* end = nullptr;
    const double d = std::strtod(e.c_str(), &end);
    if (e.empty() || *end != '\0' || !(d >= 0.0 && d <= 1.0))
      throw std::invalid_argument(flag + " takes a comma list of fractions in [0, 1] (e.g. 0.1,0.5,0.9), got '" + e +
                                  "' in '" + list + "'");
    if (std::find(out.begin(), out.end(), d) != out.end())
      throw std::invalid_argument(flag + " lists " + fmt_g(d) + " twice; drop one");
    out.push_back(d);
  }
  return out;
}

std::vector<std::string> parse_names(const std::string& list, const std::string& flag) {
  std::vector<std::string> out;
  for (const std::string& raw : split(list, ',')) {
    const std::string e = trim(raw);
    if (e.empty() || !std::all_of(e.begin(), e.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
        }))
      throw std::invalid_argument(flag + " takes a comma list of names (letters, digits, _ - .), got '" + e + "' in '" +
                                  list + "'");
    if (std::find(out.begin(), out.end(), e) != out.end())
      throw std::invalid_argument(flag + " lists '" + e + "' twice; drop one");
    out.push_back(e);
  }
  return out;
}

}  // namespace infinipot::nih
