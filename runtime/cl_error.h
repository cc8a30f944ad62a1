// Typed errors of the OpenCL layer. Each carries the failing call and the OpenCL status
// name, so a user reads "clEnqueueNDRangeKernel(rms_norm) failed: CL_OUT_OF_RESOURCES".
#pragma once
#include <CL/cl.h>
#include <stdexcept>
#include <string>

namespace infinipot::cl {

const char* status_name(cl_int status);

class ClError : public std::runtime_error {
 public:
  ClError(const std::string& call, cl_int status);
  ClError(const std::string& message) : std::runtime_error(message), status_(CL_SUCCESS) {}
  cl_int status() const { return status_; }

 private:
  cl_int status_;
};

// A kernel program that failed to build; what() includes the compiler's build log.
class BuildError : public ClError {
 public:
  BuildError(const std::string& program, const std::string& options, const std::string& log);
};

// No usable OpenCL platform/device, or the one asked for does not exist.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline void check(cl_int status, const char* call) {
  if (status != CL_SUCCESS) throw ClError(call, status);
}
inline void check(cl_int status, const std::string& call) {
  if (status != CL_SUCCESS) throw ClError(call, status);
}

}  // namespace infinipot::cl
