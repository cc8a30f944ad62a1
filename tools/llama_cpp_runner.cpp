#include "tools/llama_cpp_runner.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace infinipot::cli {
namespace {

struct Child {
  int status = -1;
  long long max_rss_bytes = 0;
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
  for (;;) {
    c.max_rss_bytes = std::max(c.max_rss_bytes, vm_hwm_of(pid));
    const pid_t done = waitpid(pid, &c.status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) break;
    usleep(20000);
  }
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

// One llama-bench run; returns its first record's avg_ts, or throws a message naming the command.
double bench_once(const std::vector<std::string>& argv, long long& peak_rss) {
  const Child c = run_child(argv);
  peak_rss = std::max(peak_rss, c.max_rss_bytes);
  if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0)
    throw std::runtime_error("`" + joined(argv) + "` failed (" +
                             (WIFSIGNALED(c.status) ? "signal " + std::to_string(WTERMSIG(c.status))
                                                    : "exit " + std::to_string(WEXITSTATUS(c.status))) +
                             "): " + tail(c.err, 400));
  try {
    const auto j = nlohmann::json::parse(c.out);
    if (!j.is_array() || j.empty() || !j[0].contains("avg_ts")) throw std::runtime_error("no records");
    return j[0]["avg_ts"].get<double>();
  } catch (const std::exception& e) {
    throw std::runtime_error("`" + joined(argv) + "` printed no llama-bench JSON (" + e.what() + "): " + tail(c.out, 200));
  }
}

}  // namespace

void require_llama_bench(const std::string& dir) {
  const std::string bin = dir + "/llama-bench";
  if (access(bin.c_str(), X_OK) != 0)
    throw std::invalid_argument("--vs-llama-cpp: " + bin + " is not an executable llama-bench; build llama.cpp with "
                                "scripts/reference/build-llama-cpp.sh (it prints the bin directory to pass)");
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

long long host_peak_rss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atoll(line.c_str() + 6) * 1024;
  return 0;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace infinipot::cli
