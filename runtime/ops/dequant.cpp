// Launchers of dequant.cl.
#include "runtime/ops/dequant.h"

#include "runtime/ops/detail.h"

namespace infinipot::ops {

using detail::require;

constexpr const char* kSources = "quant_formats.cl+dequant.cl";

size_t panel_floats(int rows, int cols) { return cl::round_up(rows, 16) * static_cast<size_t>(cols); }

static void dequant_panels(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& Bp, size_t offset) {
  require(W.cols % 8 == 0, "dequant: K must be a multiple of 8");
  require(row0 >= 0 && n_rows > 0 && row0 + n_rows <= W.rows, "dequant: row range outside the matrix");
  require(Bp.bytes() >= (offset + panel_floats(n_rows, W.cols)) * 4, "dequant_to_panels: output too small");
  const int rows_pad = static_cast<int>(cl::round_up(n_rows, 16));
  c.kernel(kSources, "dequant_to_panels", wtype_option(W.type))
      .args(W.buf, W.row_bytes, row0, n_rows, W.cols, Bp, static_cast<int>(offset), rows_pad)
      .launch(c.queue(), {size_t(W.cols / 8), size_t(rows_pad)});
}

void dequant_to_panels(Context& c, const DeviceWeight& W, Buffer& Bp, size_t offset) {
  dequant_panels(c, W, 0, W.rows, Bp, offset);
}

void dequant_rows_to_panels(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& Bp) {
  dequant_panels(c, W, row0, n_rows, Bp, 0);
}

void dequant_row_range(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& out) {
  require(W.cols % 8 == 0, "dequant: K must be a multiple of 8");
  require(row0 >= 0 && n_rows > 0 && row0 + n_rows <= W.rows, "dequant: row range outside the matrix");
  require(out.bytes() >= size_t(n_rows) * W.cols * 4, "dequant_rows: output too small");
  c.kernel(kSources, "dequant_rows", wtype_option(W.type))
      .args(W.buf, W.row_bytes, row0, W.cols, out)
      .launch(c.queue(), {size_t(W.cols / 8), size_t(n_rows)});
}

void dequant_rows(Context& c, const DeviceWeight& W, Buffer& out) { dequant_row_range(c, W, 0, W.rows, out); }

}  // namespace infinipot::ops
