// Helpers the launchers in runtime/ops/ share; not for their callers.
#pragma once
#include <string>

#include "runtime/cl_error.h"
#include "runtime/context.h"

namespace infinipot::ops::detail {

// The message is text the caller has at hand (a literal): no string is made unless it fails,
// since decode checks its launches every token.
inline void require(bool ok, const char* what) {
  if (!ok) throw cl::ClError(std::string("invalid launch: ") + what);
}
inline void require(bool ok, const char* launcher, const char* what) {
  if (!ok) throw cl::ClError(std::string("invalid launch: ") + launcher + what);
}

// -DKV_HALF where the KV store holds 16-bit floats (kv_format.cl).
inline std::string kv_option(bool kv_half) { return kv_half ? "-DKV_HALF" : ""; }

// Outputs of one input row per work-item of the decode products: ROWS in matvec.cl and
// matvec_q8.cl.
constexpr int kRowsPerItem = 4;

// Grid of the decode products (matvec.cl, matvec_q8.cl): `per_item` outputs of one input row
// per work-item, the input rows on dimension 1, work-groups of the tuned size
// (matvec_native_local for W's products in the native dot, whose work-groups each quantize the
// input row first).
inline void launch_rows(cl::Context& c, cl::Kernel& k, int local, int n_out, int per_item, int n_rows) {
  const size_t items = (n_out + per_item - 1) / per_item;
  if (local > 1) k.launch(c.queue(), {items, size_t(n_rows)}, {size_t(local), 1});
  else k.launch(c.queue(), {items, size_t(n_rows)});
}

}  // namespace infinipot::ops::detail
