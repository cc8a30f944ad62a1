// The nih results file (JSON Lines, resumable) and the summary tables (engine/nih.h).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "engine/nih.h"
#include "engine/nih_text.h"
#include "engine/tasks/task_registry.h"

namespace infinipot::nih {

using namespace text;

// ---------------------------------------------------------------------------------------
// Results

std::string trial_id(const std::string& config, const std::string& haystack, int length, double depth, int trial,
                     uint64_t seed, const std::string& task, const std::string& variant) {
  return task + "\t" + config + "\t" + haystack + "\t" + std::to_string(length) + "\t" + fmt_g(depth) + "\t" +
         std::to_string(trial) + "\t" + std::to_string(seed) + (variant.empty() ? "" : "\t" + variant);
}

std::string trial_variant(const std::string& task, const std::string& needle, const std::string& question) {
  const Task* t = task_or_null(task);
  std::string v;
  if (!needle.empty() && needle != kNeedle) v = "needle \"" + needle + "\"";
  // A task whose question names the trial's values asks another question per trial anyway.
  if (t && !t->fixed_question().empty() && !question.empty() && question != t->fixed_question())
    v += (v.empty() ? "" : "; ") + std::string("question \"") + question + "\"";
  return v;
}

std::string record_variant(const nlohmann::json& r) {
  auto text = [&](const char* key) {
    const auto it = r.find(key);
    return it != r.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  return trial_variant(record_task(r), text("needle"), text("question"));
}

std::string record_task(const nlohmann::json& r) {
  const auto it = r.find("task");
  return it != r.end() && it->is_string() ? it->get<std::string>() : std::string(kDefaultTask);
}

std::string trial_id(const nlohmann::json& r) {
  try {
    if (!r.is_object()) return "";
    return trial_id(r.at("config").get<std::string>(), r.at("haystack").get<std::string>(), r.at("length").get<int>(),
                    r.at("depth").get<double>(), r.at("trial").get<int>(), r.at("seed").get<uint64_t>(), record_task(r),
                    record_variant(r));
  } catch (const nlohmann::json::exception&) {
    return "";
  }
}

namespace {
// The results file's descriptor, held under flock(2) for as long as it lives: several nih
// processes may share one file (a queue of workers), so each append, and each read that may
// drop a torn last line, happens whole while no other process writes.
class LockedFile {
 public:
  LockedFile(const std::string& path, int flags) : fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
    if (fd_ < 0) return;
    int rc;
    do rc = ::flock(fd_, LOCK_EX);
    while (rc < 0 && errno == EINTR);
  }
  ~LockedFile() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};
}  // namespace

Results load_results(const std::string& path, bool repair) {
  Results res;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return res;
  if (std::filesystem::is_directory(path, ec))
    throw std::invalid_argument("results file '" + path + "' is a directory; give {out} a file name");
  const LockedFile f(path, O_RDONLY);  // no append lands while we read (and maybe cut)
  if (f.fd() < 0) throw std::invalid_argument("results file '" + path + "' cannot be read (permissions?)");
  std::string all;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd(), buf, sizeof buf);
    if (n > 0) all.append(buf, size_t(n));
    else if (n == 0) break;
    else if (errno != EINTR) throw std::invalid_argument("results file '" + path + "' cannot be read: " + std::strerror(errno));
  }

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
                                    " is not a JSON record; fix or remove that line, or give {out} another file");
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

// Under the file's lock, one write() at its end: another nih process appending to the same
// file waits, where stdio could have split a long record into pieces between another's.
void append_result(const std::string& path, const nlohmann::json& record) {
  const LockedFile f(path, O_RDWR | O_APPEND | O_CREAT);
  if (f.fd() < 0) throw std::runtime_error("cannot append to results file '" + path + "' (does its folder exist?)");
  // A record cut short by a crash (and not yet dropped by a load): start a line of our own.
  bool need_newline = false;
  struct stat st {};
  char last = '\n';
  if (::fstat(f.fd(), &st) == 0 && st.st_size > 0 && ::pread(f.fd(), &last, 1, st.st_size - 1) == 1)
    need_newline = last != '\n';
  const std::string line = (need_newline ? "\n" : "") +
                           record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  ssize_t n;
  do n = ::write(f.fd(), line.data(), line.size());
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("writing to results file '" + path + "' failed (disk full?)");
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
  int scored = 0;         // answers with a "score" (the share of the references found)
  double score_sum = 0;
};

// Tables are per (task, variant, haystack): a group, keyed "task\tvariant\thaystack".
struct Group {
  std::string task, variant, haystack;
};

