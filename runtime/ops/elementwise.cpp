// Launchers of elementwise.cl.
#include "runtime/ops/elementwise.h"

#include "runtime/cl_error.h"

namespace infinipot::ops {

constexpr const char* kSources = "activations.cl+elementwise.cl";

void swiglu(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act) {
  c.kernel(kSources, "swiglu").args(gu, n_ff, act).launch(c.queue(), {size_t(n_ff), size_t(n_rows)});
}

void geglu_tanh(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act) {
  c.kernel(kSources, "geglu_tanh").args(gu, n_ff, act).launch(c.queue(), {size_t(n_ff), size_t(n_rows)});
}

void scale(Context& c, Buffer& x, size_t n, float s) {
  if (x.bytes() < n * 4) throw cl::ClError("invalid launch: scale past the buffer");
  c.kernel(kSources, "scale").args(x, static_cast<int>(n), s).launch(c.queue(), {n});
}

void add_bias(Context& c, Buffer& x, int ld, int n_rows, int n_cols, const Buffer& bias) {
  if (n_cols > ld || x.bytes() < (size_t(n_rows - 1) * ld + n_cols) * 4 || bias.bytes() < size_t(n_cols) * 4)
    throw cl::ClError("invalid launch: add_bias past a buffer");
  c.kernel(kSources, "add_bias").args(x, ld, n_cols, bias).launch(c.queue(), {size_t(n_cols), size_t(n_rows)});
}

}  // namespace infinipot::ops
