#include "runtime/device.h"
#include "runtime/icd_check.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "runtime/cl_error.h"

namespace infinipot::cl {
namespace {

std::string platform_str(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string device_str(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T device_val(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof(T), &v, nullptr);
  return v;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool has_ext(const std::string& exts, const std::string& e) {
  return (" " + exts + " ").find(" " + e + " ") != std::string::npos;
}

}  // namespace

nlohmann::json DeviceInfo::to_json() const {
  return {{"index", index},
          {"platform", platform_name},
          {"name", name},
          {"vendor", vendor},
          {"type", type},
          {"driver_version", driver_version},
          {"device_version", device_version},
          {"opencl_c_version", opencl_c_version},
          {"global_mem_bytes", global_mem_bytes},
          {"local_mem_bytes", local_mem_bytes},
          {"max_alloc_bytes", max_alloc_bytes},
          {"compute_units", compute_units}, {"native_float_width", native_float_width},
          {"max_work_group_size", max_work_group_size},
          {"fp16", fp16},
          {"subgroups", subgroups},
          {"exact_divide", exact_divide},
          {"native_dot", native_dot}};
}

// PoCL builds kernels with clang for the host CPU, so a function there may ask for an x86
// feature that PoCL's kernel-library variant leaves out (native_dot.cl); only where the
// host has it, or the instruction faults.
static int native_dot_of(const DeviceInfo& d) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  const bool pocl = d.platform_name.find("Portable Computing Language") != std::string::npos;
  if (!pocl || d.type != "cpu") return 0;
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) return 1;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;  // (F16C comes with both)
#else
  (void)d;
#endif
  return 0;
}

// PoCL's CPU driver pins its thread i to CPU i when POCL_AFFINITY=1, read when its devices are
// first listed, so it is set here, before that, unless the user set it. Decode is ~150 short
// launches a token, each waking the driver's threads: pinned, SmolLM2 decoded at 123-128 tok/s
// on a 2-core EPYC against 109-129 unpinned in alternating runs (docs/benchmarks.md). Other
// drivers ignore the variable.
std::vector<DeviceInfo> list_devices() {
  setenv("POCL_AFFINITY", "1", /*overwrite=*/0);
  std::vector<DeviceInfo> out;
  cl_uint n_platforms = 0;
  if (clGetPlatformIDs(0, nullptr, &n_platforms) != CL_SUCCESS || n_platforms == 0) return out;
  std::vector<cl_platform_id> platforms(n_platforms);
  clGetPlatformIDs(n_platforms, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    cl_uint n_dev = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n_dev) != CL_SUCCESS || n_dev == 0) continue;
    std::vector<cl_device_id> devs(n_dev);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n_dev, devs.data(), nullptr);
    for (cl_device_id d : devs) {
      DeviceInfo info;
      info.index = static_cast<int>(out.size());
      info.platform = p;
      info.id = d;
      info.platform_name = platform_str(p, CL_PLATFORM_NAME);
      info.platform_vendor = platform_str(p, CL_PLATFORM_VENDOR);
      info.name = device_str(d, CL_DEVICE_NAME);
      info.vendor = device_str(d, CL_DEVICE_VENDOR);
      info.driver_version = device_str(d, CL_DRIVER_VERSION);
      info.device_version = device_str(d, CL_DEVICE_VERSION);
      info.opencl_c_version = device_str(d, CL_DEVICE_OPENCL_C_VERSION);
      auto type = device_val<cl_device_type>(d, CL_DEVICE_TYPE);
      info.type = (type & CL_DEVICE_TYPE_GPU) ? "gpu"
                  : (type & CL_DEVICE_TYPE_ACCELERATOR) ? "accelerator"
                  : (type & CL_DEVICE_TYPE_CPU) ? "cpu" : "other";
      info.global_mem_bytes = device_val<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
      info.local_mem_bytes = device_val<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE);
      info.max_alloc_bytes = device_val<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      info.compute_units = device_val<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
      info.native_float_width = device_val<cl_uint>(d, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT);
      info.max_work_group_size = device_val<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      info.extensions = device_str(d, CL_DEVICE_EXTENSIONS);
      info.host_unified = device_val<cl_bool>(d, CL_DEVICE_HOST_UNIFIED_MEMORY) == CL_TRUE;
      info.fp16 = has_ext(info.extensions, "cl_khr_fp16");
      info.exact_divide =
          (device_val<cl_device_fp_config>(d, CL_DEVICE_SINGLE_FP_CONFIG) & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
      info.subgroups = has_ext(info.extensions, "cl_khr_subgroups") ||
                       has_ext(info.extensions, "cl_intel_subgroups");
      info.native_dot = native_dot_of(info);
      out.push_back(std::move(info));
    }
  }
  return out;
}

DeviceInfo select_device(const std::string& spec) {
  auto devices = list_devices();
  if (devices.empty())
    throw DeviceError(
        "no OpenCL device found: no OpenCL platform (ICD) is installed or none has a device.\n" +
        check_icd().describe() +
        "Install a driver, e.g. `apt-get install pocl-opencl-icd` for the CPU, and check with `clinfo -l`.");
  auto describe = [&] {
    std::string s;
    for (const auto& d : devices)
      s += "\n  " + std::to_string(d.index) + ": " + d.name + " [" + d.type + ", " + d.platform_name + "]";
    return s;
  };
  if (spec.empty()) {
    for (const char* want : {"gpu", "accelerator", "cpu", "other"})
      for (const auto& d : devices)
        if (d.type == want) return d;
  }
  bool numeric = !spec.empty() && std::all_of(spec.begin(), spec.end(), ::isdigit);
  if (numeric) {
    size_t idx = spec.size() > 6 ? SIZE_MAX : std::stoul(spec);
    if (idx < devices.size()) return devices[idx];
    throw DeviceError("{device} " + spec + ": no device with that index; there are " +
                      std::to_string(devices.size()) + ":" + describe());
  }
  for (const auto& d : devices)
    if (lower(d.name).find(lower(spec)) != std::string::npos ||
        lower(d.platform_name).find(lower(spec)) != std::string::npos)
      return d;
  throw DeviceError("{device} " + spec + ": no device name or platform matches; available:" + describe());
}

}  // namespace infinipot::cl
