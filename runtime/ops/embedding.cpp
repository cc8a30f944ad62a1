// Launcher of embedding.cl.
#include "runtime/ops/embedding.h"

#include "runtime/ops/detail.h"

namespace infinipot::ops {

using detail::require;

constexpr const char* kSources = "quant_formats.cl+embedding.cl";

void embed(Context& c, const DeviceWeight& table, const Buffer& ids, int n, Buffer& out) {
  require(table.cols % 8 == 0, "embedding width must be a multiple of 8");
  require(out.bytes() >= size_t(n) * table.cols * 4, "embed: output buffer too small");
  c.kernel({"embed_rows", {int64_t(table.type)}}, kSources, "embed_rows",
           [&] { return wtype_option(table.type); })
      .args(table.buf, table.row_bytes, ids, table.cols, out)
      .launch(c.queue(), {size_t(table.cols / 8), size_t(n)});
}

}  // namespace infinipot::ops
