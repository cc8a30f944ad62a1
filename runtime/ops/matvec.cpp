// Launchers of matvec.cl (with its decode fusions: norm, GLU, RoPE + KV store).
#include "runtime/ops/matvec.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "model_loader/quant.h"
#include "runtime/ops/detail.h"
#include "runtime/ops/matvec_q8.h"

namespace infinipot::ops {

using detail::kRowsPerItem;
using detail::launch_rows;
using detail::require;

constexpr const char* kSources =
    "quant_formats.cl+activations.cl+kv_format.cl+vector_reduce.cl+rope.cl+native_dot.cl+matvec.cl";

bool matvec_native(const Context& c, const DeviceWeight& W) {
  const int local = c.tuning().matvec_native_local;
  const auto& forms = c.tuning().matvec_native_dot;
  const auto& types = c.tuning().matvec_native_types;
  return c.device().native_dot > 0 &&
         std::find(forms.begin(), forms.end(), c.device().native_dot_name()) != forms.end() &&
         matvec_q8_supports(W.type) && std::find(types.begin(), types.end(), quant::traits(W.type).name) != types.end() &&
         W.cols % 32 == 0 &&
         local >= 1 && size_t(local) <= c.device().max_work_group_size &&
         uint64_t(W.cols / 32 + 4) * 44 <= c.device().local_mem_bytes;  // matvec.cl's local buffers (NATIVE_K)
}

// matvec.cl's work-group size for W's products.
static int matvec_local_of(const Context& c, const DeviceWeight& W) {
  return matvec_native(c, W) ? c.tuning().matvec_native_local : c.tuning().matvec_local;
}

static void check_matvec(const DeviceWeight& W, const Buffer& x, int n_rows, const RowNorm& norm, const char* what) {
  require(n_rows >= 1 && n_rows <= 4, what, " handles 1..4 rows");
  require(W.cols % 8 == 0, what, ": K must be a multiple of 8");
  require(x.bytes() >= size_t(n_rows) * W.cols * 4, what, ": input too small");
  require(!norm.w || norm.w->bytes() >= size_t(W.cols) * 4, what, ": norm weight too small");
}

// matvec.cl's -D options every variant shares: the weight type, the norm inside (its width
// sizes the work-group's local copy) and the tuning's prefetch distance, when it has one.
static std::string matvec_options(Context& c, const DeviceWeight& W, const RowNorm& norm) {
  const int prefetch = c.tuning().matvec_prefetch;
  const bool native = matvec_native(c, W);
  return wtype_option(W.type) + (norm.w ? " -DNORM -DNORM_K=" + std::to_string(W.cols) : "") +
         (prefetch > 0 ? " -DPREFETCH_BYTES=" + std::to_string(prefetch) : "") +
         (native ? " -DNATIVE_DOT=" + std::to_string(c.device().native_dot) + " -DNATIVE_K=" + std::to_string(W.cols) +
                       c.exact_divide_option()
                 : "");
}

// What matvec_options reads of a launch, beyond the context's device and tuning (the key of
// Context's kernel lookup without options text), with the variant's own options text: a
// string literal per variant, its address part of the key.
static Context::LaunchKey matvec_key(const char* site, const DeviceWeight& W, const RowNorm& norm,
                                     const char* variant) {
  return {site, {int64_t(W.type), W.cols, norm.w != nullptr, int64_t(intptr_t(variant))}};
}

// matvec.cl with its fusion options (`opts`: a string literal); Wu / up_row0 / norm are
// dummies when unused.
static void launch_float_matvec(Context& c, const char* opts, const DeviceWeight& W, const DeviceWeight& Wu,
                                int up_row0, int n_out, int per_item, const Buffer& x, const RowNorm& norm,
                                int n_rows, Buffer& y, int ldy, size_t y_offset) {
  auto k = c.kernel(matvec_key("matvec", W, norm, opts), kSources, "matvec",
                    [&] { return matvec_options(c, W, norm) + opts; });
  k.args(W.buf, W.row_bytes, n_out, W.cols, x, n_rows, y, static_cast<int>(y_offset), ldy, Wu.buf, up_row0,
         norm.w ? *norm.w : x, norm.eps);
  launch_rows(c, k, matvec_local_of(c, W), n_out, per_item, n_rows);
}

constexpr int kGluOutsPerItem = 2;  // OUTS of matvec.cl's GLU variants

void matvec(Context& c, const DeviceWeight& W, const Buffer& x, int n_rows, Buffer& y, int ldy, bool accumulate,
            size_t y_offset) {
  check_matvec(W, x, n_rows, {}, "matvec");
  require(y.bytes() >= (y_offset + size_t(n_rows - 1) * ldy + W.rows) * 4, "matvec: output too small");
  launch_float_matvec(c, accumulate ? " -DACCUM" : "", W, W, 0, W.rows, kRowsPerItem, x, {}, n_rows, y, ldy, y_offset);
}

void matvec_norm(Context& c, const DeviceWeight& W, const Buffer& x, const RowNorm& norm, int n_rows, Buffer& y,
                 int ldy, size_t y_offset) {
  require(norm.w != nullptr, "matvec_norm: no norm weight");
  check_matvec(W, x, n_rows, norm, "matvec_norm");
  require(y.bytes() >= (y_offset + size_t(n_rows - 1) * ldy + W.rows) * 4, "matvec_norm: output too small");
  launch_float_matvec(c, "", W, W, 0, W.rows, kRowsPerItem, x, norm, n_rows, y, ldy, y_offset);
}

void matvec_glu(Context& c, const DeviceWeight& gate, const DeviceWeight& up, int up_row0, int n_ff, Glu act,
                const Buffer& x, const RowNorm& norm, int n_rows, Buffer& out) {
  check_matvec(gate, x, n_rows, norm, "matvec_glu");
  require(up.type == gate.type && up.row_bytes == gate.row_bytes && up.cols == gate.cols,
          "matvec_glu: gate and up weights differ in encoding or width");
  require(n_ff >= 1 && n_ff <= gate.rows && up_row0 >= 0 && up_row0 + n_ff <= up.rows,
          "matvec_glu: gate or up rows outside their matrix");
  require(out.bytes() >= size_t(n_rows) * n_ff * 4, "matvec_glu: output too small");
  const char* opts = act == Glu::Silu ? " -DGLU=1" : " -DGLU=2";
  launch_float_matvec(c, opts, gate, up, up_row0, n_ff, kGluOutsPerItem, x, norm, n_rows, out, n_ff, 0);
}

void matvec_qkv_rope(Context& c, const DeviceWeight& W, const Buffer& x, const RowNorm& norm, int n_rows,
                     Buffer& qkv, const RopeKv& kv) {
  check_matvec(W, x, n_rows, norm, "matvec_qkv_rope");
  require(kv.head_dim % 4 == 0 && kv.n_rot % 2 == 0 && kv.n_rot <= kv.head_dim,
          "matvec_qkv_rope: head_dim must be a multiple of 4 (whole RoPE pairs per work-item), n_rot even");
  require(W.rows == (kv.n_head + 2 * kv.n_kv_heads) * kv.head_dim, "matvec_qkv_rope: W is not q|k|v of these heads");
  require(qkv.bytes() >= size_t(n_rows) * W.rows * 4, "matvec_qkv_rope: output too small");
  require(kv.cs->bytes() >= size_t(n_rows) * kv.n_rot * 4, "matvec_qkv_rope: angle table too small");
  require(kv.slot0 >= 0 && kv.slot0 + n_rows <= kv.cap, "matvec_qkv_rope: slots past the KV capacity");
  const size_t cache_bytes = size_t(kv.n_kv_heads) * kv.cap * kv.head_dim * (kv.kv_half ? 2 : 4);
  require(kv.k_cache->bytes() >= cache_bytes && kv.v_cache->bytes() >= cache_bytes, "matvec_qkv_rope: cache too small");
  require(!kv.bias || kv.bias->bytes() >= size_t(W.rows) * 4, "matvec_qkv_rope: bias too small");
  const char* opts = kv.bias ? (kv.kv_half ? " -DROPE_KV -DKV_HALF -DBIAS" : " -DROPE_KV -DBIAS")
                             : (kv.kv_half ? " -DROPE_KV -DKV_HALF" : " -DROPE_KV");
  auto k = c.kernel(matvec_key("matvec_qkv_rope", W, norm, opts), kSources, "matvec",
                    [&] { return matvec_options(c, W, norm) + opts; });
  if (kv.bias)
    k.args(W.buf, W.row_bytes, W.rows, W.cols, x, n_rows, qkv, 0, W.rows, W.buf, 0, norm.w ? *norm.w : x, norm.eps,
           *kv.bias, *kv.cs, kv.head_dim, kv.n_rot, kv.n_head, kv.n_kv_heads, *kv.k_cache, *kv.v_cache, kv.cap,
           kv.slot0);
  else
    k.args(W.buf, W.row_bytes, W.rows, W.cols, x, n_rows, qkv, 0, W.rows, W.buf, 0, norm.w ? *norm.w : x, norm.eps,
           *kv.cs, kv.head_dim, kv.n_rot, kv.n_head, kv.n_kv_heads, *kv.k_cache, *kv.v_cache, kv.cap, kv.slot0);
  launch_rows(c, k, matvec_local_of(c, W), W.rows, kRowsPerItem, n_rows);
}

}  // namespace infinipot::ops
