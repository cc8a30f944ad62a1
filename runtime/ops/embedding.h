// Launcher of cl_kernels/embedding.cl (token embedding rows of a GGUF-encoded table);
// reference ref::embed, tests tests/runtime/test_embedding.cpp.
#pragma once
#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// embedding.cl: out[t][:] = dequant(table[ids[t]])          out: [n][table.cols]
void embed(Context& c, const DeviceWeight& table, const Buffer& ids, int n, Buffer& out);

}  // namespace infinipot::ops
