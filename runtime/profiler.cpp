#include "runtime/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace infinipot::cl {
namespace {
struct Entry {
  double seconds = 0;
  long count = 0;
};
std::map<std::string, Entry>& table() {
  static std::map<std::string, Entry> t;
  return t;
}
}  // namespace

bool profiling_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("INFINIPOT_PROFILE");
    return v && *v && *v != '0';
  }();
  return on;
}

double profile_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void profile_record(cl_command_queue q, const std::string& name, double t_start) {
  clFinish(q);
  auto& e = table()[name];
  e.seconds += profile_now() - t_start;
  e.count += 1;
}

void profile_report() {
  if (!profiling_enabled() || table().empty()) return;
  std::vector<std::pair<std::string, Entry>> rows(table().begin(), table().end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (auto& r : rows) total += r.second.seconds;
  std::fprintf(stderr, "\n%-28s %10s %8s %10s %6s\n", "kernel", "total ms", "calls", "us/call", "share");
  for (auto& [name, e] : rows)
    std::fprintf(stderr, "%-28s %10.1f %8ld %10.1f %5.1f%%\n", name.c_str(), e.seconds * 1e3, e.count,
                 e.seconds * 1e6 / e.count, 100 * e.seconds / total);
}

}  // namespace infinipot::cl
