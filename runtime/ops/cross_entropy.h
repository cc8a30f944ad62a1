// Launchers of cl_kernels/cross_entropy.cl (the perplexity's running log-sum-exp and target
// logit over vocabulary tiles); reference ref::cross_entropy, tests
// tests/runtime/test_cross_entropy.cpp.
#pragma once
#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// cross_entropy.cl
void ce_init(Context& c, Buffer& m, Buffer& s, Buffer& tl, int n);
void ce_update(Context& c, const Buffer& logits, int n, int tile, int v0, const Buffer& targets, Buffer& m,
               Buffer& s, Buffer& tl);

}  // namespace infinipot::ops
