// Launchers of cl_kernels/gemm.cl: the prefill GEMM over packed panels (A packed by pack_a, B
// the weight's panels from dequant.cl, or dequantized inside, gemm_dequant); reference
// ref::pack_a and ref::gemm_abt, tests tests/runtime/test_gemm.cpp.
#pragma once
#include <cstddef>

#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// Rows per panel of pack_a for a gemm_packed tile height (c.tuning().gemm_tile_rows): 6-row
// tiles read 6-row panels, 4- and 8-row tiles 8-row panels. Throws for another height.
int a_panel_rows(int tile_rows);
size_t packed_a_floats(int m, int k, int tile_rows);  // floats pack_a writes

// gemm.cl: Ap = pack(X), panels of a_panel_rows(tuning's tile) rows   X: [m][ldx], Ap: [pad(m)][k]
void pack_a(Context& c, const Buffer& X, int m, int k, int ldx, Buffer& Ap);
// gemm.cl: C[m][n] (+)= A[m][k] B[n][k]^T from packed operands; C from element c_offset,
// leading dimension ldc
void gemm_packed(Context& c, int m, int n, int k, const Buffer& Ap, const Buffer& Bp, Buffer& C, int ldc,
                 bool accumulate, size_t c_offset = 0);
// gemm.cl: the same product with rows [row0, row0 + n) of the quantized W as B, each 16-row
// panel dequantized into Bp (pad16(n) x k floats, scratch) by the work-group that multiplies it.
// gemm_dequant_fits: whether the device runs its work-groups (16 items) for this weight.
bool gemm_dequant_fits(Context& c, const DeviceWeight& W);
void gemm_dequant(Context& c, int m, const DeviceWeight& W, int row0, int n, const Buffer& Ap, Buffer& Bp, Buffer& C,
                  int ldc, bool accumulate, size_t c_offset = 0);

// Work-items per work-group of gemm_dequant and gemm_native (gemm_native.cl), whatever the
// number of rows (each takes every 16th tile): one work-group size, so one compiled kernel on
// drivers that specialise on it.
constexpr size_t kGemmGroupItems = 16;

}  // namespace infinipot::ops
