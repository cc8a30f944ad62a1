// Move-only RAII owners for OpenCL objects; destructors release and never throw.
#pragma once
#include <CL/cl.h>
#include <utility>

namespace infinipot::cl {

template <typename T, cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  ~Handle() { reset(); }
  void reset() {
    if (h_) Release(h_);
    h_ = nullptr;
  }
  T get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T h_ = nullptr;
};

using ContextHandle = Handle<cl_context, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clReleaseCommandQueue>;
using ProgramHandle = Handle<cl_program, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clReleaseKernel>;
using MemHandle = Handle<cl_mem, clReleaseMemObject>;
using EventHandle = Handle<cl_event, clReleaseEvent>;

}  // namespace infinipot::cl
