// Launcher of kv_cache.cl.
#include "runtime/ops/kv_cache.h"

#include "runtime/ops/detail.h"

namespace infinipot::ops {

constexpr const char* kSources = "kv_format.cl+kv_cache.cl";

void kv_gather(Context& c, const Buffer& src, Buffer& dst, int n_kv_heads, int cap, int head_dim, const Buffer& keep,
               int n_keep, bool kv_half) {
  c.kernel(kSources, "kv_gather", detail::kv_option(kv_half))
      .args(src, dst, cap, head_dim, keep, n_keep)
      .launch(c.queue(), {size_t(head_dim), size_t(n_keep), size_t(n_kv_heads)});
}

}  // namespace infinipot::ops