struct Summary {
  std::vector<std::string> groups;  // first-seen order
  std::map<std::string, Group> parts;
  std::map<std::string, std::vector<std::string>> configs;  // per group, first-seen order
  std::map<std::string, std::set<int>> lengths;
  std::map<std::string, std::set<double>> depths;
  std::map<std::tuple<std::string, std::string, int>, Tally> by_length;
  std::map<std::tuple<std::string, std::string, int, double>, Tally> by_depth;
  std::map<std::pair<std::string, std::string>, Tally> by_config;
};

Summary summarize(const std::vector<nlohmann::json>& records) {
  Summary s;
  for (const auto& r : latest_records(records)) {
    const std::string task = record_task(r), variant = record_variant(r), hay = r["haystack"].get<std::string>();
    const std::string g = task + "\t" + variant + "\t" + hay, config = r["config"].get<std::string>();
    const int length = r["length"].get<int>();
    const double depth = r["depth"].get<double>();
    if (!s.parts.count(g)) s.groups.push_back(g), s.parts[g] = {task, variant, hay};
    auto& cs = s.configs[g];
    if (std::find(cs.begin(), cs.end(), config) == cs.end()) cs.push_back(config);
    s.lengths[g].insert(length);
    s.depths[g].insert(depth);
    const bool error = r.contains("error");
    const bool found = !error && r.value("found", false);
    const bool scored = !error && r.contains("score") && r["score"].is_number();
    for (Tally* t : {&s.by_length[{g, config, length}], &s.by_depth[{g, config, length, depth}],
                     &s.by_config[{g, config}]}) {
      t->errors += error;
      t->total += !error;
      t->found += found;
      t->scored += scored;
      if (scored) t->score_sum += r["score"].get<double>();
    }
  }
  return s;
}

// "found/total (pct%)"; with_score adds the mean share of the references found (all-of tasks).
std::string cell(const Tally& t, bool with_score) {
  if (t.total == 0 && t.errors == 0) return "";
  if (t.total == 0) return "error (" + std::to_string(t.errors) + ")";
  const int pct = static_cast<int>(std::lround(100.0 * t.found / t.total));
  std::string s = std::to_string(t.found) + "/" + std::to_string(t.total) + " (" + std::to_string(pct) + "%)";
  if (with_score && t.scored > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ", score %.2f", t.score_sum / t.scored);
    s += buf;
  }
  if (t.errors) s += " +" + std::to_string(t.errors) + " err";
  return s;
}

nlohmann::json tally_json(const Tally& t) {
  nlohmann::json j = {{"found", t.found}, {"total", t.total}, {"errors", t.errors}};
  if (t.scored > 0) j["score"] = t.score_sum / t.scored;
  return j;
}

// What a cell cost, over every task and haystack: device and host memory must stay flat with
// the length, time grows with it. Times come from trials that read their whole document
// (a trial resumed from a shared prefix, `resumed_at` > 0, read only part of it).
struct Resources {
  int trials = 0;
  double peak_device = 0, host_rss = 0;  // maxima, bytes (host: records that have it)
  std::vector<double> cycles, wall, cpu, tok_s;
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::map<std::pair<std::string, int>, Resources> resources(const std::vector<nlohmann::json>& records,
                                                           std::vector<std::string>& configs) {
  std::map<std::pair<std::string, int>, Resources> out;
  for (const auto& r : latest_records(records)) {
    if (r.contains("error") || !r.contains("wall_s")) continue;  // every record the command writes has wall_s
    const std::string c = r["config"].get<std::string>();
    if (std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);
    Resources& x = out[{c, r["length"].get<int>()}];
    ++x.trials;
    x.peak_device = std::max(x.peak_device, r.value("peak_device_bytes", 0.0));
    x.host_rss = std::max(x.host_rss, r.value("host_peak_rss", 0.0));
    if (r.contains("ccd_cycles")) x.cycles.push_back(r["ccd_cycles"].get<double>());
    if (r.value("resumed_at", 0) == 0) {
      if (r.contains("wall_s")) x.wall.push_back(r["wall_s"].get<double>());
      if (r.contains("cpu_s")) x.cpu.push_back(r["cpu_s"].get<double>());  // records since 2026-11-28
      if (r.contains("prefill_tok_s")) x.tok_s.push_back(r["prefill_tok_s"].get<double>());
    }
  }
  return out;
}

std::string render_resources(const std::vector<nlohmann::json>& records) {
  std::vector<std::string> configs;
  const auto res = resources(records, configs);
  if (res.empty()) return "";
  auto mib = [](double b) { return b > 0 ? fmt_g(std::round(b / (1 << 20) * 10) / 10) : std::string("-"); };
  auto num = [](double v, double scale) { return std::isnan(v) ? std::string("-") : fmt_g(std::round(v * scale) / scale); };
  std::ostringstream o;
  o << "### Resources per cell (every task and haystack)\n\n| config | length | trials | peak device MiB | host peak "
       "RSS MiB | cycles (median) | s per full read (median) | CPU s per full read (median) | prefill tok/s (median) "
       "|\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& c : configs)
    for (const auto& [key, x] : res) {
      if (key.first != c) continue;
      o << "| " << c << " | " << key.second << " | " << x.trials << " | " << mib(x.peak_device) << " | "
        << mib(x.host_rss) << " | " << num(median(x.cycles), 1) << " | " << num(median(x.wall), 10) << " | "
        << num(median(x.cpu), 10) << " | " << num(median(x.tok_s), 10) << " |\n";
    }
  return o.str() + "\n";
}

// The default task's tables keep their old titles ("### passkey: pass key found, ...");
// a variant follows in parentheses ("### passkey (needle \"...\"): ...").
std::string title(const Group& g) {
  const std::string t = g.task == kDefaultTask ? g.haystack : g.task + " on " + g.haystack;
  return g.variant.empty() ? t : t + " (" + g.variant + ")";
}

}  // namespace

