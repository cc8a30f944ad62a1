// Launchers of norm.cl.
#include "runtime/ops/norm.h"

#include <string>

#include "runtime/cl_error.h"

namespace infinipot::ops {

constexpr const char* kSources = "norm.cl";

static int norm_local(Context& c) {
  const int local = c.tuning().norm_local;
  return local < 1 || (local & (local - 1)) ? 1 : local;
}

void rms_norm(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps) {
  const int local = norm_local(c);
  c.kernel({"rms_norm", {local}}, kSources, "rms_norm", [&] { return "-DLOCAL=" + std::to_string(local); })
      .args(x, w, out, n, eps)
      .launch(c.queue(), {size_t(n_rows) * local}, {size_t(local)});
}

void rms_norm_add(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps) {
  if (&x == &out) throw cl::ClError("invalid launch: rms_norm_add needs distinct input and output");
  const int local = norm_local(c);
  c.kernel(kSources, "rms_norm", "-DLOCAL=" + std::to_string(local) + " -DACCUM")
      .args(x, w, out, n, eps)
      .launch(c.queue(), {size_t(n_rows) * local}, {size_t(local)});
}

void rms_norm_heads(Context& c, Buffer& x, int ld, int off, int n_heads, int head_dim, int n_tokens, const Buffer& w,
                    float eps) {
  if (off < 0 || off + n_heads * head_dim > ld || x.bytes() < size_t(n_tokens) * ld * 4 ||
      w.bytes() < size_t(head_dim) * 4)
    throw cl::ClError("invalid launch: rms_norm_heads heads outside the rows or weight too short");
  const int local = norm_local(c);
  c.kernel(kSources, "rms_norm_heads", "-DLOCAL=" + std::to_string(local))
      .args(x, ld, off, n_heads, w, head_dim, eps)
      .launch(c.queue(), {size_t(n_tokens) * n_heads * local}, {size_t(local)});
}

}  // namespace infinipot::ops
