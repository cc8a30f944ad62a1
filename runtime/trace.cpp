#include "runtime/trace.h"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace infinipot::trace {
namespace {

struct Recorder {
  bool on = false;
  bool kernels = false;
  std::chrono::steady_clock::time_point t0;
  nlohmann::json events = nlohmann::json::array();
  // Device clock (us) -> trace time (us): host time when a kernel was seen finished less its
  // device end time. Seeing it can only come late (the process may be descheduled), so the
  // smallest offset over all kernels is the truest; kernel events hold device time until
  // stop() adds it.
  bool calibrated = false;
  double device_offset_us = 0;
  std::vector<size_t> kernel_events;  // indices into events
  std::mutex mu;
};

Recorder& rec() {
  static Recorder r;
  return r;
}

nlohmann::json span_event(const std::string& cat, const std::string& name, double start_us, double dur_us, int tid) {
  return {{"ph", "X"}, {"pid", 1}, {"tid", tid}, {"cat", cat}, {"name", name}, {"ts", start_us}, {"dur", dur_us < 0 ? 0 : dur_us}};
}

}  // namespace

void start(bool kernels) {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  r.on = true;
  r.kernels = kernels;
  r.t0 = std::chrono::steady_clock::now();
  r.events = nlohmann::json::array();
  r.calibrated = false;
  r.kernel_events.clear();
  r.events.push_back({{"ph", "M"}, {"pid", 1}, {"name", "process_name"}, {"args", {{"name", "infinipot"}}}});
  r.events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 1}, {"name", "thread_name"}, {"args", {{"name", "host"}}}});
  r.events.push_back({{"ph", "M"}, {"pid", 1}, {"tid", 2}, {"name", "thread_name"}, {"args", {{"name", "device kernels"}}}});
}

nlohmann::json stop() {
  Recorder& r = rec();
  std::lock_guard<std::mutex> lock(r.mu);
  r.on = false;
  r.kernels = false;
  for (const size_t i : r.kernel_events) r.events[i]["ts"] = r.events[i]["ts"].get<double>() + r.device_offset_us;
  r.kernel_events.clear();
  nlohmann::json out = {{"traceEvents", std::move(r.events)}, {"displayTimeUnit", "ms"}};
  r.events = nlohmann::json::array();
  return out;
}

bool enabled() { return rec().on; }
bool kernels_enabled() { return rec().on && rec().kernels; }

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - rec().t0).count();
}

void counter(const std::string& name, const std::vector<std::pair<std::string, double>>& values) {
  Recorder& r = rec();
  if (!r.on) return;
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [k, v] : values) args[k] = v;
  const double t = now_us();
  std::lock_guard<std::mutex> lock(r.mu);
  r.events.push_back({{"ph", "C"}, {"pid", 1}, {"name", name}, {"ts", t}, {"args", std::move(args)}});
}

void complete(const std::string& cat, const std::string& name, double start_us, double dur_us, int tid,
              nlohmann::json args) {
  Recorder& r = rec();
  if (!r.on) return;
  nlohmann::json e = span_event(cat, name, start_us, dur_us, tid);
  if (!args.is_null()) e["args"] = std::move(args);
  std::lock_guard<std::mutex> lock(r.mu);
  r.events.push_back(std::move(e));
}

Span::Span(const char* cat, std::string name, nlohmann::json args)
    : on_(enabled()), cat_(cat), name_(std::move(name)), args_(std::move(args)) {
  if (on_) t0_ = now_us();
}

Span::~Span() {
  if (on_ && enabled()) complete(cat_, name_, t0_, now_us() - t0_, 1, std::move(args_));
}

void sync(cl_command_queue q) {
  if (enabled()) clFinish(q);
}

void kernel_event(const std::string& name, cl_event ev) {
  Recorder& r = rec();
  if (!kernels_enabled() || !ev) return;
  if (clWaitForEvents(1, &ev) != CL_SUCCESS) return;
  const double host_end = now_us();
  cl_ulong start_ns = 0, end_ns = 0;
  if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof start_ns, &start_ns, nullptr) != CL_SUCCESS ||
      clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof end_ns, &end_ns, nullptr) != CL_SUCCESS)
    return;
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.on) return;
  const double offset = host_end - end_ns / 1e3;
  r.device_offset_us = r.calibrated ? std::min(r.device_offset_us, offset) : offset;
  r.calibrated = true;
  r.kernel_events.push_back(r.events.size());
  r.events.push_back(span_event("kernel", name, start_ns / 1e3, (double(end_ns) - double(start_ns)) / 1e3, 2));
}

}  // namespace infinipot::trace
