// Launchers of matvec_q8.cl.
#include "runtime/ops/matvec_q8.h"

#include "model_loader/quant.h"
#include "runtime/ops/detail.h"

namespace infinipot::ops {

using detail::kRowsPerItem;
using detail::launch_rows;
using detail::require;

constexpr const char* kSources = "quant_formats.cl+matvec_q8.cl";

size_t q8_bytes(int n_rows, int k) { return size_t(n_rows) * (k / 32) * kQ8BlockBytes; }

bool matvec_q8_supports(gguf::TensorType t) {
  return t == gguf::TensorType::Q4_0 || t == gguf::TensorType::Q4_1 || t == gguf::TensorType::Q8_0;
}

void quantize_q8(Context& c, const Buffer& x, int n_rows, int k, Buffer& xq) {
  require(n_rows >= 1 && k >= 32 && k % 32 == 0, "quantize_q8: K must be a positive multiple of 32");
  require(x.bytes() >= size_t(n_rows) * k * 4, "quantize_q8: input too small");
  require(xq.bytes() >= q8_bytes(n_rows, k), "quantize_q8: output too small");
  // The kernel is the same for every weight type; WTYPE only satisfies quant_formats.cl.
  // The scales and quotients must round as the C++ reference's (and llama.cpp's) do.
  c.kernel(kSources, "quantize_q8", wtype_option(gguf::TensorType::Q8_0) + c.exact_divide_option())
      .args(x, k, n_rows, xq)
      .launch(c.queue(), {size_t(k / 32), size_t(n_rows)});
}

void matvec_q8(Context& c, const DeviceWeight& W, const Buffer& xq, int n_rows, Buffer& y, int ldy, bool accumulate,
               size_t y_offset) {
  require(matvec_q8_supports(W.type), "matvec_q8: no integer kernel for ", quant::traits(W.type).name);
  require(n_rows >= 1 && n_rows <= 4, "matvec_q8 handles 1..4 rows");
  require(W.cols % 32 == 0, "matvec_q8: K must be a multiple of 32");
  require(xq.bytes() >= q8_bytes(n_rows, W.cols), "matvec_q8: input too small");
  require(y.bytes() >= (y_offset + size_t(n_rows - 1) * ldy + W.rows) * 4, "matvec_q8: output too small");
  auto k = c.kernel(kSources, "matvec_q8", wtype_option(W.type) + (accumulate ? " -DACCUM" : ""));
  k.args(W.buf, W.row_bytes, W.rows, W.cols, xq, n_rows, y, static_cast<int>(y_offset), ldy);
  launch_rows(c, k, c.tuning().matvec_local, W.rows, kRowsPerItem, n_rows);
}

}  // namespace infinipot::ops
