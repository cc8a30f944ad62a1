// Launchers of gemm.cl (packed GEMM and A packing).
#include "runtime/ops/gemm.h"

#include <string>

#include "runtime/cl_error.h"
#include "runtime/ops/dequant.h"

namespace infinipot::ops {

// pack_a and gemm_packed read floats; gemm_dequant dequantizes its B panels with dequant.cl.
constexpr const char* kSources = "gemm.cl";
constexpr const char* kDequantSources = "quant_formats.cl+dequant.cl+gemm.cl";

namespace {

// -D options of gemm.cl for a tile height (runtime/tuning.h: 8, 6 or 4 rows per work-item).
std::string gemm_options(int tile) {
  return "-DTILE_M=" + std::to_string(tile) + " -DPANEL_M=" + std::to_string(a_panel_rows(tile));
}

// 8-row tiles (AVX-512's 32 registers) multiply two panels per work-item (gemm.cl WIDE).
bool wide(Context& c) { return c.tuning().gemm_tile_rows == 8; }

cl::Kernel gemm_dequant_kernel(Context& c, const DeviceWeight& W, bool accumulate) {
  return c.kernel(kDequantSources, "gemm_dequant",
                  wtype_option(W.type) + (accumulate ? " -DACCUM " : " ") + gemm_options(c.tuning().gemm_tile_rows) +
                      (wide(c) ? " -DWIDE" : ""));
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
  c.kernel(kSources, "pack_a", gemm_options(tile))
      .args(X, m, k, ldx, Ap)
      .launch(c.queue(), {size_t(k), cl::round_up(m, panel) / panel});
}

void gemm_packed(Context& c, int m, int n, int k, const Buffer& Ap, const Buffer& Bp, Buffer& C, int ldc,
                 bool accumulate, size_t c_offset) {
  const int tile = c.tuning().gemm_tile_rows;
  if (Ap.bytes() < packed_a_floats(m, k, tile) * 4 || Bp.bytes() < panel_floats(n, k) * 4 ||
      C.bytes() < (c_offset + size_t(m - 1) * ldc + n) * 4)
    throw cl::ClError("invalid launch: gemm_packed operand too small");
  c.kernel(kSources, "gemm_packed", std::string(accumulate ? "-DACCUM " : "") + gemm_options(tile))
      .args(m, n, k, Ap, Bp, C, static_cast<int>(c_offset), ldc)
      .launch(c.queue(), {cl::round_up(n, 16) / 16, cl::round_up(m, tile) / tile});
}

bool gemm_dequant_fits(Context& c, const DeviceWeight& W) {
  return W.cols % 8 == 0 && kGemmGroupItems <= gemm_dequant_kernel(c, W, false).work_group_limit(c.device().id);
}

void gemm_dequant(Context& c, int m, const DeviceWeight& W, int row0, int n, const Buffer& Ap, Buffer& Bp, Buffer& C,
                  int ldc, bool accumulate, size_t c_offset) {
  const int k = W.cols, tile = c.tuning().gemm_tile_rows;
  if (k % 8 != 0 || row0 < 0 || n <= 0 || row0 + n > W.rows)
    throw cl::ClError("invalid launch: gemm_dequant rows outside the weight, or K not a multiple of 8");
  if (Ap.bytes() < packed_a_floats(m, k, tile) * 4 || Bp.bytes() < panel_floats(n, k) * 4 ||
      C.bytes() < (c_offset + size_t(m - 1) * ldc + n) * 4)
    throw cl::ClError("invalid launch: gemm_dequant operand too small");
  if (!gemm_dequant_fits(c, W))
    throw cl::ClError("invalid launch: gemm_dequant needs " + std::to_string(kGemmGroupItems) +
                      " work-items per group, more than the device allows (use dequant_to_panels + gemm_packed)");
  cl::Kernel kernel = gemm_dequant_kernel(c, W, accumulate);
  kernel.args(m, n, k, Ap, W.buf, W.row_bytes, row0, Bp, C, static_cast<int>(c_offset), ldc);
  const size_t cols_per_group = wide(c) ? 32 : 16;
  kernel.launch(c.queue(), {kGemmGroupItems, cl::round_up(n, cols_per_group) / cols_per_group}, {kGemmGroupItems, 1});
}

}  // namespace infinipot::ops
