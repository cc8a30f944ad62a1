// Launcher of argmax.cl.
#include "runtime/ops/argmax.h"

#include <string>

#include "runtime/cl_error.h"

namespace infinipot::ops {

constexpr const char* kSources = "vector_reduce.cl+argmax.cl";

// Items of argmax_row's one work-group: a power of two every device's work-group size allows.
constexpr int kArgmaxItems = 64;

void argmax_row(Context& c, const Buffer& x, int n, Buffer& out) {
  if (n < 1 || x.bytes() < size_t(n) * sizeof(float) || out.bytes() < sizeof(int))
    throw cl::ClError("invalid launch: argmax_row of " + std::to_string(n) + " floats");
  const int chunk = (n + kArgmaxItems - 1) / kArgmaxItems;
  c.kernel({"argmax_row"}, kSources, "argmax_row",
           [] { return "-DARGMAX_ITEMS=" + std::to_string(kArgmaxItems); })
      .args(x, n, chunk, out)
      .launch(c.queue(), {size_t(kArgmaxItems)}, {size_t(kArgmaxItems)});
}

}  // namespace infinipot::ops
