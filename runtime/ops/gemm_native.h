// Launchers of cl_kernels/gemm_native.cl: the prefill products in the CPU's own integer dot;
// reference: a double product of the same quantized input, in
// tests/runtime/test_gemm_native.cpp.
#pragma once
#include <cstddef>

#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// gemm_native.cl: prefill products in the CPU's own integer dot (vpdpwssd, 16-bit inputs).
// gemm_native_fits: whether W's products take it: the device's native dot is AVX-512 VNNI (a
// PoCL device on such a CPU) and the tuning's matvec_native_dot lists it, gemm_native_types
// lists W's type, K is a multiple of 32 and the device runs its 16-item work-groups. The input
// is quantized once (gemm_native_quantize, 16 bits per 32-block, into gemm_native_input_bytes)
// for every product that reads it; gemm_native then rewrites each 16-row panel of rows [row0,
// row0 + n) of W into Bp (gemm_native_panel_bytes, scratch) and multiplies.
bool gemm_native_fits(Context& c, const DeviceWeight& W);
size_t gemm_native_input_bytes(int m, int k);
size_t gemm_native_panel_bytes(int n, int k);
void gemm_native_quantize(Context& c, const Buffer& X, int m, int k, int ldx, Buffer& xq);
void gemm_native(Context& c, int m, const DeviceWeight& W, int row0, int n, const Buffer& xq, Buffer& Bp, Buffer& C,
                 int ldc, bool accumulate, size_t c_offset = 0);

}  // namespace infinipot::ops
