// Runs a program as a subprocess (fork/exec) with a hard timeout and captures what it did:
// exit status or signal, stdout, stderr, wall time. The CLI tests drive the real `infinipot`
// binary through it, so a crash, a hang or a wrong exit code fails the test, not CI.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infinipot::test {

struct ProcResult {
  int exit_code = -1;      // valid when !signaled && !timed_out
  int signal = 0;          // the signal that ended it, 0 if it exited
  bool timed_out = false;  // killed (SIGKILL to its process group) after the timeout
  double seconds = 0;      // wall time
  std::string out, err;    // everything it wrote to stdout / stderr
  std::string command;     // argv joined, for failure messages

  std::string describe() const;  // "`cmd` -> exit 1 in 0.2 s\nstderr: ..."
};

struct ProcOptions {
  // Environment changes: a value sets the variable, std::nullopt removes it. The rest of
  // the test's environment is inherited.
  std::map<std::string, std::optional<std::string>> env;
  double timeout_s = 120;
};

// argv, behind the emulator in INFINIPOT_TEST_EMULATOR ("qemu-aarch64 -L ROOT") when argv[0]
// is an executable built for this test's own architecture: the cross-built suite runs under
// qemu-user without binfmt (scripts/test-aarch64.sh), so its children need it spelled out.
std::vector<std::string> with_emulator(const std::vector<std::string>& argv);

// Runs argv[0] (a path, not searched in PATH; behind the emulator, see with_emulator) with
// stdin from /dev/null.
ProcResult run_process(const std::vector<std::string>& argv, const ProcOptions& opts = {});

// A run that failed the way a user error should: it exited by itself (no signal, no
// timeout) with a non-zero status (`exit_code`, when given), within `max_seconds`, and its
// stderr contains every needle (case-sensitive), and no sanitizer report.
::testing::AssertionResult fails_cleanly(const ProcResult& r, std::initializer_list<std::string_view> needles,
                                         std::optional<int> exit_code = std::nullopt, double max_seconds = 60);

// A run that exited 0 by itself, with no sanitizer report.
::testing::AssertionResult succeeded(const ProcResult& r);

// The first "--device-mem NNN[KMG]" value in `text`, or "" if none.
std::string device_mem_in(const std::string& text);

#ifdef INFINIPOT_BIN_PATH
// The infinipot binary of this build (tests/CMakeLists.txt compiles its path in).
inline ProcResult run_infinipot(std::vector<std::string> args, const ProcOptions& opts = {}) {
  args.insert(args.begin(), INFINIPOT_BIN_PATH);
  return run_process(args, opts);
}

// The build id `infinipot --version` prints ("infinipot 0.1.0 (build ID)"), which its records
// and benchmark rows carry; "" when the output has no such part.
inline std::string infinipot_build_id() {
  const ProcResult r = run_infinipot({"--version"});
  const size_t at = r.out.find("(build ");
  const size_t end = at == std::string::npos ? at : r.out.find(')', at);
  return end == std::string::npos ? "" : r.out.substr(at + 7, end - at - 7);
}
#endif

// A text from a lower layer as the CLI prints it: setting ids as flags ({nuc_ratio} ->
// --nuc-ratio, {n_predict} -> -n), as tools/cli_common.cpp words them.
std::string cli_words(const std::string& text);

}  // namespace infinipot::test
