// Launchers for the kernels that read GGUF-encoded weights: embedding.cl, matvec.cl (with its
// decode fusions: norm, GLU, RoPE + KV store), matvec_q8.cl, dequant.cl.
#include <algorithm>
#include <string>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot::ops {
std::string wtype_option(gguf::TensorType t) {
  const uint32_t id = static_cast<uint32_t>(t);
  if (!quant::is_known_type(id) || !quant::traits(t).on_device)
    throw cl::ClError("no device kernel for weight type id " + std::to_string(id) +
                      " (supported on device: " + quant::device_type_names() + ")");
  return "-DWTYPE=" + std::to_string(id);
}

namespace {

// The message is text the caller has at hand (a literal): no string is made unless it fails,
// since decode checks its launches every token.
void require(bool ok, const char* what) {
  if (!ok) throw cl::ClError(std::string("invalid launch: ") + what);
}
void require(bool ok, const char* launcher, const char* what) {
  if (!ok) throw cl::ClError(std::string("invalid launch: ") + launcher + what);
}

}  // namespace

size_t panel_floats(int rows, int cols) { return cl::round_up(rows, 16) * static_cast<size_t>(cols); }

void embed(Context& c, const DeviceWeight& table, const Buffer& ids, int n, Buffer& out) {
  require(table.cols % 8 == 0, "embedding width must be a multiple of 8");
  require(out.bytes() >= size_t(n) * table.cols * 4, "embed: output buffer too small");
  c.kernel({"embed_rows", {int64_t(table.type)}}, "quant_formats.cl+embedding.cl", "embed_rows",
           [&] { return wtype_option(table.type); })
      .args(table.buf, table.row_bytes, ids, table.cols, out)
      .launch(c.queue(), {size_t(table.cols / 8), size_t(n)});
}

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

// Grid of the decode products: `per_item` outputs of one input row per work-item, the input
// rows on dimension 1, work-groups of the tuned size (matvec_native_local for W's products in
// the native dot, whose work-groups each quantize the input row first).
static void launch_rows(Context& c, cl::Kernel& k, int local, int n_out, int per_item, int n_rows) {
  const size_t items = (n_out + per_item - 1) / per_item;
  if (local > 1) k.launch(c.queue(), {items, size_t(n_rows)}, {size_t(local), 1});
  else k.launch(c.queue(), {items, size_t(n_rows)});
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

constexpr const char* kMatvecFiles =
    "quant_formats.cl+activations.cl+kv_format.cl+vector_reduce.cl+rope.cl+native_dot.cl+matvec.cl";

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
  auto k = c.kernel(matvec_key("matvec", W, norm, opts), kMatvecFiles, "matvec",
                    [&] { return matvec_options(c, W, norm) + opts; });
  k.args(W.buf, W.row_bytes, n_out, W.cols, x, n_rows, y, static_cast<int>(y_offset), ldy, Wu.buf, up_row0,
         norm.w ? *norm.w : x, norm.eps);
  launch_rows(c, k, matvec_local_of(c, W), n_out, per_item, n_rows);
}

constexpr int kRowsPerItem = 4;  // ROWS in matvec.cl and matvec_q8.cl
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
  const char* opts = kv.kv_half ? " -DROPE_KV -DKV_HALF" : " -DROPE_KV";
  auto k = c.kernel(matvec_key("matvec_qkv_rope", W, norm, opts), kMatvecFiles, "matvec",
                    [&] { return matvec_options(c, W, norm) + opts; });
  k.args(W.buf, W.row_bytes, W.rows, W.cols, x, n_rows, qkv, 0, W.rows, W.buf, 0, norm.w ? *norm.w : x, norm.eps,
         *kv.cs, kv.head_dim, kv.n_rot, kv.n_head, kv.n_kv_heads, *kv.k_cache, *kv.v_cache, kv.cap, kv.slot0);
  launch_rows(c, k, matvec_local_of(c, W), W.rows, kRowsPerItem, n_rows);
}

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
  c.kernel("quant_formats.cl+matvec_q8.cl", "quantize_q8", wtype_option(gguf::TensorType::Q8_0) + c.exact_divide_option())
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
  auto k = c.kernel("quant_formats.cl+matvec_q8.cl", "matvec_q8", wtype_option(W.type) + (accumulate ? " -DACCUM" : ""));
  k.args(W.buf, W.row_bytes, W.rows, W.cols, xq, n_rows, y, static_cast<int>(y_offset), ldy);
  launch_rows(c, k, c.tuning().matvec_local, W.rows, kRowsPerItem, n_rows);
}

static void dequant_panels(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& Bp, size_t offset) {
  require(W.cols % 8 == 0, "dequant: K must be a multiple of 8");
  require(row0 >= 0 && n_rows > 0 && row0 + n_rows <= W.rows, "dequant: row range outside the matrix");
  require(Bp.bytes() >= (offset + panel_floats(n_rows, W.cols)) * 4, "dequant_to_panels: output too small");
  const int rows_pad = static_cast<int>(cl::round_up(n_rows, 16));
  c.kernel("quant_formats.cl+dequant.cl", "dequant_to_panels", wtype_option(W.type))
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
  c.kernel("quant_formats.cl+dequant.cl", "dequant_rows", wtype_option(W.type))
      .args(W.buf, W.row_bytes, row0, W.cols, out)
      .launch(c.queue(), {size_t(W.cols / 8), size_t(n_rows)});
}

void dequant_rows(Context& c, const DeviceWeight& W, Buffer& out) { dequant_row_range(c, W, 0, W.rows, out); }

}  // namespace infinipot::ops
