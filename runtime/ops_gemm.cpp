// Launchers for gemm.cl (packed GEMM and A packing).
#include <string>

#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot::ops {

namespace {

// -D options of gemm.cl for a tile height (runtime/tuning.h: 8, 6 or 4 rows per work-item).
std::string gemm_options(int tile) {
  return "-DTILE_M=" + std::to_string(tile) + " -DPANEL_M=" + std::to_string(a_panel_rows(tile));
}

}  // namespace

int a_panel_rows(int tile_rows) {
  if (tile_rows != 4 && tile_rows != 6 && tile_rows != 8)
    throw cl::ClError("invalid launch: gemm_packed tile of " + std::to_string(tile_rows) + " rows (4, 6 or 8)");
  return tile_rows == 6 ? 6 : 8;
}

size_t packed_a_floats(int m, int k, int tile_rows) {
  return cl::round_up(m, a_panel_rows(tile_rows)) * static_cast<size_t>(k);
}

void pack_a(Context& c, const Buffer& X, int m, int k, int ldx, Buffer& Ap) {
  const int tile = c.tuning().gemm_tile_rows, panel = a_panel_rows(tile);
  if (Ap.bytes() < packed_a_floats(m, k, tile) * 4) throw cl::ClError("invalid launch: pack_a output too small");
  c.kernel("gemm.cl", "pack_a", gemm_options(tile))
      .args(X, m, k, ldx, Ap)
      .launch(c.queue(), {size_t(k), cl::round_up(m, panel) / panel});
}

void gemm_packed(Context& c, int m, int n, int k, const Buffer& Ap, const Buffer& Bp, Buffer& C, int ldc,
                 bool accumulate, size_t c_offset) {
  const int tile = c.tuning().gemm_tile_rows;
  if (Ap.bytes() < packed_a_floats(m, k, tile) * 4 || Bp.bytes() < panel_floats(n, k) * 4 ||
      C.bytes() < (c_offset + size_t(m - 1) * ldc + n) * 4)
    throw cl::ClError("invalid launch: gemm_packed operand too small");
  c.kernel("gemm.cl", "gemm_packed", std::string(accumulate ? "-DACCUM " : "") + gemm_options(tile))
      .args(m, n, k, Ap, Bp, C, static_cast<int>(c_offset), ldc)
      .launch(c.queue(), {cl::round_up(n, 16) / 16, cl::round_up(m, tile) / tile});
}

}  // namespace infinipot::ops
