// A compiled kernel with typed arguments: k.args(buf, n, eps).launch(queue, {global}, {local}).
// Argument types map to OpenCL as: Buffer/cl_mem -> cl_mem, int/uint/float/ulong by value,
// LocalBytes -> __local scratch. Wrong argument counts are caught by the driver and
// reported with the kernel's name.
#pragma once
#include <CL/cl.h>
#include <array>
#include <string>
#include "runtime/cl_error.h"
#include "runtime/cl_handles.h"
#include "runtime/device_memory.h"
#include "runtime/fault_injection.h"
#include "runtime/profiler.h"
#include "runtime/trace.h"

namespace infinipot::cl {

struct LocalBytes {
  size_t bytes;
};

struct NDRange {
  size_t dims = 1;
  std::array<size_t, 3> size{1, 1, 1};
  NDRange() = default;
  NDRange(size_t x) : dims(1), size{x, 1, 1} {}
  NDRange(size_t x, size_t y) : dims(2), size{x, y, 1} {}
  NDRange(size_t x, size_t y, size_t z) : dims(3), size{x, y, z} {}
};

inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

class Kernel {
 public:
  Kernel() = default;
  // name: owned by the context's kernel cache, which outlives every Kernel it hands out (a
  // launch copies no string: decode runs ~150 launches a token).
  Kernel(KernelHandle k, const std::string& name) : k_(std::move(k)), name_(&name) {}
  const std::string& name() const { return *name_; }
  cl_kernel get() const { return k_.get(); }

  template <typename... Args>
  Kernel& args(const Args&... a) {
    cl_uint i = 0;
    (set(i++, a), ...);
    return *this;
  }
  // Arguments from index `first` on: a variant's own arguments after the ones all variants take.
  template <typename... Args>
  Kernel& args_at(cl_uint first, const Args&... a) {
    cl_uint i = first;
    (set(i++, a), ...);
    return *this;
  }
  // The largest work-group this kernel runs with on `dev` (CL_KERNEL_WORK_GROUP_SIZE).
  size_t work_group_limit(cl_device_id dev) const {
    size_t n = 0;
    const cl_int status = clGetKernelWorkGroupInfo(k_.get(), dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof(n), &n, nullptr);
    if (status != CL_SUCCESS) check(status, "clGetKernelWorkGroupInfo(" + name() + ")");
    return n;
  }
  // local: an empty NDRange lets the driver choose. Global sizes are rounded up to the local size.
  void launch(cl_command_queue q, NDRange global, NDRange local = NDRange()) const {
    const bool has_local = local.dims == global.dims && local.size[0] > 0 && local.dims > 0 && local_set_(local);
    for (size_t d = 0; d < global.dims; ++d)
      if (has_local) global.size[d] = round_up(global.size[d], local.size[d]);
    for (size_t d = 0; d < global.dims; ++d)
      if (global.size[d] == 0) return;  // nothing to do
    const bool profile = profiling_enabled();
    const double t0 = profile ? profile_now() : 0;
    cl_event ev = nullptr;
    const bool traced = trace::kernels_enabled();
    cl_int status = injected_launch_fault();
    if (status == CL_SUCCESS)
      status = clEnqueueNDRangeKernel(q, k_.get(), static_cast<cl_uint>(global.dims), nullptr, global.size.data(),
                                      has_local ? local.size.data() : nullptr, 0, nullptr, traced ? &ev : nullptr);
    if (status != CL_SUCCESS) check(status, "clEnqueueNDRangeKernel(" + name() + ")");  // the message only on failure
    if (ev) {
      trace::kernel_event(name(), ev);
      clReleaseEvent(ev);
    }
    if (profile) profile_record(q, name(), t0);
  }

 private:
  static bool local_set_(const NDRange& l) { return l.size[0] != 0; }
  void set_raw(cl_uint i, size_t size, const void* v) {
    const cl_int status = clSetKernelArg(k_.get(), i, size, v);
    if (status != CL_SUCCESS) check(status, "clSetKernelArg(" + name() + ", #" + std::to_string(i) + ")");
  }
  void set(cl_uint i, const Buffer& b) {
    cl_mem m = b.get();
    set_raw(i, sizeof(cl_mem), &m);
  }
  void set(cl_uint i, cl_mem m) { set_raw(i, sizeof(cl_mem), &m); }
  void set(cl_uint i, int v) { set_raw(i, sizeof(cl_int), &v); }
  void set(cl_uint i, unsigned v) { set_raw(i, sizeof(cl_uint), &v); }
  void set(cl_uint i, float v) { set_raw(i, sizeof(cl_float), &v); }
  void set(cl_uint i, cl_ulong v) { set_raw(i, sizeof(cl_ulong), &v); }
  void set(cl_uint i, LocalBytes l) { set_raw(i, l.bytes, nullptr); }

  KernelHandle k_;
  const std::string* name_ = &no_name_;
  static inline const std::string no_name_;
};

}  // namespace infinipot::cl
