// Launcher of cl_kernels/argmax.cl (the greedy token on the device); reference
// Sampler::argmax (runtime/sampling.h), tests tests/runtime/test_argmax.cpp.
#pragma once
#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// argmax.cl: out[0] = the first index of the largest of x[0 .. n) (NaN never wins; 0 for a row
// of NaN), the greedy token of a row of logits.      x: [n] floats   out: [1] int
void argmax_row(Context& c, const Buffer& x, int n, Buffer& out);

}  // namespace infinipot::ops
