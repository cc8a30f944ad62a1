// Launcher of decode_layer.cl: a decode row's transformer block in one launch.
#include "runtime/ops/decode_layer.h"

#include <algorithm>
#include <string>

#include "runtime/cl_error.h"

namespace infinipot::ops {

constexpr const char* kSources =
    "quant_formats.cl+activations.cl+kv_format.cl+vector_reduce.cl+rope.cl+native_dot.cl+attention.cl+decode_layer.cl";

namespace {

void require(bool ok, const char* what) {
  if (!ok) throw cl::ClError(std::string("invalid launch: decode_layer: ") + what);
}

}  // namespace

bool decode_layer_supported(const Context& c, const AttentionShape& s, const DecodeLayer& L) {
  const int q_dim = s.n_heads * s.head_dim;
  const DeviceWeight* ws[] = {L.wqkv, L.wo, L.gate, L.up, L.down};
  for (const DeviceWeight* w : ws)
    if (!matvec_native(c, *w) || w->type != L.wqkv->type) return false;
  const int n_embd = L.wqkv->cols;
  // Each width's local buffers fit: matvec_native checked them for every weight's input width.
  return c.tuning().decode_layer_launch && c.tuning().attention_vec16 && s.head_dim % 16 == 0 &&
         s.n_heads % s.n_kv_heads == 0 && (s.n_heads / s.n_kv_heads) * s.head_dim <= 256 &&
         L.wqkv->rows == (s.n_heads + 2 * s.n_kv_heads) * s.head_dim && L.wo->cols == q_dim &&
         L.wo->rows == n_embd && L.gate->cols == n_embd && L.up->cols == n_embd &&
         L.gate->row_bytes == L.up->row_bytes && L.down->cols == L.n_ff && L.down->rows == n_embd &&
         L.n_ff % 32 == 0 && L.n_ff <= L.gate->rows && L.up_row0 + L.n_ff <= L.up->rows && n_embd % 32 == 0 &&
         q_dim % 32 == 0 && L.n_rot % 2 == 0 && L.n_rot <= s.head_dim;
}

void decode_layer(Context& c, const AttentionShape& s, const DecodeLayer& L, Buffer& x, Buffer& qkv,
                  Buffer& k_cache, Buffer& v_cache, int n_past, Buffer& attn, Buffer& lse, Buffer& act,
                  const DecodeSplit& split, Buffer& sync) {
  require(decode_layer_supported(c, s, L), "the model, its weights or the tuning do not allow it");
  const int n_embd = L.wqkv->cols, q_dim = s.n_heads * s.head_dim;
  require(n_past >= 0 && n_past < s.cap, "slot past the KV capacity");
  require(x.bytes() >= size_t(n_embd) * 4 && qkv.bytes() >= size_t(L.wqkv->rows) * 4 &&
              attn.bytes() >= size_t(q_dim) * 4 && lse.bytes() >= size_t(s.n_heads) * 4 &&
              act.bytes() >= size_t(L.n_ff) * 4 && sync.bytes() >= kDecodeLayerSyncInts * sizeof(cl_int),
          "a buffer is too small");
  require(L.attn_norm->bytes() >= size_t(n_embd) * 4 && L.ffn_norm->bytes() >= size_t(n_embd) * 4 &&
              L.cs->bytes() >= size_t(L.n_rot) * 4,
          "norm weight or angle table too small");
  const size_t cache_bytes = size_t(s.n_kv_heads) * s.cap * s.head_dim * (s.kv_half ? 2 : 4);
  require(k_cache.bytes() >= cache_bytes && v_cache.bytes() >= cache_bytes, "cache too small");
  const int splits = decode_split_ways(s, n_past, split);
  const int prefetch = c.tuning().matvec_prefetch;
  auto k = c.kernel({"decode_layer", {int64_t(L.wqkv->type), n_embd, L.n_ff, int64_t(s.n_heads) << 32 | s.n_kv_heads,
                                      int64_t(s.head_dim) << 8 | int64_t(s.kv_half) << 1 | int64_t(L.act == Glu::Silu)}},
                    kSources, "decode_layer", [&] {
                      return wtype_option(L.wqkv->type) + " -DNORM -DDECODE_LANES -DNATIVE_DOT=" +
                             std::to_string(c.device().native_dot) + " -DNATIVE_K=" + std::to_string(n_embd) +
                             " -DN_EMBD=" + std::to_string(n_embd) + " -DN_FF=" + std::to_string(L.n_ff) +
                             " -DQ_DIM=" + std::to_string(q_dim) + " -DN_KV=" + std::to_string(s.n_kv_heads) +
                             " -DHEAD_DIM=" + std::to_string(s.head_dim) +
                             " -DGROUP=" + std::to_string(s.n_heads / s.n_kv_heads) + (s.kv_half ? " -DKV_HALF" : "") +
                             (L.act == Glu::Silu ? " -DGLU=1" : " -DGLU=2") +
                             (prefetch > 0 ? " -DPREFETCH_BYTES=" + std::to_string(prefetch) : "") +
                             " -DSYNC_INTS=" + std::to_string(kDecodeLayerSyncInts) +
                             c.exact_divide_option();
                    });
  Buffer& part = splits > 1 ? *split.part : attn;
  k.args(x, *L.attn_norm, L.wqkv->buf, L.wqkv->row_bytes, *L.cs, L.n_rot, k_cache, v_cache, s.cap, n_past, qkv, score_scale(s),
         window_arg(s), splits, part, attn, lse, L.wo->buf, L.wo->row_bytes, *L.ffn_norm, L.gate->buf, L.up->buf,
         L.up_row0, L.gate->row_bytes, act, L.down->buf, L.down->row_bytes, L.eps, sync);
  const size_t groups = std::max<size_t>(1, c.device().compute_units);
  k.launch(c.queue(), {groups}, {1});
}

}  // namespace infinipot::ops
