// A Chrome Trace Event recorder (opens in Perfetto and chrome://tracing), on only while
// `infinipot profile` records: spans for the run's phases (ph "X"), device-memory counters per
// category at every allocation and release (ph "C"), and, with kernels, one span per OpenCL
// kernel from its profiling event. Off (the default), every call is one branch.
// Recording synchronizes the device at span boundaries that need it (see sync()), so a
// profiled run is slower than a plain one: a tool for seeing where time and bytes go, not for
// reporting speed (`infinipot bench` does that).
#pragma once
#include <CL/cl.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

namespace infinipot::trace {

// Starts recording (time 0 is now). kernels: also a span per kernel launch (the queue of a
// context created afterwards has profiling on; each launch waits for its kernel).
void start(bool kernels);
// Stops recording and returns {"traceEvents": [...], "displayTimeUnit": "ms"}.
nlohmann::json stop();
bool enabled();
bool kernels_enabled();
double now_us();  // microseconds since start()

// A counter sample (one track per value in Perfetto): name, (series, value) pairs.
void counter(const std::string& name, const std::vector<std::pair<std::string, double>>& values);

// One complete span: [start_us, start_us + dur_us] on the host thread's track (tid 1) or the
// device's (tid 2, kernels).
void complete(const std::string& cat, const std::string& name, double start_us, double dur_us, int tid = 1,
              nlohmann::json args = nullptr);

// RAII span on the host track. args are attached when it ends (e.g. tokens, cycle number).
class Span {
 public:
  Span(const char* cat, std::string name, nlohmann::json args = nullptr);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  nlohmann::json& args() { return args_; }

 private:
  bool on_;
  const char* cat_;
  std::string name_;
  double t0_ = 0;
  nlohmann::json args_;
};

// Waits for the queue while recording (no-op otherwise): spans of device work end when the
// work does, not when it was enqueued.
void sync(cl_command_queue q);

// Records a finished kernel's profiling event as a device span (kernels_enabled()).
void kernel_event(const std::string& name, cl_event ev);

}  // namespace infinipot::trace
