// Launchers for gemm.cl (packed GEMM and A packing) and gemm_native.cl (the integer-dot GEMM).
#include <algorithm>
#include <string>

#include "model_loader/quant.h"

#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot::ops {

namespace {

// -D options of gemm.cl for a tile height (runtime/tuning.h: 8, 6 or 4 rows per work-item).
std::string gemm_options(int tile) {
  return "-DTILE_M=" + std::to_string(tile) + " -DPANEL_M=" + std::to_string(a_panel_rows(tile));
}

// 8-row tiles (AVX-512's 32 registers) multiply two panels per work-item (gemm.cl WIDE).
bool wide(Context& c) { return c.tuning().gemm_tile_rows == 8; }

cl::Kernel gemm_dequant_kernel(Context& c, const DeviceWeight& W, bool accumulate) {
  return c.kernel("quant_formats.cl+dequant.cl+gemm.cl", "gemm_dequant",
                  wtype_option(W.type) + (accumulate ? " -DACCUM " : " ") + gemm_options(c.tuning().gemm_tile_rows) +
                      (wide(c) ? " -DWIDE" : ""));
}

// Work-items per gemm_dequant group, whatever the number of rows (each takes every 16th tile):
// one work-group size, so one compiled kernel on drivers that specialise on it.
constexpr size_t kDequantGroup = 16;

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


bool gemm_dequant_fits(Context& c, const DeviceWeight& W) {
  return W.cols % 8 == 0 && kDequantGroup <= gemm_dequant_kernel(c, W, false).work_group_limit(c.device().id);
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
    throw cl::ClError("invalid launch: gemm_dequant needs " + std::to_string(kDequantGroup) +
                      " work-items per group, more than the device allows (use dequant_to_panels + gemm_packed)");
  cl::Kernel kernel = gemm_dequant_kernel(c, W, accumulate);
  kernel.args(m, n, k, Ap, W.buf, W.row_bytes, row0, Bp, C, static_cast<int>(c_offset), ldc);
  const size_t cols_per_group = wide(c) ? 32 : 16;
  kernel.launch(c.queue(), {kDequantGroup, cl::round_up(n, cols_per_group) / cols_per_group}, {kDequantGroup, 1});
}

// ---- gemm_native.cl ------------------------------------------------------------------------

namespace {
constexpr int kNativeTile = 8;         // GN_TILE: input rows per tile, the quantized input's padding
constexpr size_t kNativeRecord = 1152;  // GN_RECORD: bytes of a 16-row panel per 32-block

cl::Kernel gemm_native_kernel(Context& c, const DeviceWeight& W, bool accumulate) {
  // gemm.cl for its store_tile (8-row tiles, as GN_TILE), which needs dequant.cl under WTYPE.
  return c.kernel("quant_formats.cl+dequant.cl+vector_reduce.cl+native_dot.cl+gemm.cl+gemm_native.cl", "gemm_native",
                  wtype_option(W.type) + " -DNATIVE_DOT=1 -DNATIVE_K=" + std::to_string(W.cols) +
                      " -DTILE_M=8 -DPANEL_M=8" + (accumulate ? " -DACCUM" : ""));
}
}  // namespace

bool gemm_native_fits(Context& c, const DeviceWeight& W) {
  const auto& forms = c.tuning().matvec_native_dot;
  const auto& types = c.tuning().gemm_native_types;
  return c.device().native_dot == 1 && std::find(forms.begin(), forms.end(), "avx512_vnni") != forms.end() &&
         matvec_q8_supports(W.type) && std::find(types.begin(), types.end(), quant::traits(W.type).name) != types.end() &&
         W.cols % 32 == 0 && kDequantGroup <= gemm_native_kernel(c, W, false).work_group_limit(c.device().id);
}

size_t gemm_native_input_bytes(int m, int k) {
  return cl::round_up(m, kNativeTile) * (2 * size_t(k) + 2 * sizeof(float) * size_t(k / 32));  // q, then d and s
}

size_t gemm_native_panel_bytes(int n, int k) { return cl::round_up(n, 16) / 16 * size_t(k / 32) * kNativeRecord; }

void gemm_native_quantize(Context& c, const Buffer& X, int m, int k, int ldx, Buffer& xq) {
  if (m < 1 || k < 32 || k % 32 != 0 || ldx < k)
    throw cl::ClError("invalid launch: gemm_native_quantize needs rows, and K a positive multiple of 32");
  if (X.bytes() < (size_t(m - 1) * ldx + k) * 4 || xq.bytes() < gemm_native_input_bytes(m, k))
    throw cl::ClError("invalid launch: gemm_native_quantize operand too small");
  c.kernel("gemm_native.cl", "gemm_native_quantize", c.exact_divide_option())
      .args(X, m, k, ldx, xq)
      .launch(c.queue(), {size_t(k / 32), cl::round_up(m, kNativeTile)});
}

void gemm_native(Context& c, int m, const DeviceWeight& W, int row0, int n, const Buffer& xq, Buffer& Bp, Buffer& C,
                 int ldc, bool accumulate, size_t c_offset) {
  const int k = W.cols;
  if (!gemm_native_fits(c, W))
    throw cl::ClError(std::string("invalid launch: gemm_native for ") + quant::traits(W.type).name +
                      " weights on a device or tuning without the native integer GEMM (ops::gemm_native_fits)");
  if (m < 1 || row0 < 0 || n <= 0 || row0 + n > W.rows)
    throw cl::ClError("invalid launch: gemm_native rows outside the weight, or no input rows");
  if (xq.bytes() < gemm_native_input_bytes(m, k) || Bp.bytes() < gemm_native_panel_bytes(n, k) ||
      C.bytes() < (c_offset + size_t(m - 1) * ldc + n) * 4)
    throw cl::ClError("invalid launch: gemm_native operand too small");
  gemm_native_kernel(c, W, accumulate)
      .args(m, n, xq, W.buf, W.row_bytes, row0, Bp, C, static_cast<int>(c_offset), ldc)
      .launch(c.queue(), {kDequantGroup, cl::round_up(n, 16) / 16}, {kDequantGroup, 1});
}

}  // namespace infinipot::ops
