// Launchers of gemm_native.cl (the integer-dot GEMM).
#include "runtime/ops/gemm_native.h"

#include <algorithm>
#include <string>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"
#include "runtime/ops/gemm.h"
#include "runtime/ops/matvec_q8.h"

namespace infinipot::ops {

// gemm_native's (see gemm_native_kernel), and gemm_native_quantize's, which needs no other file.
constexpr const char* kSources = "quant_formats.cl+dequant.cl+vector_reduce.cl+native_dot.cl+gemm.cl+gemm_native.cl";
constexpr const char* kQuantizeSources = "gemm_native.cl";

namespace {
constexpr int kNativeTile = 8;         // GN_TILE: input rows per tile, the quantized input's padding
constexpr size_t kNativeRecord = 1152;  // GN_RECORD: bytes of a 16-row panel per 32-block

cl::Kernel gemm_native_kernel(Context& c, const DeviceWeight& W, bool accumulate) {
  // gemm.cl for its store_tile (8-row tiles, as GN_TILE), which needs dequant.cl under WTYPE.
  return c.kernel(kSources, "gemm_native",
                  wtype_option(W.type) + " -DNATIVE_DOT=1 -DNATIVE_K=" + std::to_string(W.cols) +
                      " -DTILE_M=8 -DPANEL_M=8" + (accumulate ? " -DACCUM" : ""));
}
}  // namespace

bool gemm_native_fits(Context& c, const DeviceWeight& W) {
  const auto& forms = c.tuning().matvec_native_dot;
  const auto& types = c.tuning().gemm_native_types;
  return c.device().native_dot == 1 && std::find(forms.begin(), forms.end(), "avx512_vnni") != forms.end() &&
         matvec_q8_supports(W.type) && std::find(types.begin(), types.end(), quant::traits(W.type).name) != types.end() &&
         W.cols % 32 == 0 && kGemmGroupItems <= gemm_native_kernel(c, W, false).work_group_limit(c.device().id);
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
  c.kernel(kQuantizeSources, "gemm_native_quantize", c.exact_divide_option())
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
      .launch(c.queue(), {kGemmGroupItems, cl::round_up(n, 16) / 16}, {kGemmGroupItems, 1});
}

}  // namespace infinipot::ops
