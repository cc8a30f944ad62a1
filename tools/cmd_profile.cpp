// infinipot profile: runs a job exactly as `run` does (same flags) while recording a Chrome
// trace (runtime/trace.h): device-memory counters per category, spans for loading, each
// prefill chunk, each distillation cycle (CaP / NuC / selection / compaction / re-rotation)
// and each decoded token, and with --kernels one span per OpenCL kernel. Writes the trace
// (--trace), a figure (--png: memory over time by category and the positions the pot holds at
// the end, per layer; bench/plot_profile.py), and prints a summary table.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "runtime/device_memory.h"
#include "runtime/trace.h"
#include "tools/cli_common.h"
#include "tools/cmd_run.h"

namespace infinipot::cli {
namespace {

struct ProfileOpts {
  std::string trace_file, png_file;
  bool kernels = false;
};

// Which stream positions the KV store holds at the end, per layer and KV head (the pot's
// survivors; every position for a full cache).
nlohmann::json retained_map(Engine& engine, const Answer& a) {
  // The global layers' store (every layer of llama); sliding-window layers hold only the window.
  const int L = engine.config().n_global_layers(), H = engine.config().n_head_kv;
  nlohmann::json layers = nlohmann::json::array();
  int stream = 0;
  if (MemoryPot* pot = engine.pot()) {
    stream = static_cast<int>(pot->stats().tokens_read) + static_cast<int>(a.result.tokens.size());
    for (int l = 0; l < L; ++l) {
      nlohmann::json heads = nlohmann::json::array();
      for (int h = 0; h < H; ++h) heads.push_back(pot->sources(l, h));
      layers.push_back(std::move(heads));
    }
  } else {
    stream = engine.kv().size();
    std::vector<int> all(stream);
    for (int i = 0; i < stream; ++i) all[i] = i;
    for (int l = 0; l < L; ++l) layers.push_back(nlohmann::json::array({all}));
  }
  return {{"stream_tokens", stream}, {"layers", std::move(layers)},
          {"prompt_tokens", a.result.prompt_tokens}, {"pot", a.pot.is_null() ? nlohmann::json(nullptr) : a.pot}};
}

struct PhaseTotal {
  double ms = 0;
  int count = 0;
};

// With --kernels: what one decoded token costs, from the start of one "decode token" span to
// the next (so the LM head, reading the logits and sampling count too): wall time, the device
// time of the kernels launched in it (OpenCL profiling events), the rest (launch overhead,
// synchronisation, host work), and launches per token.
void print_decode_step(const nlohmann::json& trace, FILE* out) {
  std::vector<double> starts;                     // us
  std::vector<std::pair<double, double>> kernels;  // ts, dur (us)
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    if (e.value("tid", 1) == 2) kernels.push_back({e["ts"].get<double>(), e["dur"].get<double>()});
    else if (e.value("cat", "") == "decode" && e.value("name", "") == "decode token") starts.push_back(e["ts"].get<double>());
  }
  if (starts.size() < 2 || kernels.empty()) return;
  std::sort(starts.begin(), starts.end());
  const double t0 = starts.front(), t1 = starts.back();
  double device_us = 0;
  long launches = 0;
  for (const auto& [ts, dur] : kernels)
    if (ts >= t0 && ts < t1) device_us += dur, ++launches;
  const double n = static_cast<double>(starts.size() - 1);
  const double wall = (t1 - t0) / n / 1e3, device = device_us / n / 1e3;
  std::fprintf(out, "\n## Decode step (mean of %d tokens)\n\n| wall ms | kernels ms (device) | host gap ms | launches |\n"
               "|---:|---:|---:|---:|\n| %.2f | %.2f | %.2f | %.1f |\n", static_cast<int>(n), wall, device,
               wall - device, launches / n);
}

// The summary: peak bytes per category (from the counters), time per span name, cycles.
void print_summary(const nlohmann::json& trace, FILE* out) {
  std::map<std::string, double> peak;
  double budget = 0, peak_total = 0;
  std::map<std::string, std::map<std::string, PhaseTotal>> phases;  // cat -> name -> total
  int kernels = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph == "C" && e["name"] == "device memory (bytes)") {
      double total = 0;
      for (auto it = e["args"].begin(); it != e["args"].end(); ++it) {
        peak[it.key()] = std::max(peak[it.key()], it.value().get<double>());
        total += it.value().get<double>();
      }
      peak_total = std::max(peak_total, total);
    } else if (ph == "C" && e["name"] == "device memory budget (bytes)") {
      budget = e["args"]["budget"].get<double>();
    } else if (ph == "X" && e.value("tid", 1) == 2) {
      ++kernels;
      auto& t = phases["kernel"][e["name"].get<std::string>()];
      t.ms += e["dur"].get<double>() / 1e3;
      ++t.count;
    } else if (ph == "X") {
      auto& t = phases[e.value("cat", "")][e["name"].get<std::string>()];
      t.ms += e["dur"].get<double>() / 1e3;
      ++t.count;
    }
  }
  std::fprintf(out, "\n## Device memory (peak per category; budget %s)\n\n| category | peak |\n|---|---:|\n",
               cl::format_bytes(static_cast<uint64_t>(budget)).c_str());
  for (const auto& [k, v] : peak)
    if (v > 0) std::fprintf(out, "| %s | %s |\n", k.c_str(), cl::format_bytes(static_cast<uint64_t>(v)).c_str());
  std::fprintf(out, "| **all (at once)** | **%s** |\n", cl::format_bytes(static_cast<uint64_t>(peak_total)).c_str());
  std::fprintf(out, "\n## Time per phase\n\n| phase | step | count | total ms |\n|---|---|---:|---:|\n");
  for (const char* cat : {"load", "prefill", "ccd", "decode"}) {
    if (!phases.count(cat)) continue;
    for (const auto& [name, t] : phases[cat])
      std::fprintf(out, "| %s | %s | %d | %.1f |\n", cat, name.c_str(), t.count, t.ms);
  }
  if (kernels) {
    std::vector<std::pair<std::string, PhaseTotal>> k(phases["kernel"].begin(), phases["kernel"].end());
    std::sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    std::fprintf(out, "\n## Kernels (%d launches; top 10 by device time)\n\n| kernel | launches | total ms |\n|---|---:|---:|\n",
                 kernels);
    for (size_t i = 0; i < k.size() && i < 10; ++i)
      std::fprintf(out, "| %s | %d | %.1f |\n", k[i].first.c_str(), k[i].second.count, k[i].second.ms);
  }
  print_decode_step(trace, out);
  const auto& meta = trace["infinipot"];
  const int cycles = meta["pot"].is_object() ? meta["pot"].value("cycles", 0) : 0;
  std::fprintf(out, "\n%d prompt tokens read, %d distillation cycles\n", meta["prompt_tokens"].get<int>(), cycles);
}

