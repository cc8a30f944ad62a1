#include "engine/nih.h"

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

namespace infinipot::nih {

const char* const kTaskLine =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
    "I will quiz you about the important information there.";
const char* const kFiller = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
// The usual question with the answer's form asked for: a 135M chat model asked only "What is
// the pass key?" tends to explain what a pass key is instead (docs/results.md).
const char* const kQuestion = "What is the pass key? Answer with the number only.";

std::string needle(const std::string& key) {
  return "The pass key is " + key + ". Remember it. " + key + " is the pass key.";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }
bool is_closer(char c) { return c == '\'' || c == '"' || c == ')' || c == ']'; }

// Whether s[..e) ends a sentence: ".", "!" or "?", maybe followed by closing quotes/brackets.
bool ends_sentence(const std::string& s, size_t e) {
  while (e > 0 && is_closer(s[e - 1])) --e;
  return e > 0 && (s[e - 1] == '.' || s[e - 1] == '!' || s[e - 1] == '?');
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return s.substr(a, b - a);
}

std::vector<std::string> split(const std::string& s, char sep) {
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

std::string fmt_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool parse_int(const std::string& s, long long& out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  out = std::stoll(s);
  return true;
}

}  // namespace

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

Document DocumentBuilder::build(int target_tokens, double depth, const std::string& key) {
  if (target_tokens < 1) throw std::invalid_argument("a document needs at least 1 token, got " + std::to_string(target_tokens));
  if (!(depth >= 0.0 && depth <= 1.0)) throw std::invalid_argument("depth must be in [0, 1], got " + fmt_g(depth));
  const std::string nd = needle(key);
  const int needle_tokens = count(nd);
  const int tol_doc = std::max(1, static_cast<int>(target_tokens * 0.01));
  const int tol_body = std::max(1, tol_doc / 2);
  const size_t region = h_.opening.empty() ? 0 : h_.opening.size() + 1;

  Document d;
  d.key = key;
  d.target = target_tokens;
  int body_target = std::max(1, target_tokens - needle_tokens);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Cut cut = cut_for(body_target, tol_body);
    const std::string body = stream(cut.chars).substr(0, cut.chars);
    const size_t rs = std::min(region, body.size());
    // Sentence starts in the filler (and its two ends); the one nearest the depth wins.
    const double aim = rs + depth * double(body.size() - rs);
    size_t at = rs;
    double best = std::abs(aim - double(rs));
    auto consider = [&](size_t p) {
      if (std::abs(aim - double(p)) < best) best = std::abs(aim - double(p)), at = p;
    };
    for (size_t p = rs + 1; p < body.size(); ++p)
      if (!is_space(body[p]) && is_space(body[p - 1])) {
        size_t q = p - 1;
        while (q > rs && is_space(body[q - 1])) --q;
        const bool paragraph = body.compare(q, 2, "\n\n") == 0;
        if (paragraph || ends_sentence(body, q)) consider(p);
      }
    consider(body.size());
    std::string before = body.substr(0, at);
    const std::string after = body.substr(at);
    if (!before.empty() && !is_space(before.back())) before += ' ';
    d.needle_at = before.size();
    d.text = before + nd + (after.empty() ? "" : " ") + after;
    d.needle_depth = body.size() > rs ? double(at - rs) / double(body.size() - rs) : 0.0;
    d.tokens = count(d.text);
    if (std::abs(d.tokens - target_tokens) <= tol_doc) break;
    body_target = std::max(1, body_target - (d.tokens - target_tokens));  // the needle's joints were off: once more
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

std::string PolicySpec::config() const {
  if (!uses_pot()) return name;
  std::string s = name + ":pot=" + std::to_string(pot);
  if (keep > 0) s += ":keep=" + std::to_string(keep);
  if (nuc_ratio != 0.5f) s += ":nuc_ratio=" + fmt_g(nuc_ratio);
  if (pool >= 0) s += ":pool=" + std::to_string(pool);
  if (recent >= 0) s += ":recent=" + std::to_string(recent);
  if (ahead >= 0) s += ":ahead=" + std::to_string(ahead);
  if (per_head) s += ":heads=per-head";
  if (per_layer) s += ":layers=per-layer";
  if (token_units) s += ":units=token";
  if (alnum_units) s += ":units=alnum";
  if (cap_all_rows) s += ":cap_rows=all";
  if (oracle) s += ":oracle=1";
  return s;
}

std::vector<PolicySpec> parse_policies(const std::string& list, int default_pot, int default_keep) {
  const std::string usage = " (--policy takes a comma list of NAME or NAME:pot=N:keep=K:nuc_ratio=A:pool=P:ahead=F:recent=R:heads=per-head:layers=per-layer:units=token|alnum:cap_rows=all:oracle=1, e.g. "
                            "--policy full,infinipot,h2o:pot=2048)";
  std::vector<PolicySpec> out;
  std::set<std::string> seen;
  for (const std::string& raw : split(list, ',')) {
    const std::string entry = trim(raw);
    if (entry.empty()) throw std::invalid_argument("--policy has an empty entry in '" + list + "'" + usage);
    const auto parts = split(entry, ':');
    PolicySpec p;
    p.name = parts[0];
    if (p.name.empty() || !std::all_of(p.name.begin(), p.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
        }))
      throw std::invalid_argument("--policy entry '" + entry + "' does not start with a policy name" + usage);
    p.pot = default_pot;
    p.keep = default_keep;
    for (size_t i = 1; i < parts.size(); ++i) {
      const size_t eq = parts[i].find('=');
      if (eq == std::string::npos)
        throw std::invalid_argument("--policy entry '" + entry + "': '" + parts[i] + "' is not key=value" + usage);
      std::string k = parts[i].substr(0, eq);
      const std::string v = parts[i].substr(eq + 1);
      std::replace(k.begin(), k.end(), '-', '_');
      if (p.name == "full")
        throw std::invalid_argument("--policy entry '" + entry + "': full keeps the whole prompt in a KV cache; "
                                    "pot settings do not apply to it");
      long long n = 0;
      auto bad = [&](const std::string& what) {
        return std::invalid_argument("--policy entry '" + entry + "': " + k + "=" + v + " is not " + what);
      };
      if (k == "pot") {
        if (!parse_int(v, n) || n < 1 || n > (1 << 24)) throw bad("a pot size in 1..16777216");
        p.pot = static_cast<int>(n);
      } else if (k == "keep") {
        if (!parse_int(v, n) || n < 1 || n > (1 << 24)) throw bad("a count of entries >= 1");
        p.keep = static_cast<int>(n);
        p.keep_given = true;
      } else if (k == "pool") {
        if (!parse_int(v, n) || n > 64) throw bad("a pooling radius in 0..64");
        p.pool = static_cast<int>(n);
        p.pool_given = true;
      } else if (k == "recent") {
        if (!parse_int(v, n) || n > (1 << 24)) throw bad("a count of recent entries >= 0");
        p.recent = static_cast<int>(n);
        p.recent_given = true;
      } else if (k == "ahead") {
        if (!parse_int(v, n) || n > 64) throw bad("a pooling reach in 0..64");
        p.ahead = static_cast<int>(n);
        p.pool_given = true;
      } else if (k == "units") {
        if (v != "word" && v != "alnum" && v != "token") throw bad("word, alnum or token");
        p.token_units = v == "token";
        p.alnum_units = v == "alnum";
      } else if (k == "heads" || k == "layers" || k == "cap_rows" || k == "oracle") {
        const std::map<std::string, std::pair<std::string, bool*>> choice = {
            {"heads", {"per-head", &p.per_head}},   {"layers", {"per-layer", &p.per_layer}},
            {"cap_rows", {"all", &p.cap_all_rows}},
            {"oracle", {"1", &p.oracle}}};
        const auto& [on, field] = choice.at(k);
        const std::string off = k == "heads" || k == "layers" ? "shared" : k == "cap_rows" ? "question" : "0";
        if (v != on && v != off) throw bad(on + " or " + off);
        *field = v == on;
      } else if (k == "nuc_ratio") {
        char* end = nullptr;
        const double r = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !(r >= 0.0 && r <= 1.0)) throw bad("a share in [0, 1]");
        p.nuc_ratio = static_cast<float>(r);
        p.nuc_ratio_given = true;
      } else {
        throw std::invalid_argument("--policy entry '" + entry + "': unknown setting '" + k +
                                    "' (known: pot, keep, nuc_ratio, pool, ahead, recent, heads, layers, units, cap_rows, oracle)");
      }
    }
    if (p.uses_pot()) {
      if (p.pot <= 0)
        throw std::invalid_argument("--policy entry '" + entry + "' needs a pot size: give --pot N or " + p.name + ":pot=N");
      if (p.keep >= p.pot)
        throw std::invalid_argument("--policy entry '" + entry + "': keep (" + std::to_string(p.keep) +
                                    ") must be below the pot's size (" + std::to_string(p.pot) +
                                    "); lower keep or raise pot");
    } else {
      p.pot = 0;
      p.keep = 0;
    }
    if (!seen.insert(p.config()).second)
      throw std::invalid_argument("--policy lists '" + p.config() + "' twice; drop one");
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

// ---------------------------------------------------------------------------------------
// Results

std::string trial_id(const std::string& config, const std::string& haystack, int length, double depth, int trial,
                     uint64_t seed) {
  return config + "\t" + haystack + "\t" + std::to_string(length) + "\t" + fmt_g(depth) + "\t" +
         std::to_string(trial) + "\t" + std::to_string(seed);
}

std::string trial_id(const nlohmann::json& r) {
  try {
    if (!r.is_object()) return "";
    return trial_id(r.at("config").get<std::string>(), r.at("haystack").get<std::string>(), r.at("length").get<int>(),
                    r.at("depth").get<double>(), r.at("trial").get<int>(), r.at("seed").get<uint64_t>());
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

Results load_results(const std::string& path, bool repair) {
  Results res;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return res;
  if (std::filesystem::is_directory(path, ec))
    throw std::invalid_argument("results file '" + path + "' is a directory; give --out a file name");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("results file '" + path + "' cannot be read (permissions?)");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  in.close();

  struct Line {
    size_t begin, end;
  };
  std::vector<Line> lines;
  for (size_t b = 0; b < all.size();) {
    size_t e = all.find('\n', b);
    if (e == std::string::npos) e = all.size();
    if (!trim(all.substr(b, e - b)).empty()) lines.push_back({b, e});
    b = e + 1;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string text = all.substr(lines[i].begin, lines[i].end - lines[i].begin);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      const size_t line_no = std::count(all.begin(), all.begin() + lines[i].begin, '\n') + 1;
      if (i + 1 < lines.size())
        throw std::invalid_argument("results file '" + path + "': line " + std::to_string(line_no) +
                                    " is not a JSON record; fix or remove that line, or give --out another file");
      res.warnings.push_back("results file '" + path + "': the last line (line " + std::to_string(line_no) + ", " +
                             std::to_string(text.size()) + " bytes) is not a complete record (a run stopped while "
                             "writing it?); " + (repair ? "dropped it" : "ignored it"));
      if (repair) std::filesystem::resize_file(path, lines[i].begin);
      break;
    }
    res.records.push_back(std::move(j));
    const nlohmann::json& r = res.records.back();
    const std::string id = trial_id(r);
    if (!id.empty() && !r.contains("error")) res.done[id] = res.records.size() - 1;
  }
  return res;
}

void append_result(const std::string& path, const nlohmann::json& record) {
  bool need_newline = false;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (in && in.tellg() > 0) {
      in.seekg(-1, std::ios::end);
      need_newline = in.get() != '\n';
    }
  }
  FILE* f = std::fopen(path.c_str(), "ab");
  if (!f) throw std::runtime_error("cannot append to results file '" + path + "' (does its folder exist?)");
  const std::string line = (need_newline ? "\n" : "") +
                           record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size() && std::fflush(f) == 0;
  std::fclose(f);
  if (!ok) throw std::runtime_error("writing to results file '" + path + "' failed (disk full?)");
}

std::vector<nlohmann::json> latest_records(const std::vector<nlohmann::json>& records) {
  std::vector<nlohmann::json> out;
  std::map<std::string, size_t> at;
  for (const auto& r : records) {
    const std::string id = trial_id(r);
    if (id.empty()) continue;
    auto it = at.find(id);
    if (it == at.end()) {
      at[id] = out.size();
      out.push_back(r);
    } else if (!r.contains("error") || out[it->second].contains("error")) {
      out[it->second] = r;  // an answer is never replaced by a later error
    }
  }
  return out;
}

namespace {

struct Tally {
  int found = 0, total = 0, errors = 0;
};

struct Summary {
  std::vector<std::string> haystacks;
  std::map<std::string, std::vector<std::string>> configs;  // per haystack, first-seen order
  std::map<std::string, std::set<int>> lengths;
  std::map<std::string, std::set<double>> depths;
  std::map<std::tuple<std::string, std::string, int>, Tally> by_length;
  std::map<std::tuple<std::string, std::string, int, double>, Tally> by_depth;
  std::map<std::pair<std::string, std::string>, Tally> by_config;
};

Summary summarize(const std::vector<nlohmann::json>& records) {
  Summary s;
  for (const auto& r : latest_records(records)) {
    const std::string hay = r["haystack"].get<std::string>(), config = r["config"].get<std::string>();
    const int length = r["length"].get<int>();
    const double depth = r["depth"].get<double>();
    if (std::find(s.haystacks.begin(), s.haystacks.end(), hay) == s.haystacks.end()) s.haystacks.push_back(hay);
    auto& cs = s.configs[hay];
    if (std::find(cs.begin(), cs.end(), config) == cs.end()) cs.push_back(config);
    s.lengths[hay].insert(length);
    s.depths[hay].insert(depth);
    const bool error = r.contains("error");
    const bool found = !error && r.value("found", false);
    for (Tally* t : {&s.by_length[{hay, config, length}], &s.by_depth[{hay, config, length, depth}],
                     &s.by_config[{hay, config}]}) {
      t->errors += error;
      t->total += !error;
      t->found += found;
    }
  }
  return s;
}

std::string cell(const Tally& t) {
  if (t.total == 0 && t.errors == 0) return "";
  if (t.total == 0) return "error (" + std::to_string(t.errors) + ")";
  const int pct = static_cast<int>(std::lround(100.0 * t.found / t.total));
  std::string s = std::to_string(t.found) + "/" + std::to_string(t.total) + " (" + std::to_string(pct) + "%)";
  if (t.errors) s += " +" + std::to_string(t.errors) + " err";
  return s;
}

nlohmann::json tally_json(const Tally& t) { return {{"found", t.found}, {"total", t.total}, {"errors", t.errors}}; }

}  // namespace

std::string render_tables(const std::vector<nlohmann::json>& records) {
  const Summary s = summarize(records);
  if (s.haystacks.empty()) return "no results yet\n";
  std::ostringstream o;
  for (const std::string& hay : s.haystacks) {
    const auto& lengths = s.lengths.at(hay);
    const auto& depths = s.depths.at(hay);
    o << "### " << hay << ": pass key found, by length (tokens)\n\n| config |";
    for (int l : lengths) o << " " << l << " |";
    o << " all |\n|---|";
    for (size_t i = 0; i <= lengths.size(); ++i) o << "---:|";
    o << "\n";
    for (const std::string& c : s.configs.at(hay)) {
      o << "| " << c << " |";
      for (int l : lengths) {
        auto it = s.by_length.find({hay, c, l});
        o << " " << (it == s.by_length.end() ? "" : cell(it->second)) << " |";
      }
      o << " " << cell(s.by_config.at({hay, c})) << " |\n";
    }
    o << "\n### " << hay << ": by depth\n\n| config | length |";
    for (double d : depths) o << " " << fmt_g(d) << " |";
    o << "\n|---|---:|";
    for (size_t i = 0; i < depths.size(); ++i) o << "---:|";
    o << "\n";
    for (const std::string& c : s.configs.at(hay))
      for (int l : lengths) {
        if (!s.by_length.count({hay, c, l})) continue;
        o << "| " << c << " | " << l << " |";
        for (double d : depths) {
          auto it = s.by_depth.find({hay, c, l, d});
          o << " " << (it == s.by_depth.end() ? "" : cell(it->second)) << " |";
        }
        o << "\n";
      }
    o << "\n";
  }
  return o.str();
}

nlohmann::json summary_json(const std::vector<nlohmann::json>& records) {
  const Summary s = summarize(records);
  nlohmann::json out = {{"haystacks", nlohmann::json::object()}};
  for (const std::string& hay : s.haystacks) {
    nlohmann::json h = {{"by_config", nlohmann::json::array()},
                        {"by_length", nlohmann::json::array()},
                        {"by_depth", nlohmann::json::array()}};
    for (const std::string& c : s.configs.at(hay)) {
      nlohmann::json t = tally_json(s.by_config.at({hay, c}));
      t["config"] = c;
      h["by_config"].push_back(t);
      for (int l : s.lengths.at(hay)) {
        auto it = s.by_length.find({hay, c, l});
        if (it == s.by_length.end()) continue;
        nlohmann::json tl = tally_json(it->second);
        tl["config"] = c;
        tl["length"] = l;
        h["by_length"].push_back(tl);
        for (double d : s.depths.at(hay)) {
          auto jt = s.by_depth.find({hay, c, l, d});
          if (jt == s.by_depth.end()) continue;
          nlohmann::json td = tally_json(jt->second);
          td["config"] = c;
          td["length"] = l;
          td["depth"] = d;
          h["by_depth"].push_back(td);
        }
      }
    }
    out["haystacks"][hay] = h;
  }
  return out;
}

}  // namespace infinipot::nih