std::string render_tables(const std::vector<nlohmann::json>& records) {
  const Summary s = summarize(records);
  if (s.groups.empty()) return "no results yet\n";
  std::ostringstream o;
  for (const std::string& g : s.groups) {
    const Group& part = s.parts.at(g);
    const Task* info = task_or_null(part.task);
    const bool with_score = info && info->rule() == Rule::All;
    const auto& lengths = s.lengths.at(g);
    const auto& depths = s.depths.at(g);
    o << "### " << title(part) << ": " << (info ? info->headline() : "found") << ", by length (tokens)\n\n| config |";
    for (int l : lengths) o << " " << l << " |";
    o << " all |\n|---|";
    for (size_t i = 0; i <= lengths.size(); ++i) o << "---:|";
    o << "\n";
    for (const std::string& c : s.configs.at(g)) {
      o << "| " << c << " |";
      for (int l : lengths) {
        auto it = s.by_length.find({g, c, l});
        o << " " << (it == s.by_length.end() ? "" : cell(it->second, with_score)) << " |";
      }
      o << " " << cell(s.by_config.at({g, c}), with_score) << " |\n";
    }
    o << "\n### " << title(part) << ": by depth\n\n| config | length |";
    for (double d : depths) o << " " << fmt_g(d) << " |";
    o << "\n|---|---:|";
    for (size_t i = 0; i < depths.size(); ++i) o << "---:|";
    o << "\n";
    for (const std::string& c : s.configs.at(g))
      for (int l : lengths) {
        if (!s.by_length.count({g, c, l})) continue;
        o << "| " << c << " | " << l << " |";
        for (double d : depths) {
          auto it = s.by_depth.find({g, c, l, d});
          o << " " << (it == s.by_depth.end() ? "" : cell(it->second, with_score)) << " |";
        }
        o << "\n";
      }
    o << "\n";
  }
  o << render_resources(records);
  return o.str();
}

nlohmann::json summary_json(const std::vector<nlohmann::json>& records) {
  const Summary s = summarize(records);
  nlohmann::json out = {{"haystacks", nlohmann::json::object()}, {"tasks", nlohmann::json::object()}};
  for (const std::string& g : s.groups) {
    const Group& part = s.parts.at(g);
    nlohmann::json h = {{"by_config", nlohmann::json::array()},
                        {"by_length", nlohmann::json::array()},
                        {"by_depth", nlohmann::json::array()}};
    for (const std::string& c : s.configs.at(g)) {
      nlohmann::json t = tally_json(s.by_config.at({g, c}));
      t["config"] = c;
      h["by_config"].push_back(t);
      for (int l : s.lengths.at(g)) {
        auto it = s.by_length.find({g, c, l});
        if (it == s.by_length.end()) continue;
        nlohmann::json tl = tally_json(it->second);
        tl["config"] = c;
        tl["length"] = l;
        h["by_length"].push_back(tl);
        for (double d : s.depths.at(g)) {
          auto jt = s.by_depth.find({g, c, l, d});
          if (jt == s.by_depth.end()) continue;
          nlohmann::json td = tally_json(jt->second);
          td["config"] = c;
          td["length"] = l;
          td["depth"] = d;
          h["by_depth"].push_back(td);
        }
      }
    }
    // "haystacks" is the default task's, as before there were tasks; "tasks" has them all, a
    // variant under its own key ('passkey (needle "...")').
    if (part.task == kDefaultTask && part.variant.empty()) out["haystacks"][part.haystack] = h;
    const std::string key = part.variant.empty() ? part.task : part.task + " (" + part.variant + ")";
    out["tasks"][key]["haystacks"][part.haystack] = std::move(h);
  }
  return out;
}

}  // namespace infinipot::nih
