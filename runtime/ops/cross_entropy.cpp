// Launchers of cross_entropy.cl.
#include "runtime/ops/cross_entropy.h"

namespace infinipot::ops {

constexpr const char* kSources = "vector_reduce.cl+cross_entropy.cl";

void ce_init(Context& c, Buffer& m, Buffer& s, Buffer& tl, int n) {
  c.kernel(kSources, "ce_init").args(m, s, tl, n).launch(c.queue(), {size_t(n)});
}

void ce_update(Context& c, const Buffer& logits, int n, int tile, int v0, const Buffer& targets, Buffer& m, Buffer& s,
               Buffer& tl) {
  c.kernel(kSources, "ce_update")
      .args(logits, n, tile, v0, targets, m, s, tl)
      .launch(c.queue(), {size_t(n)});
}

}  // namespace infinipot::ops
