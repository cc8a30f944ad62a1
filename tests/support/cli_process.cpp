#include "tests/support/cli_process.h"

#include "model_loader/setting_names.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <stdexcept>

extern char** environ;

namespace infinipot::test {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> child_environment(const ProcOptions& opts) {
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [name, value] : opts.env) {
    if (value) vars[name] = *value;
    else vars.erase(name);
  }
  std::vector<std::string> out;
  for (const auto& [name, value] : vars) out.push_back(name + "=" + value);
  return out;
}

// Reads what is available on `fd` into `sink`; false at end of file or on error.
bool drain(int fd, std::string& sink) {
  char buf[65536];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) {
    sink.append(buf, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && (errno == EINTR || errno == EAGAIN);
}

// The ELF machine of a file (0 if it is not an ELF file).
unsigned elf_machine(const std::string& path) {
  unsigned char h[20] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, h, sizeof h);
  ::close(fd);
  if (n < 20 || std::memcmp(h, "\x7f" "ELF", 4) != 0) return 0;
  return h[18] | (h[19] << 8);
}

std::string tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

// A sanitizer report in the child (the binary may be built with ASan/UBSan, see
// scripts/test-sanitized.sh), or "" if none.
std::string sanitizer_report(const ProcResult& r) {
  for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: "})
    if (r.err.find(marker) != std::string::npos) return marker;
  return "";
}

}  // namespace

std::string ProcResult::describe() const {
  std::string status = timed_out ? "timed out (killed)"
                       : signal  ? "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")"
                                 : "exit " + std::to_string(exit_code);
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f s", seconds);
  return "`" + command + "` -> " + status + " in " + secs + "\n--- stderr:\n" + tail(err, 4000) +
         "\n--- stdout:\n" + tail(out, 2000);
}

// `name` as execve needs it: itself when it holds a '/', else the first executable of that
// name in $PATH (run_process does not search PATH; the emulator is usually given by name).
static std::string in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (size_t b = 0; b <= dirs.size();) {
    size_t e = dirs.find(':', b);
    if (e == std::string::npos) e = dirs.size();
    const std::string cand = (e > b ? dirs.substr(b, e - b) : std::string(".")) + "/" + name;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    b = e + 1;
  }
  throw std::runtime_error("INFINIPOT_TEST_EMULATOR: '" + name + "' is not an executable in PATH");
}

std::vector<std::string> with_emulator(const std::vector<std::string>& argv) {
  const char* emu = std::getenv("INFINIPOT_TEST_EMULATOR");
  if (emu == nullptr || *emu == '\0' || argv.empty()) return argv;
  const unsigned m = elf_machine(argv[0]);
  if (m == 0 || m != elf_machine("/proc/self/exe")) return argv;
  std::vector<std::string> out;
  std::string word;
  for (const char* c = emu;; ++c) {
    if (*c == ' ' || *c == '\0') {
      if (!word.empty()) out.push_back(out.empty() ? in_path(word) : word);
      word.clear();
      if (*c == '\0') break;
    } else {
      word += *c;
    }
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

ProcResult run_process(const std::vector<std::string>& given_argv, const ProcOptions& opts) {
  if (given_argv.empty()) throw std::invalid_argument("run_process: empty argv");
  const std::vector<std::string> argv = with_emulator(given_argv);
  ProcResult r;
  for (const auto& a : argv) r.command += (r.command.empty() ? "" : " ") + a;

  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  const std::vector<std::string> env = child_environment(opts);
  std::vector<char*> envp, args;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // its own process group, so a timeout kills whatever it started too
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execve(args[0], args.data(), envp.data());
    const char msg[] = "run_process: execve failed\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also here: whichever of parent and child runs first
  close(out_pipe[1]);
  close(err_pipe[1]);

  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opts.timeout_s));
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{out_open ? out_pipe[0] : -1, POLLIN, 0}, {err_open ? err_pipe[0] : -1, POLLIN, 0}};
    const int n = poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) out_open = drain(out_pipe[0], r.out);
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) err_open = drain(err_pipe[0], r.err);
  }
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  // The pipes are closed: if it is still running it was killed above, or it closed its
  // output early and keeps running; either way the deadline bounds the wait.
  while (true) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (Clock::now() > deadline && !r.timed_out) {
      r.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
    }
    usleep(2000);
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  return r;
}

::testing::AssertionResult fails_cleanly(const ProcResult& r, std::initializer_list<std::string_view> needles,
                                         std::optional<int> exit_code, double max_seconds) {
  if (r.timed_out || r.signal != 0) return ::testing::AssertionFailure() << "it did not exit by itself: " << r.describe();
  if (auto report = sanitizer_report(r); !report.empty())
    return ::testing::AssertionFailure() << "sanitizer report (" << report << "): " << r.describe();
  if (r.exit_code == 0) return ::testing::AssertionFailure() << "it succeeded but should have failed: " << r.describe();
  if (exit_code && r.exit_code != *exit_code)
    return ::testing::AssertionFailure() << "expected exit " << *exit_code << ": " << r.describe();
  if (r.seconds > max_seconds)
    return ::testing::AssertionFailure() << "took longer than " << max_seconds << " s: " << r.describe();
  for (auto needle : needles)
    if (r.err.find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << "stderr lacks \"" << needle << "\": " << r.describe();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult succeeded(const ProcResult& r) {
  if (r.timed_out || r.signal != 0 || r.exit_code != 0) return ::testing::AssertionFailure() << r.describe();
  if (auto report = sanitizer_report(r); !report.empty())
    return ::testing::AssertionFailure() << "sanitizer report (" << report << "): " << r.describe();
  return ::testing::AssertionSuccess();
}

std::string device_mem_in(const std::string& text) {
  static const std::regex re("--device-mem ([0-9]+(\\.[0-9]+)?[KMG])");
  std::smatch m;
  return std::regex_search(text, m, re) ? m[1].str() : "";
}

std::string cli_words(const std::string& text) {
  SettingNames names;
  for (const std::string& id : setting_ids()) {
    std::string flag = "--" + id;
    std::replace(flag.begin(), flag.end(), '_', '-');
    names[id] = flag;
  }
  names["n_predict"] = "-n";
  return worded(text, names);
}

}  // namespace infinipot::test
