// Launchers of cl_kernels/norm.cl (RMSNorm); reference ref::rms_norm, tests
// tests/runtime/test_norm.cpp.
#pragma once
#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// norm.cl: out[r] = rmsnorm(x[r]) * w                        x, out: [n_rows][n]
void rms_norm(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps);
// norm.cl: out[r] += rmsnorm(x[r]) * w (post-norm + residual)  x, out: [n_rows][n], not aliased
void rms_norm_add(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps);
// norm.cl: in place, each of n_heads heads of head_dim floats at x[t][off + h*head_dim]
// (QK-norm on fused q|k|v rows)                              x: [n_tokens][ld], w: [head_dim]
void rms_norm_heads(Context& c, Buffer& x, int ld, int off, int n_heads, int head_dim, int n_tokens, const Buffer& w,
                    float eps);

}  // namespace infinipot::ops
