// Timing of the kernel benchmarks (`bench --gemm`, `bench --attention`): a warm-up run, then
// `reps` timed runs; their median.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace infinipot::cli {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Seconds of each of `reps` runs of f, after one untimed run (kernel compilation, first
// touch of buffers).
template <typename F>
std::vector<double> time_runs(int reps, F&& f) {
  using Clock = std::chrono::steady_clock;
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return t;
}

}  // namespace infinipot::cli
