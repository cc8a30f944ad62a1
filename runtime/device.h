// OpenCL platform/device discovery and selection.
#pragma once
#include <CL/cl.h>
#include <cstdint>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace infinipot::cl {

struct DeviceInfo {
  int index = 0;                 // position in list_devices(), what --device N means
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string platform_name;     // "Portable Computing Language"
  std::string platform_vendor;
  std::string name;              // "pthread-skylake-avx512-..."
  std::string vendor;
  std::string driver_version;
  std::string device_version;    // "OpenCL 3.0 PoCL ..."
  std::string opencl_c_version;  // "OpenCL C 1.2 PoCL"
  std::string type;              // "gpu" | "cpu" | "accelerator" | "other"
  uint64_t global_mem_bytes = 0;
  uint64_t local_mem_bytes = 0;
  uint64_t max_alloc_bytes = 0;
  uint32_t compute_units = 0;
  uint32_t native_float_width = 0;  // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: 16 on AVX-512, 8 on AVX2
  size_t max_work_group_size = 0;
  // CL_DEVICE_HOST_UNIFIED_MEMORY: the device's memory is the host's DRAM (phones, boards,
  // integrated GPUs, PoCL): a buffer filled through a mapping costs no second copy.
  bool host_unified = false;
  bool fp16 = false;             // cl_khr_fp16
  bool subgroups = false;        // cl_khr_subgroups or cl_intel_subgroups
  // CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT: -cl-fp32-correctly-rounded-divide-sqrt is accepted
  // (OpenCL's default float division may be 2.5 ulp off: NVIDIA's is, PoCL's is exact).
  bool exact_divide = false;
  // The CPU's own 8-bit dot instructions that decode products may use (cl_kernels/native_dot.cl),
  // for a PoCL CPU device on an x86 host: 1 = AVX-512 VNNI (vpdpbusd), 2 = AVX2 (vpmaddubsw +
  // vpmaddwd); 0 = none (every other device: the portable kernels). PoCL's device is the host
  // CPU, so the host's CPUID decides.
  int native_dot = 0;
  const char* native_dot_name() const { return native_dot == 1 ? "avx512_vnni" : native_dot == 2 ? "avx2" : "none"; }
  std::string extensions;

  nlohmann::json to_json() const;
};

// Every device of every platform; an empty list (no ICD, no platform) is not an error here.
std::vector<DeviceInfo> list_devices();

// --device: "" picks the first GPU, else the first accelerator, else the first CPU.
// A number picks by index; other text picks the first device whose name or platform
// contains it (case-insensitive). Throws DeviceError listing what exists when nothing matches.
DeviceInfo select_device(const std::string& spec);

}  // namespace infinipot::cl
