// Launchers of cl_kernels/elementwise.cl (the gated activations, with activations.cl's
// definitions, scaling and bias adds); reference ref::swiglu and ref::geglu_tanh, tests
// tests/runtime/test_elementwise.cpp.
#pragma once
#include <cstddef>

#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// elementwise.cl
void swiglu(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act);  // gu: [n][2*n_ff]
void geglu_tanh(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act);  // gu: [n][2*n_ff]
void scale(Context& c, Buffer& x, size_t n, float s);  // x[i] *= s, i < n
// x[r][c] += bias[c], r < n_rows, c < n_cols; x: [n_rows][ld], bias: [n_cols]
void add_bias(Context& c, Buffer& x, int ld, int n_rows, int n_cols, const Buffer& bias);

}  // namespace infinipot::ops
