// Launchers of cl_kernels/matvec_q8.cl: decode products in integers; reference
// ref::quantize_q8 and ref::matvec_q8, tests tests/runtime/test_matvec_q8.cpp.
#pragma once
#include <cstddef>

#include "model_loader/gguf.h"
#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// matvec_q8.cl: decode products in integers. quantize_q8 writes each 32-element block of x's
// rows as a 40-byte Q8 block (float d, float s, char q[32]; layout in the .cl header); matvec_q8
// then computes y[r][o] (+)= W[o] . xq[r] for Q4_0, Q4_1 and Q8_0 weights (matvec_q8_supports).
constexpr int kQ8BlockBytes = 40;
size_t q8_bytes(int n_rows, int k);  // bytes quantize_q8 writes for [n_rows][k]
bool matvec_q8_supports(gguf::TensorType t);
void quantize_q8(Context& c, const Buffer& x, int n_rows, int k, Buffer& xq);  // x: [n_rows][k], k % 32 == 0
void matvec_q8(Context& c, const DeviceWeight& W, const Buffer& xq, int n_rows, Buffer& y, int ldy, bool accumulate,
               size_t y_offset = 0);

}  // namespace infinipot::ops
