// The OpenCL context the runtime works in: one device, one in-order queue, the
// allocator with its budget, the program cache and the device's tuning.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include "runtime/cl_handles.h"
#include "runtime/device.h"
#include "runtime/device_memory.h"
#include "runtime/kernel.h"
#include "runtime/tuning.h"

namespace infinipot::cl {

struct ContextOptions {
  std::string device;          // --device spec ("" = default choice)
  uint64_t device_mem = 0;     // --device-mem; 0 = the device's global memory
  bool use_disk_cache = true;  // compiled programs under $XDG_CACHE_HOME/infinipot/kernels
  nlohmann::json tuning_overrides = nlohmann::json::object();  // applied over platforms/ (infinipot tune)
  // Which native dot form (DeviceInfo::native_dot) this context uses: -1 the device's own; 0
  // none; 2 the AVX2 form, where the device has any (every CPU with AVX-512 VNNI has AVX2), so
  // that form is tested on a VNNI CPU too.
  int native_dot_form = -1;
};

class Context {
 public:
  explicit Context(const ContextOptions& opts);
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  // Drain queued work first: a PoCL worker still compiling a kernel when exit() runs static
  // destructors crashes the process (seen after a kernel build error aborted a run).
  ~Context() { if (queue_) clFinish(queue_.get()); }

  const DeviceInfo& device() const { return device_; }
  // Build option for kernels whose float quotients must round as the host's (quantization
  // scales): OpenCL's default division may be 2.5 ulp off (NVIDIA's is), PoCL's is exact.
  std::string exact_divide_option() const {
    return device_.exact_divide ? " -cl-fp32-correctly-rounded-divide-sqrt" : "";
  }
  const Tuning& tuning() const { return tuning_; }
  cl_context context() const { return ctx_.get(); }
  cl_command_queue queue() const { return queue_.get(); }
  DeviceMemory& memory() { return *memory_; }

  // Builds (or loads from the disk cache) cl_kernels/<file> with the given -D options and
  // returns the named kernel. Kernels are cached per (file, options, name).
  // (string views: the literal names of the ops cost no string a launch)
  Kernel kernel(std::string_view file, std::string_view name, std::string_view options = {});

  // A launcher's own key for a kernel: its call site (a string literal naming the launcher and
  // variant) and the values its -D options depend on, beyond the context's device and tuning.
  struct LaunchKey {
    const char* site;
    std::array<int64_t, 5> values{};
    bool operator<(const LaunchKey& o) const {  // std::less: a total order on unrelated pointers
      return site != o.site ? std::less<const char*>()(site, o.site) : values < o.values;
    }
  };
  // The kernel for `key`, looked up without building its options: `options()` (returning the
  // -D text) runs only the first time a key is asked for. For the launches of every decode
  // token (~150), which then allocate nothing on the host.
  template <typename Options>
  Kernel kernel(const LaunchKey& key, std::string_view file, std::string_view name, Options&& options) {
    auto it = memo_.find(key);
    if (it == memo_.end()) {
      const std::string text = options();
      Kernel k = kernel(file, name, text);
      it = memo_.emplace(key, Memo{k.get(), &k.name()}).first;
    }
    clRetainKernel(it->second.kernel);  // each Kernel shares the cached cl_kernel
    return Kernel(KernelHandle(it->second.kernel), *it->second.name);
  }

  void finish() const;
  void write(const Buffer& dst, const void* src, size_t bytes, size_t offset = 0) const;
  void read(const Buffer& src, void* dst, size_t bytes, size_t offset = 0) const;
  // A write that returns at once: src must stay as it is until the returned event completes
  // (wait(); any later blocking read or finish() of the in-order queue implies it).
  EventHandle write_async(const Buffer& dst, const void* src, size_t bytes, size_t offset = 0) const;
  // bytes [offset, offset + n) of dst mapped for writing (CL_MAP_WRITE_INVALIDATE_REGION: the
  // old contents are not read back), so the host fills the buffer in place; unmap() hands them
  // back to the device (the destructor does if unmap() was not called). A write for
  // INFINIPOT_FAULT_WRITE_AT.
  class MappedWrite {
   public:
    MappedWrite(const MappedWrite&) = delete;
    MappedWrite& operator=(const MappedWrite&) = delete;
    MappedWrite(MappedWrite&& o) noexcept;
    ~MappedWrite();
    uint8_t* data() const { return data_; }
    void unmap();

   private:
    friend class Context;
    MappedWrite(cl_command_queue q, cl_mem mem, uint8_t* data) : queue_(q), mem_(mem), data_(data) {}
    cl_command_queue queue_ = nullptr;
    cl_mem mem_ = nullptr;
    uint8_t* data_ = nullptr;
  };
  MappedWrite map_write(const Buffer& dst, size_t bytes, size_t offset = 0) const;
  static void wait(const EventHandle& done);  // no-op for an empty handle
  void copy(const Buffer& src, const Buffer& dst, size_t bytes, size_t src_off = 0, size_t dst_off = 0) const;
  // rows rows of row_bytes each, src's every src_pitch bytes from src_off, packed into dst
  // from offset 0 (one clEnqueueCopyBufferRect; src and dst must be different buffers).
  void copy_rows(const Buffer& src, const Buffer& dst, size_t row_bytes, size_t rows, size_t src_pitch,
                 size_t src_off = 0) const;
  void fill_zero(const Buffer& dst, size_t bytes, size_t offset = 0) const;

 private:
  cl_program program(const std::string& file, const std::string& options);

  DeviceInfo device_;
  Tuning tuning_;
  ContextHandle ctx_;
  QueueHandle queue_;
  std::unique_ptr<DeviceMemory> memory_;
  bool use_disk_cache_;
  std::map<std::string, ProgramHandle> programs_;   // key: file + '\n' + options
  struct CachedKernel {
    KernelHandle kernel;
    std::string name;  // what the Kernels handed out name themselves by
  };
  std::map<std::string, CachedKernel> kernels_;  // key: program key + '\n' + name
  std::string kernel_key_;                        // kernel()'s lookup key, kept between calls
  struct Memo {
    cl_kernel kernel;          // owned by kernels_, which never drops one
    const std::string* name;   // kernels_' copy
  };
  std::map<LaunchKey, Memo> memo_;
};

}  // namespace infinipot::cl
