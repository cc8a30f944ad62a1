#include "runtime/fault_injection.h"

#include <atomic>
#include <cstdlib>

namespace infinipot::cl {
namespace {

long env_at(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : 0;
}

cl_int countdown(long at, std::atomic<long>& count, cl_int status) {
  if (at <= 0) return CL_SUCCESS;
  return ++count == at ? status : CL_SUCCESS;
}

}  // namespace

cl_int injected_alloc_fault() {
  static const long at = env_at("INFINIPOT_FAULT_ALLOC_AT");
  static std::atomic<long> count{0};
  return countdown(at, count, CL_MEM_OBJECT_ALLOCATION_FAILURE);
}

cl_int injected_launch_fault() {
  static const long at = env_at("INFINIPOT_FAULT_LAUNCH_AT");
  static std::atomic<long> count{0};
  return countdown(at, count, CL_OUT_OF_RESOURCES);
}

cl_int injected_write_fault() {
  static const long at = env_at("INFINIPOT_FAULT_WRITE_AT");
  static std::atomic<long> count{0};
  return countdown(at, count, CL_OUT_OF_RESOURCES);
}

}  // namespace infinipot::cl
