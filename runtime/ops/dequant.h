// Launchers of cl_kernels/dequant.cl: GGUF-encoded weights as floats, row-major or as the
// panels the prefill GEMM reads (gemm.cl); reference ref::dequantize_rows and ref::to_panels,
// tests tests/runtime/test_dequant.cpp.
#pragma once
#include <cstddef>

#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// dequant.cl: Bp = panels of W (see gemm.cl)                 Bp: [pad16(W.rows)][W.cols]
void dequant_to_panels(Context& c, const DeviceWeight& W, Buffer& Bp, size_t bp_offset_floats = 0);
// dequant.cl: panels of rows [row0, row0 + n_rows) of W only    Bp: [pad16(n_rows)][W.cols]
void dequant_rows_to_panels(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& Bp);
// dequant.cl: out = W as row-major floats                    out: [W.rows][W.cols]
void dequant_rows(Context& c, const DeviceWeight& W, Buffer& out);
// dequant.cl: rows [row0, row0 + n_rows) of W as row-major floats   out: [n_rows][W.cols]
void dequant_row_range(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& out);
size_t panel_floats(int rows, int cols);  // floats dequant_to_panels writes

}  // namespace infinipot::ops
