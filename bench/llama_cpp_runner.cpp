#include "bench/llama_cpp_runner.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "pot/pot_snapshot.h"  // fnv1a64

namespace infinipot::cli {
namespace {

struct Child {
  int status = -1;
  long long max_rss_bytes = 0;
  double cpu_s = 0, wall_s = 0;  // its CPU time (user + system, all threads) and wall time
  std::string out, err;
};

// Reads a whole file descriptor until EOF.
std::string drain(int fd) {
  std::string s;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) s.append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;
  }
  return s;
}

// The child's own peak RSS (VmHWM of its address space after exec), 0 once it is gone.
// (wait4's ru_maxrss would not do: Linux carries the parent's high-water mark over fork and
// exec into it, so a large parent makes every child look large.)
long long vm_hwm_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return 0;
}

// Runs argv with stdout and stderr to temporary files, polling the child's peak RSS until it
// exits (the last sample is taken at most 20 ms before its end).
Child run_child(const std::vector<std::string>& argv) {
  Child c;
  FILE* out_file = std::tmpfile();
  FILE* err_file = std::tmpfile();
  if (!out_file || !err_file) throw std::runtime_error("cannot create temporary files for llama-bench's output");
  // Closed by a successful exec (O_CLOEXEC): when the parent reads EOF on it, the child is
  // the new program and its VmHWM is its own.
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(exec_pipe[0]);
    dup2(fileno(out_file), STDOUT_FILENO);
    dup2(fileno(err_file), STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(exec_pipe[1]);
  (void)drain(exec_pipe[0]);  // EOF: exec happened (or the child exited)
  close(exec_pipe[0]);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    c.max_rss_bytes = std::max(c.max_rss_bytes, vm_hwm_of(pid));
    rusage ru{};
    const pid_t done = wait4(pid, &c.status, WNOHANG, &ru);
    if (done == pid) {
      c.cpu_s = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
      break;
    }
    if (done < 0 && errno != EINTR) break;
    usleep(20000);
  }
  c.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (auto [f, dst] : {std::pair{out_file, &c.out}, std::pair{err_file, &c.err}}) {
    std::rewind(f);
    *dst = drain(fileno(f));
    std::fclose(f);
  }
  return c;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

std::string tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

// Throws a message naming the command, how it ended and its stderr's tail unless it exited 0.
void require_success(const Child& c, const std::vector<std::string>& argv) {
  if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0)
    throw std::runtime_error("`" + joined(argv) + "` failed (" +
                             (WIFSIGNALED(c.status) ? "signal " + std::to_string(WTERMSIG(c.status))
                                                    : "exit " + std::to_string(WEXITSTATUS(c.status))) +
                             "): " + tail(c.err, 400));
}

// One llama-bench run; returns its first record's avg_ts, or throws a message naming the command.
double bench_once(const std::vector<std::string>& argv, long long& peak_rss) {
  const Child c = run_child(argv);
  peak_rss = std::max(peak_rss, c.max_rss_bytes);
  require_success(c, argv);
  try {
    const auto j = nlohmann::json::parse(c.out);
    if (!j.is_array() || j.empty() || !j[0].contains("avg_ts")) throw std::runtime_error("no records");
    return j[0]["avg_ts"].get<double>();
  } catch (const std::exception& e) {
    throw std::runtime_error("`" + joined(argv) + "` printed no llama-bench JSON (" + e.what() + "): " + tail(c.out, 200));
  }
}

}  // namespace

void require_llama_tool(const std::string& dir, const std::string& tool) {
  const std::string bin = dir + "/" + tool;
  if (access(bin.c_str(), X_OK) != 0)
    throw std::invalid_argument("--vs-llama-cpp: " + bin + " is not an executable " + tool +
                                "; build llama.cpp with scripts/reference/build-llama-cpp.sh (it prints the bin "
                                "directory to pass; TARGETS=\"llama-bench llama-completion\" builds both)");
}