void write_file(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::invalid_argument(std::string(flag) + ": cannot write '" + path + "'");
  f << text;
  f.close();
  if (!f) throw std::runtime_error(std::string(flag) + ": writing '" + path + "' failed");
}

// bench/plot_profile.py TRACE PNG (matplotlib); a clear error when Python or matplotlib is missing.
void plot(const std::string& trace_path, const std::string& png) {
  const std::string script = data_path("bench/plot_profile.py");
  if (access(script.c_str(), R_OK) != 0)
    throw std::invalid_argument("--png needs bench/plot_profile.py (from the source tree), not found at '" + script + "'");
  const auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  // The first Python with matplotlib: $INFINIPOT_PYTHON, else python3 on PATH, else the
  // system's (a pyenv or venv python3 on PATH often lacks the Debian package's matplotlib).
  std::string python = "python3";
  if (const char* env = std::getenv("INFINIPOT_PYTHON"); env && *env) python = quote(env);
  else
    for (const char* candidate : {"python3", "/usr/bin/python3"})
      if (std::system((std::string(candidate) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) {
        python = candidate;
        break;
      }
  const std::string cmd = python + " " + quote(script) + " " + quote(trace_path) + " " + quote(png);
  const int rc = std::system(cmd.c_str());
  if (rc != 0)
    throw std::runtime_error("--png: `" + cmd + "` failed (exit " + std::to_string(WEXITSTATUS(rc)) +
                             "); it needs python3 with matplotlib (Debian: apt install python3-matplotlib; "
                             "scripts/deps.sh installs it). The trace itself was written.");
}

void profile(const RunOpts& ro, const ProfileOpts& po, bool have_prompt, bool have_file) {
  if (!po.png_file.empty() && po.png_file == po.trace_file)
    throw CLI::ValidationError("--trace and --png name the same file '" + po.png_file + "'");
  // Output paths are checked before the run, not after minutes of it.
  for (const auto& [path, flag] : {std::pair{po.trace_file, "--trace"}, std::pair{po.png_file, "--png"}})
    if (!path.empty() && !std::ofstream(path, std::ios::app))
      throw std::invalid_argument(std::string(flag) + ": cannot write '" + path + "' (missing directory or no permission)");
  nlohmann::json retained;
  trace::start(po.kernels);
  try {
    run(ro, have_prompt, have_file, [&](Engine& engine, const Answer& a) { retained = retained_map(engine, a); });
  } catch (...) {
    trace::stop();
    throw;
  }
  nlohmann::json t = trace::stop();
  t["infinipot"] = std::move(retained);
  std::string trace_path = po.trace_file;
  std::string tmp_trace;
  if (trace_path.empty() && !po.png_file.empty()) {
    char tmpl[] = "/tmp/infinipot-trace-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) throw std::runtime_error("cannot create a temporary trace file in /tmp");
    close(fd);
    trace_path = tmp_trace = tmpl;
  }
  if (!trace_path.empty()) write_file(trace_path, t.dump(), "--trace");
  try {
    if (!po.png_file.empty()) plot(trace_path, po.png_file);
  } catch (...) {
    if (!tmp_trace.empty()) std::remove(tmp_trace.c_str());
    throw;
  }
  if (!tmp_trace.empty()) std::remove(tmp_trace.c_str());
  // Beside --json (run's object on stdout) the summary goes to stderr.
  print_summary(t, ro.json ? stderr : stdout);
  if (!po.trace_file.empty())
    std::fprintf(ro.json ? stderr : stdout, "trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                 po.trace_file.c_str());
  if (!po.png_file.empty()) std::fprintf(ro.json ? stderr : stdout, "figure: %s\n", po.png_file.c_str());
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto* sub = app.add_subcommand("profile", "Run a job as `run` does and record where time and device memory go: "
                                            "a Chrome trace (--trace), a figure (--png), a summary table");
  auto o = std::make_shared<RunOpts>();
  auto po = std::make_shared<ProfileOpts>();
  const auto [p, f] = add_run_flags(sub, o);
  sub->add_option("--trace", po->trace_file, "Write a Chrome Trace Event JSON (Perfetto, chrome://tracing)");
  sub->add_option("--png", po->png_file, "Write a figure: device memory over time by category, and the document "
                                         "positions each layer holds at the end (python3 + matplotlib)");
  sub->add_flag("--kernels", po->kernels, "Also one span per OpenCL kernel (from profiling events; slower)");
  sub->callback([o, po, p = p, f = f] { profile(*o, *po, static_cast<bool>(*p), static_cast<bool>(*f)); });
}

}  // namespace infinipot::cli
