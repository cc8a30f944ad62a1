// Launchers for gemm.cl (packed GEMM and A packing).
#include <string>

#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot::ops {

void pack_a(Context& c, const Buffer& X, int m, int k, int ldx, Buffer& Ap) {
  if (Ap.bytes() < packed_a_floats(m, k) * 4) throw cl::ClError("invalid launch: pack_a output too small");
  c.kernel("gemm.cl", "pack_a").args(X, m, k, ldx, Ap).launch(c.queue(), {size_t(k), cl::round_up(m, 8) / 8});
}

void gemm_packed(Context& c, int m, int n, int k, const Buffer& Ap, const Buffer& Bp, Buffer& C, int ldc,
                 bool accumulate, size_t c_offset) {
  if (Ap.bytes() < packed_a_floats(m, k) * 4 || Bp.bytes() < panel_floats(n, k) * 4 ||
      C.bytes() < (c_offset + size_t(m - 1) * ldc + n) * 4)
    throw cl::ClError("invalid launch: gemm_packed operand too small");
  const int tile = c.tuning().gemm_tile_rows;  // 4 or 8 (runtime/tuning.h)
  if (tile != 4 && tile != 8) throw cl::ClError("invalid launch: gemm_packed tile of " + std::to_string(tile) + " rows");
  c.kernel("gemm.cl", "gemm_packed", std::string(accumulate ? "-DACCUM" : "") + " -DTILE_M=" + std::to_string(tile))
      .args(m, n, k, Ap, Bp, C, static_cast<int>(c_offset), ldc)
      .launch(c.queue(), {cl::round_up(n, 16) / 16, cl::round_up(m, tile) / tile});
}

}  // namespace infinipot::ops
