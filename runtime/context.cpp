#include "runtime/context.h"
#include "runtime/fault_injection.h"
#include "runtime/trace.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "runtime/cl_error.h"
#include "runtime/embedded.h"

namespace infinipot::cl {
namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A cached program binary on disk: "IPKB" | u64 size | u64 FNV-1a of the bytes | the bytes.
constexpr char kCacheMagic[4] = {'I', 'P', 'K', 'B'};

uint64_t fnv1a_bytes(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

std::vector<unsigned char> wrap_cached_binary(const std::vector<unsigned char>& bin) {
  std::vector<unsigned char> out(kCacheMagic, kCacheMagic + 4);
  const uint64_t n = bin.size(), h = fnv1a_bytes(bin.data(), bin.size());
  out.insert(out.end(), reinterpret_cast<const unsigned char*>(&n), reinterpret_cast<const unsigned char*>(&n) + 8);
  out.insert(out.end(), reinterpret_cast<const unsigned char*>(&h), reinterpret_cast<const unsigned char*>(&h) + 8);
  out.insert(out.end(), bin.begin(), bin.end());
  return out;
}

// The binary inside a cache file, or empty when the file is missing, truncated or altered.
std::vector<unsigned char> unwrap_cached_binary(const std::vector<unsigned char>& file) {
  if (file.size() < 20 || std::memcmp(file.data(), kCacheMagic, 4) != 0) return {};
  uint64_t n = 0, h = 0;
  std::memcpy(&n, file.data() + 4, 8);
  std::memcpy(&h, file.data() + 12, 8);
  if (n == 0 || n != file.size() - 20 || fnv1a_bytes(file.data() + 20, n) != h) return {};
  return std::vector<unsigned char>(file.begin() + 20, file.end());
}

std::string cache_dir() {
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) base = x;
  else if (const char* h = std::getenv("HOME"); h && *h) base = std::string(h) + "/.cache";
  else return "";
  std::string dir = base + "/infinipot";
  mkdir(base.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  dir += "/kernels";
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string build_log(cl_program p, cl_device_id d) {
  size_t n = 0;
  clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n) clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log.empty() ? "(the driver gave no build log)" : log;
}

}  // namespace

std::string embedded_text(const std::string& name) {
  if (const char* dir = std::getenv("INFINIPOT_KERNEL_DIR"); dir && *dir && name.size() > 3 &&
                                                             name.compare(name.size() - 3, 3, ".cl") == 0) {
    std::ifstream in(std::string(dir) + "/" + name);
    if (!in) throw ClError("developer mode: cannot read " + std::string(dir) + "/" + name + " (INFINIPOT_KERNEL_DIR)");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  const char* text = embedded::find(name);
  if (!text) throw ClError("no embedded file named '" + name + "' (was it added to cl_kernels/ or platforms/?)");
  return text;
}

Context::Context(const ContextOptions& opts) : device_(select_device(opts.device)), use_disk_cache_(opts.use_disk_cache) {
  if (opts.native_dot_form == 0 || (opts.native_dot_form == 2 && device_.native_dot > 0))
    device_.native_dot = opts.native_dot_form;
  else if (opts.native_dot_form != -1 && opts.native_dot_form != 2)
    throw ClError("ContextOptions::native_dot_form must be -1, 0 or 2, got " + std::to_string(opts.native_dot_form));
  tuning_ = lookup_tuning(device_, opts.tuning_overrides);
  cl_int err = CL_SUCCESS;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(device_.platform), 0};
  ctx_ = ContextHandle(clCreateContext(props, 1, &device_.id, nullptr, nullptr, &err));
  check(err, "clCreateContext(" + device_.name + ")");
  // Kernel spans in a trace come from profiling events, which need a profiling queue.
  const cl_command_queue_properties qp = trace::kernels_enabled() ? CL_QUEUE_PROFILING_ENABLE : 0;
  queue_ = QueueHandle(clCreateCommandQueue(ctx_.get(), device_.id, qp, &err));
  check(err, "clCreateCommandQueue(" + device_.name + ")");
  uint64_t budget = opts.device_mem ? opts.device_mem : device_.global_mem_bytes;
  memory_ = std::make_unique<DeviceMemory>(ctx_.get(), budget, device_.max_alloc_bytes);
}

cl_program Context::program(const std::string& file, const std::string& options) {
  const std::string key = file + "\n" + options;
  if (auto it = programs_.find(key); it != programs_.end()) return it->second.get();

  // "a.cl+b.cl" concatenates files (shared definitions such as quant_formats.cl first).
  std::string source;
  for (size_t start = 0; start <= file.size();) {
    size_t end = file.find('+', start);
    if (end == std::string::npos) end = file.size();
    source += embedded_text(file.substr(start, end - start)) + "\n";
    start = end + 1;
  }
  const std::string full_options = "-cl-std=CL1.2 -cl-mad-enable " + options;
  const uint64_t h = fnv1a(device_.name + "|" + device_.driver_version + "|" + device_.platform_name + "|" +
                           full_options + "|" + source);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  const std::string dir = use_disk_cache_ ? cache_dir() : "";
  const std::string bin_path = dir.empty() ? "" : dir + "/" + file + "-" + hex + ".bin";

  cl_int err = CL_SUCCESS;
  ProgramHandle prog;
  // Try the cached binary first: PoCL's first compile of a kernel file costs seconds.
  if (!bin_path.empty()) {
    std::ifstream in(bin_path, std::ios::binary);
    const std::vector<unsigned char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Only an entry whose envelope checks out reaches the driver: some drivers (PoCL among
    // them) crash on a truncated or garbled binary instead of refusing it.
    const std::vector<unsigned char> bin = unwrap_cached_binary(file);
    if (!bin.empty()) {
      const unsigned char* ptr = bin.data();
      size_t len = bin.size();
      cl_int bin_status = CL_SUCCESS;
      prog = ProgramHandle(clCreateProgramWithBinary(ctx_.get(), 1, &device_.id, &len, &ptr, &bin_status, &err));
      if (err != CL_SUCCESS || bin_status != CL_SUCCESS ||
          clBuildProgram(prog.get(), 1, &device_.id, full_options.c_str(), nullptr, nullptr) != CL_SUCCESS)
        prog.reset();  // stale or foreign binary: rebuild from source
    }
  }
  if (!prog) {
    const char* src = source.c_str();
    prog = ProgramHandle(clCreateProgramWithSource(ctx_.get(), 1, &src, nullptr, &err));
    check(err, "clCreateProgramWithSource(" + file + ")");
    err = clBuildProgram(prog.get(), 1, &device_.id, full_options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS) throw BuildError(file, full_options, build_log(prog.get(), device_.id));
    if (!bin_path.empty()) {
      size_t size = 0;
      if (clGetProgramInfo(prog.get(), CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) == CL_SUCCESS && size) {
        std::vector<unsigned char> bin(size);
        unsigned char* ptr = bin.data();
        if (clGetProgramInfo(prog.get(), CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) == CL_SUCCESS) {
          // Write to a temporary name and rename, so a crash never leaves a torn cache file.
          const std::string tmp = bin_path + ".tmp" + std::to_string(::getpid());
          std::ofstream out(tmp, std::ios::binary);
          const std::vector<unsigned char> wrapped = wrap_cached_binary(bin);
          out.write(reinterpret_cast<const char*>(wrapped.data()), static_cast<std::streamsize>(wrapped.size()));
          out.close();
          if (out) std::rename(tmp.c_str(), bin_path.c_str());
          else std::remove(tmp.c_str());
        }
      }
    }
  }
  cl_program raw = prog.get();
  programs_.emplace(key, std::move(prog));
  return raw;
}

Kernel Context::kernel(std::string_view file, std::string_view name, std::string_view options) {
  // The key is built in a kept string: after the first tokens a lookup allocates nothing.
  kernel_key_.assign(file).append(1, '\n').append(options).append(1, '\n').append(name);
  auto it = kernels_.find(kernel_key_);
  if (it == kernels_.end()) {
    cl_int err = CL_SUCCESS;
    const std::string kernel_name(name);
    KernelHandle k(clCreateKernel(program(std::string(file), std::string(options)), kernel_name.c_str(), &err));
    check(err, "clCreateKernel(" + std::string(file) + ":" + kernel_name + ")");
    it = kernels_.emplace(kernel_key_, CachedKernel{std::move(k), kernel_name}).first;
  }
  // Each Kernel shares the cached cl_kernel: retain so both owners release once.
  clRetainKernel(it->second.kernel.get());
  return Kernel(KernelHandle(it->second.kernel.get()), it->second.name);
}

void Context::finish() const { check(clFinish(queue_.get()), "clFinish"); }

void Context::write(const Buffer& dst, const void* src, size_t bytes, size_t offset) const {
  if (!bytes) return;
  cl_int status = injected_write_fault();
  if (status == CL_SUCCESS)
    status = clEnqueueWriteBuffer(queue_.get(), dst.get(), CL_TRUE, offset, bytes, src, 0, nullptr, nullptr);
  check(status, "clEnqueueWriteBuffer(blocking)");
}

Context::MappedWrite Context::map_write(const Buffer& dst, size_t bytes, size_t offset) const {
  cl_int status = injected_write_fault();
  void* p = nullptr;
  if (status == CL_SUCCESS)
    p = clEnqueueMapBuffer(queue_.get(), dst.get(), CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, offset, bytes, 0, nullptr,
                           nullptr, &status);
  check(status, "clEnqueueMapBuffer(write)");
  return MappedWrite(queue_.get(), dst.get(), static_cast<uint8_t*>(p));
}

Context::MappedWrite::MappedWrite(MappedWrite&& o) noexcept : queue_(o.queue_), mem_(o.mem_), data_(o.data_) {
  o.data_ = nullptr;
}

void Context::MappedWrite::unmap() {
  if (!data_) return;
  uint8_t* p = data_;
  data_ = nullptr;
  cl_int status = clEnqueueUnmapMemObject(queue_, mem_, p, 0, nullptr, nullptr);
  if (status == CL_SUCCESS) status = clFinish(queue_);
  check(status, "clEnqueueUnmapMemObject");
}

Context::MappedWrite::~MappedWrite() {
  if (!data_) return;
  // An exception is on its way (the fill failed): hand the region back, report nothing more.
  if (clEnqueueUnmapMemObject(queue_, mem_, data_, 0, nullptr, nullptr) == CL_SUCCESS) clFinish(queue_);
}

EventHandle Context::write_async(const Buffer& dst, const void* src, size_t bytes, size_t offset) const {
  if (!bytes) return EventHandle();
  cl_event done = nullptr;
  cl_int status = injected_write_fault();
  if (status == CL_SUCCESS)
    status = clEnqueueWriteBuffer(queue_.get(), dst.get(), CL_FALSE, offset, bytes, src, 0, nullptr, &done);
  check(status, "clEnqueueWriteBuffer(non-blocking)");
  return EventHandle(done);
}

void Context::wait(const EventHandle& done) {
  if (!done) return;
  const cl_event e = done.get();
  check(clWaitForEvents(1, &e), "clWaitForEvents");
}

void Context::read(const Buffer& src, void* dst, size_t bytes, size_t offset) const {
  if (!bytes) return;
  check(clEnqueueReadBuffer(queue_.get(), src.get(), CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr),
        "clEnqueueReadBuffer");
}

void Context::copy(const Buffer& src, const Buffer& dst, size_t bytes, size_t src_off, size_t dst_off) const {
  if (!bytes) return;
  check(clEnqueueCopyBuffer(queue_.get(), src.get(), dst.get(), src_off, dst_off, bytes, 0, nullptr, nullptr),
        "clEnqueueCopyBuffer");
}

void Context::copy_rows(const Buffer& src, const Buffer& dst, size_t row_bytes, size_t rows, size_t src_pitch,
                        size_t src_off) const {
  if (!row_bytes || !rows) return;
  if (src.get() == dst.get()) throw ClError("invalid copy: copy_rows within one buffer");
  if (rows > 1 && src_pitch < row_bytes) throw ClError("invalid copy: copy_rows pitch below the row's bytes");
  const size_t src_origin[3] = {src_off, 0, 0}, dst_origin[3] = {0, 0, 0}, region[3] = {row_bytes, rows, 1};
  check(clEnqueueCopyBufferRect(queue_.get(), src.get(), dst.get(), src_origin, dst_origin, region, src_pitch, 0,
                                row_bytes, 0, 0, nullptr, nullptr),
        "clEnqueueCopyBufferRect");
}

void Context::fill_zero(const Buffer& dst, size_t bytes, size_t offset) const {
  if (!bytes) return;
  const cl_uint zero = 0;
  check(clEnqueueFillBuffer(queue_.get(), dst.get(), &zero, sizeof zero, offset, bytes, 0, nullptr, nullptr),
        "clEnqueueFillBuffer");
}

}  // namespace infinipot::cl
