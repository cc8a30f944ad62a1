// Test hooks that make the Nth device allocation or kernel launch fail as a driver would
// (CL_MEM_OBJECT_ALLOCATION_FAILURE / CL_OUT_OF_RESOURCES), so the error paths of a real run
// can be exercised on any device:
//   INFINIPOT_FAULT_ALLOC_AT=N    the Nth DeviceMemory::alloc fails (1-based)
//   INFINIPOT_FAULT_LAUNCH_AT=N   the Nth kernel launch fails (1-based)
//   INFINIPOT_FAULT_WRITE_AT=N    the Nth host-to-device write fails (1-based; blocking or not)
// Unset (the normal case) costs one branch per call.
#pragma once
#include <CL/cl.h>

namespace infinipot::cl {

// Returns the status to fail with for this call, or CL_SUCCESS.
cl_int injected_alloc_fault();
cl_int injected_launch_fault();
cl_int injected_write_fault();

}  // namespace infinipot::cl