LlamaCppRow run_llama_bench(const std::string& dir, const std::string& model, int ctx, int n_decode, int reps,
                            int threads) {
  LlamaCppRow row;
  row.ctx = ctx;
  const std::string bin = dir + "/llama-bench";
  const std::vector<std::string> common = {"-m", model, "-t", std::to_string(threads), "-r", std::to_string(reps),
                                           "-o", "json"};
  std::vector<std::string> pp = {bin, "-p", std::to_string(ctx), "-n", "0"};
  pp.insert(pp.end(), common.begin(), common.end());
  // Decode with the cache already holding ctx tokens (-d): what a reader of a long document sees.
  std::vector<std::string> tg = {bin, "-p", "0", "-n", std::to_string(n_decode), "-d", std::to_string(ctx)};
  tg.insert(tg.end(), common.begin(), common.end());
  row.prefill_cmd = joined(pp);
  row.decode_cmd = joined(tg);
  try {
    row.prefill_tok_s = bench_once(pp, row.peak_rss_bytes);
    row.ttft_s = row.prefill_tok_s > 0 ? ctx / row.prefill_tok_s : 0;
    row.decode_tok_s = bench_once(tg, row.peak_rss_bytes);
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  return row;
}

LlamaCppRow run_llama_completion(const std::string& dir, const std::string& model, const std::string& prompt_file,
                                 int ctx, int n_decode, int reps, int threads) {
  LlamaCppRow row;
  row.ctx = ctx;
  // Room for the prompt as llama.cpp tokenizes it (a BOS, a few tokens either way) and the answer.
  const std::vector<std::string> argv = {dir + "/llama-completion", "-m", model, "-f", prompt_file, "-n",
                                         std::to_string(n_decode), "-c", std::to_string(ctx + n_decode + 64), "-t",
                                         std::to_string(threads), "--ignore-eos", "--temp", "0", "-no-cnv",
                                         "--no-warmup"};
  row.prefill_cmd = row.decode_cmd = joined(argv);
  try {
    double prefill_sum = 0, decode_sum = 0;
    for (int r = 0; r < reps; ++r) {
      const Child c = run_child(argv);
      row.peak_rss_bytes = std::max(row.peak_rss_bytes, c.max_rss_bytes);
      require_success(c, argv);
      const CompletionTimes t = parse_completion_times(c.err);
      if (t.prompt_tokens <= 0 || t.prompt_ms <= 0 || t.runs <= 0 || t.eval_ms <= 0)
        throw std::runtime_error("`" + row.prefill_cmd + "` printed no timings (\"prompt eval time = ... ms / N "
                                 "tokens\" and \"eval time = ... ms / N runs\"): " + tail(c.err, 300));
      row.prompt_tokens = t.prompt_tokens;
      prefill_sum += t.prompt_tokens / (t.prompt_ms / 1000.0);
      decode_sum += t.runs / (t.eval_ms / 1000.0);
    }
    row.prefill_tok_s = prefill_sum / reps;
    row.decode_tok_s = decode_sum / reps;
    row.ttft_s = row.prompt_tokens / row.prefill_tok_s;
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  return row;
}

namespace {

// The prompt's size in llama.cpp's tokens from a run that loaded a cache file: "session file
// matches M / T tokens of prompt" or "... low similarity to prompt (M / T tokens)"; 0 if absent.
int prompt_tokens_from_session_log(const std::string& log) {
  for (const char* key : {"session file matches ", "low similarity to prompt ("}) {
    const size_t at = log.find(key);
    size_t matched = 0, total = 0;
    if (at != std::string::npos &&
        std::sscanf(log.c_str() + at + std::strlen(key), "%zu / %zu", &matched, &total) == 2)
      return static_cast<int>(total);
  }
  return 0;
}

// FNV-1a of a file's bytes: enough to tell one bench document from another.
std::string content_hash(const std::string& text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(fnv1a64(reinterpret_cast<const uint8_t*>(text.data()), text.size())));
  return buf;
}

}  // namespace

LlamaCppRow run_llama_completion_staged(const std::string& dir, const std::string& model,
                                        const std::string& prompt_file, int ctx, int n_decode, int threads,
                                        const std::string& state_dir, int stages,
                                        const std::function<void(const std::string&)>& status) {
  namespace fs = std::filesystem;
  if (stages < 1) throw std::invalid_argument("--llama-cpp-stages: needs at least 1 stage");
  std::ifstream in(prompt_file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read llama-completion's prompt file " + prompt_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::create_directories(state_dir);

  // The plan a rerun must match: another document, model or split would mix two runs' stages.
  const nlohmann::json plan = {{"model", fs::absolute(model).string()}, {"ctx", ctx}, {"n_decode", n_decode},
                               {"threads", threads}, {"stages", stages}, {"document_bytes", text.size()},
                               {"document_fnv1a", content_hash(text)}};
  const fs::path plan_file = fs::path(state_dir) / "plan.json";
  if (fs::exists(plan_file)) {
    nlohmann::json had;
    try {
      had = nlohmann::json::parse(std::ifstream(plan_file));
    } catch (const std::exception& e) {
      throw std::invalid_argument("--llama-cpp-resume: " + plan_file.string() + " is not the JSON this command " +
                                  "writes (" + e.what() + "); remove " + state_dir + " to start over");
    }
    if (had != plan)
      throw std::invalid_argument("--llama-cpp-resume: " + state_dir + " holds stages of another run (" + had.dump() +
                                  "; this one: " + plan.dump() + "); give another directory, or remove it to " +
                                  "start over");
  } else if (!(std::ofstream(plan_file) << plan.dump() << "\n")) {
    throw std::runtime_error("cannot write " + plan_file.string());
  }

  // Finished stages, in order (a line cut short by a kill mid-write is ignored and rerun).
  const fs::path records_file = fs::path(state_dir) / "stages.jsonl";
  std::vector<nlohmann::json> done;
  {
    std::ifstream rf(records_file);
    std::string line;
    while (std::getline(rf, line)) {
      try {
        const auto j = nlohmann::json::parse(line);
        if (j.value("stage", 0) == static_cast<int>(done.size()) + 1) done.push_back(j);
      } catch (const std::exception&) {
        break;
      }
    }
  }
  auto session = [&](int k) { return (fs::path(state_dir) / ("session-" + std::to_string(k) + ".bin")).string(); };

  LlamaCppRow row;
  row.ctx = ctx;
  row.stages = stages;
  const std::string n_ctx = std::to_string(ctx + n_decode + 64);  // the same in every stage: one cache layout
  try {
    for (int k = static_cast<int>(done.size()) + 1; k <= stages; ++k) {
      const bool last = k == stages;
      // Stage k's text: the prompt up to the whitespace at or before k/stages of it.
      size_t cut = text.size();
      if (!last) {
        cut = text.size() * k / stages;
        const size_t ws = text.find_last_of(" \n", cut);
        if (ws != std::string::npos && ws > 0) cut = ws;
      }
      const std::string stage_file = (fs::path(state_dir) / ("stage-" + std::to_string(k) + ".txt")).string();
      if (!(std::ofstream(stage_file, std::ios::binary) << text.substr(0, cut)))
        throw std::runtime_error("cannot write " + stage_file);
      // The cache file stage k reads: stage k-1's, copied so that a stage killed while llama.cpp
      // writes its own leaves the previous one whole. The last stage only reads (-ro).
      std::string cache;
      if (k > 1 && !fs::exists(session(k - 1)))
        throw std::runtime_error("stage " + std::to_string(k - 1) + "'s cache file " + session(k - 1) +
                                 " is gone; remove " + state_dir + " to start over");
      if (last) {
        cache = k > 1 ? session(k - 1) : session(k);
      } else {
        cache = session(k);
        fs::remove(cache);  // what a killed run of this stage left
        if (k > 1) fs::copy_file(session(k - 1), cache);
      }
      std::vector<std::string> argv = {dir + "/llama-completion", "-m", model, "-f", stage_file, "-n",
                                       std::to_string(last ? n_decode : 1), "-c", n_ctx, "-t",
                                       std::to_string(threads), "--ignore-eos", "--temp", "0", "-no-cnv",
                                       "--no-warmup", "--prompt-cache", cache};
      // Intermediate stages save the cache at their end (--prompt-cache-all): llama.cpp saves
      // after the prompt only when it did not start from a cache file that matched it.
      argv.push_back(last ? "--prompt-cache-ro" : "--prompt-cache-all");
      status("llama.cpp ctx " + std::to_string(ctx) + ": stage " + std::to_string(k) + "/" + std::to_string(stages));
      const Child c = run_child(argv);
      require_success(c, argv);
      const CompletionTimes t = parse_completion_times(c.err);
      if (t.prompt_tokens <= 0 || t.prompt_ms <= 0 || (last && (t.runs <= 0 || t.eval_ms <= 0)))
        throw std::runtime_error("`" + joined(argv) + "` printed no timings (\"prompt eval time = ... ms / N tokens\" "
                                 "and \"eval time = ... ms / N runs\"): " + tail(c.err, 300));
      const int total = k == 1 ? t.prompt_tokens : prompt_tokens_from_session_log(c.err);
      if (k > 1 && total <= 0)
        throw std::runtime_error("`" + joined(argv) + "` did not say it loaded stage " + std::to_string(k - 1) +
                                 "'s cache (\"session file matches M / T tokens\"): " + tail(c.err, 300));
      const nlohmann::json rec = {{"stage", k}, {"stages", stages}, {"chars", cut},
                                  {"prompt_tokens", total}, {"evaluated_tokens", t.prompt_tokens},
                                  {"prompt_ms", t.prompt_ms}, {"eval_ms", t.eval_ms}, {"runs", t.runs},
                                  {"peak_rss", c.max_rss_bytes}, {"wall_s", c.wall_s}, {"cpu_s", c.cpu_s},
                                  {"cmd", joined(argv)}};
      std::ofstream rf(records_file, std::ios::app);
      if (!(rf << rec.dump() << "\n")) throw std::runtime_error("cannot append to " + records_file.string());
      rf.close();
      done.push_back(rec);
      if (k > 1 && !last) fs::remove(session(k - 1));  // stage k's own file now carries the prefix
      if (last) fs::remove(cache);
    }
    double prompt_ms = 0, cpu_s = 0, wall_s = 0;
    long long evaluated = 0;
    for (const auto& r : done) {
      cpu_s += r.value("cpu_s", 0.0);
      wall_s += r.value("wall_s", 0.0);
      prompt_ms += r["prompt_ms"].get<double>();
      evaluated += r["evaluated_tokens"].get<long long>();
      row.peak_rss_bytes = std::max(row.peak_rss_bytes, r["peak_rss"].get<long long>());
    }
    const auto& final_stage = done.back();
    row.prompt_tokens = final_stage["prompt_tokens"].get<int>();
    row.prefill_tok_s = evaluated / (prompt_ms / 1000.0);
    row.ttft_s = prompt_ms / 1000.0;
    row.decode_tok_s = final_stage["runs"].get<double>() / (final_stage["eval_ms"].get<double>() / 1000.0);
    row.prefill_cmd = row.decode_cmd = final_stage["cmd"].get<std::string>();
    // Hours of stages share the machine with whatever else ran: the share of the threads'
    // time llama.cpp got says whether its rates are its own (1.0) or a contended machine's.
    row.cpu_share = wall_s > 0 ? cpu_s / (wall_s * threads) : 0;
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    row.error = e.what();
  }
  return row;
}

CompletionTimes parse_completion_times(const std::string& log) {
  CompletionTimes t;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    // "... prompt eval time =   7860.17 ms /   898 tokens (...)"; "...        eval time = 320.88 ms / 7 runs (...)"
    const size_t prompt = line.find("prompt eval time =");
    const size_t eval = line.find(" eval time =");
    if (prompt != std::string::npos) {
      std::sscanf(line.c_str() + prompt, "prompt eval time = %lf ms / %d tokens", &t.prompt_ms, &t.prompt_tokens);
    } else if (eval != std::string::npos) {
      std::sscanf(line.c_str() + eval, " eval time = %lf ms / %d runs", &t.eval_ms, &t.runs);
    }
  }
  return t;
}

}  // namespace infinipot::cli
