// Launcher of cl_kernels/kv_cache.cl (the pot's compaction of the KV store); reference
// ref::kv_gather, tests tests/runtime/test_kv_cache.cpp.
#pragma once
#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// kv_cache.cl: dst[h][j] = src[h][keep[h][j]] for j < n_keep   caches: [n_kv_heads][cap][head_dim]
void kv_gather(Context& c, const Buffer& src, Buffer& dst, int n_kv_heads, int cap, int head_dim,
               const Buffer& keep, int n_keep, bool kv_half = false);

}  // namespace infinipot::ops
