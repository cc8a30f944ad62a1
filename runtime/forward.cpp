#include "runtime/forward.h"
#include "model_loader/setting_names.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot {
namespace {

constexpr int kMatvecMaxRows = 4;  // below this many rows, read quantized weights directly

struct Sizes {
  size_t ids, x, qkv, attn, lse, gu, act, logits, q8, split_part;
  int widest_in;            // widest GEMM input
  size_t largest_weight;    // floats of the largest dequantized weight (or LM-head tile)
};

// Items per KV head that a decode row's attention may split into (ops::DecodeSplit, as many
// as ops::decode_splits asks up to this): room for 16 threads over SmolLM2's 3 KV heads; 38 KiB.
constexpr int kMaxDecodeSplits = 16;
ops::AttentionShape decode_shape(const LlamaConfig& c) { return {c.n_head, c.n_head_kv, c.head_dim, 1}; }

Sizes sizes(const LlamaConfig& c, int chunk, int lm_tile) {
  const size_t n = chunk, qkv_ld = size_t(c.n_head + 2 * c.n_head_kv) * c.head_dim;
  const int widest_in = std::max({c.n_embd, c.n_head * c.head_dim, c.n_ff});
  size_t w = 0;
  for (auto [rows, cols] : {std::pair{(c.n_head + 2 * c.n_head_kv) * c.head_dim, c.n_embd},
                            {c.n_embd, c.n_head * c.head_dim}, {2 * c.n_ff, c.n_embd}, {c.n_embd, c.n_ff},
                            {std::min(lm_tile, c.n_vocab), c.n_embd}})
    w = std::max(w, ops::panel_floats(rows, cols));
  return {n * 4,
          n * c.n_embd * 4,
          n * qkv_ld * 4,
          n * c.n_head * c.head_dim * 4,
          n * c.n_head * 4,
          n * 2 * c.n_ff * 4,
          n * c.n_ff * 4,
          std::max<size_t>(c.n_vocab, n * std::min(lm_tile, c.n_vocab)) * 4,
          ops::q8_bytes(kMatvecMaxRows, widest_in),
          ops::decode_split_part_bytes(decode_shape(c), kMaxDecodeSplits),
          widest_in,
          w};
}

GemmLayer make_gemm(cl::Context& ctx, int max_chunk, const Sizes& s) {
  return GemmLayer(ctx, ctx.tuning().gemm_backend, max_chunk, s.widest_in, s.largest_weight);
}

// A layer's gate and up weights for the decode GLU products: the fused gate|up matrix twice
// (up rows from n_ff), or the two weights (up rows from 0).
struct GateUp {
  const ops::DeviceWeight& gate;
  const ops::DeviceWeight& up;
  int up_row0;
};
GateUp gate_up_of(const DeviceLayer& L, int n_ff) {
  if (L.gate_up_fused()) return {L.w_gate_up, L.w_gate_up, n_ff};
  return {L.w_gate, L.w_up, 0};
}
ops::Glu glu_of(const LlamaConfig& c) {
  return c.ffn_act == FfnActivation::GeluTanh ? ops::Glu::GeluTanh : ops::Glu::Silu;
}

}  // namespace

cl::MemoryPlan Forward::plan(const LlamaConfig& cfg, int max_chunk, const cl::Tuning& tuning, bool kv_half,
                             int lm_tile) {
  Sizes s = sizes(cfg, max_chunk, lm_tile);
  cl::MemoryPlan p = GemmLayer::plan(tuning, max_chunk, s.widest_in, s.largest_weight);
  // ids, the RoPE tables (a second one for local layers with their own base), x, xn, ...
  const size_t rope_tables = cfg.has_local_layers() ? 2 : 1;
  p[cl::MemCategory::Activations] =
      s.ids * (1 + rope_tables * cfg.n_rot) + 2 * s.x + s.qkv + s.attn + s.lse + s.gu + s.act + 4 * s.ids + s.q8 +
      sizeof(int) +  // the greedy token
      ops::kDecodeLayerSyncInts * sizeof(cl_int) +
      s.split_part;
  p[cl::MemCategory::Scratch] = s.logits;
  if (cfg.has_local_layers()) {
    const int cap = KvStore::window_capacity(cfg, max_chunk);
    p[cl::MemCategory::KvCache] = KvStore::bytes_needed(cfg, cap, kv_half, KvKind::Local) +
                                  KvStore::compaction_bytes(cfg, cap, kv_half);
  }
  return p;
}

Forward::Forward(cl::Context& ctx, const DeviceModel& model, KvStore& kv, int max_chunk, int lm_tile)
    : ctx_(ctx), m_(model), kv_(kv), max_chunk_(max_chunk), lm_tile_(std::min(lm_tile, model.cfg.n_vocab)),
      gemm_(make_gemm(ctx, max_chunk, sizes(model.cfg, max_chunk, lm_tile_))) {
  const LlamaConfig& c = m_.cfg;
  qkv_ld_ = (c.n_head + 2 * c.n_head_kv) * c.head_dim;
  Sizes s = sizes(c, max_chunk, lm_tile_);
  auto& mem = ctx.memory();
  using cl::MemCategory;
  ids_ = mem.alloc(MemCategory::Activations, s.ids, "ids");
  pos_ = mem.alloc(MemCategory::Activations, s.ids * c.n_rot, "rope_angles");
  if (c.has_local_layers()) pos_local_ = mem.alloc(MemCategory::Activations, s.ids * c.n_rot, "rope_angles_local");
  x_ = mem.alloc(MemCategory::Activations, s.x, "x");
  xn_ = mem.alloc(MemCategory::Activations, s.x, "x_norm");
  qkv_ = mem.alloc(MemCategory::Activations, s.qkv, "qkv");
  attn_ = mem.alloc(MemCategory::Activations, s.attn, "attn_out");
  lse_ = mem.alloc(MemCategory::Activations, s.lse, "attn_lse");
  gu_ = mem.alloc(MemCategory::Activations, s.gu, "gate_up");
  act_ = mem.alloc(MemCategory::Activations, s.act, "ffn_act");
  ce_m_ = mem.alloc(MemCategory::Activations, s.ids, "ce_max");
  ce_s_ = mem.alloc(MemCategory::Activations, s.ids, "ce_sum");
  ce_t_ = mem.alloc(MemCategory::Activations, s.ids, "ce_target_logit");
  targets_ = mem.alloc(MemCategory::Activations, s.ids, "ce_targets");
  greedy_ = mem.alloc(MemCategory::Activations, sizeof(int), "greedy_token");
  // Allocated whatever the tuning says (7.5 KiB for SmolLM2), so the plan does not depend on it.
  xq_ = mem.alloc(MemCategory::Activations, s.q8, "x_q8");
  split_part_ = mem.alloc(MemCategory::Activations, s.split_part, "attn_split_part");
  layer_sync_ = mem.alloc(MemCategory::Activations, ops::kDecodeLayerSyncInts * sizeof(cl_int), "decode_layer_sync");
  ctx.fill_zero(layer_sync_, ops::kDecodeLayerSyncInts * sizeof(cl_int));
  decode_splits_ = std::min(kMaxDecodeSplits, ops::decode_splits(ctx, decode_shape(c)));
  // Which blocks a decode row runs in one launch: fixed by the model, its weights and the tuning.
  for (int l = 0; l < c.n_layer; ++l)
    one_launch_.push_back(!c.post_norms && !c.qk_norm && !c.qkv_bias && m_.layers[l].qkv_fused() &&
                          ops::decode_layer_supported(ctx, decode_shape(c), one_launch_layer(l, pos_)));
  logits_ = mem.alloc(MemCategory::Scratch, s.logits, "logits");
  if (kv.n_layers() != int(KvStore::layers_of(c, KvKind::Global).size()) || kv.kind() != KvKind::Global)
    throw cl::ClError("Forward: the KV store given must hold the model's global-attention layers");
  if (c.has_local_layers())
    window_ = std::make_unique<KvStore>(ctx, c, KvStore::window_capacity(c, max_chunk), kv.half(), KvKind::Local);
}

Forward::~Forward() {
  for (const cl::EventHandle* e : {&ids_written_, &angles_written_, &angles_local_written_})
    if (*e) {
      const cl_event ev = e->get();
      clWaitForEvents(1, &ev);  // no throw from a destructor: a failed wait has nothing left to guard
    }
}

void Forward::reserve_window(int n) {
  if (!window_) return;
  if (window_resets_ != kv_.resets()) {  // the global store was reset: a new sequence
    window_->reset();
    window_resets_ = kv_.resets();
  }
  if (n > window_->capacity() - m_.cfg.sliding_window)
    throw cl::ClError("eval: " + std::to_string(n) + " tokens exceed the prefill chunk (" +
                      std::to_string(window_->capacity() - m_.cfg.sliding_window) +
                      ") the sliding-window store was sized for");
  // Keeping the last `sliding_window` entries is enough: a query sees the window behind it.
  if (window_->size() + n > window_->capacity()) window_->slide(m_.cfg.sliding_window);
}

void Forward::rewind_window(int n) {
  if (!window_) return;
  if (n > window_->size()) throw cl::ClError("rewind_window: " + std::to_string(n) + " entries were never appended");
  window_->set_size(window_->size() - n, window_->next_position() - n);
}

void Forward::set_input(cl::Buffer& in, int n, int k) {
  input_ = &in;
  input_rows_ = n;
  input_cols_ = k;
  input_q8_ = false;
  input_packed_ = false;
  input_round_ = ops::ActRound::None;
  input_norm_ = {};
}

void Forward::prepare_input(const ops::DeviceWeight& W, bool gemm) {
  if (round_activations_) {
    const ops::ActRound want = ops::act_round_for(W.type);
    if (input_round_ == ops::ActRound::None && want != ops::ActRound::None && !input_packed_ && !input_q8_) {
      ops::round_activations(ctx_, *input_, input_rows_, input_cols_, want);
      input_round_ = want;
    } else if (want != input_round_) {
      // The input is rounded once, in place: weights wanting another format cannot share it.
      throw SettingError("round_activations", "", "", std::string("{round_activations}: a ") + quant::traits(W.type).name +
                                  " weight multiplies an input already rounded to " +
                                  ops::act_round_name(input_round_) + " for another weight of this model; the " +
                                  "emulation handles one input format per layer input (run without it)");
    }
  }
  if (gemm && !input_packed_) {
    gemm_.set_input(*input_, input_rows_, input_cols_);
    input_packed_ = true;
  }
}

void Forward::set_normed_input(const cl::Buffer& w, int n, bool fuse, const ops::DeviceWeight& first) {
  const LlamaConfig& c = m_.cfg;
  // The norm inside the products saves a launch but makes every work-item recompute it and
  // scale each input block by the norm weight: which costs more is the device's to say. In
  // the native dot the work-group quantizes the input anyway, and the norm comes with it.
  if (fuse && (ctx_.tuning().matvec_norm_fusion || ops::matvec_native(ctx_, first))) {
    set_input(x_, n, c.n_embd);
    input_norm_ = {&w, c.rms_eps};
  } else {
    ops::rms_norm(ctx_, x_, w, xn_, n, c.n_embd, c.rms_eps);  // xn [n][n_embd]
    set_input(xn_, n, c.n_embd);
  }
}

bool Forward::int8_path(const ops::DeviceWeight& W) const {
  const auto& int8_types = ctx_.tuning().matvec_int8;
  return ops::matvec_q8_supports(W.type) &&
         std::find(int8_types.begin(), int8_types.end(), quant::traits(W.type).name) != int8_types.end();
}

bool Forward::fusable(std::initializer_list<const ops::DeviceWeight*> ws, int n) const {
  // --round-activations rounds a materialised input before its products: nothing fused.
  if (n > kMatvecMaxRows || !ctx_.tuning().matvec_fusion || round_activations_) return false;
  for (const ops::DeviceWeight* w : ws)
    if (int8_path(*w)) return false;  // the integer path quantizes its input first: no norm inside
  return true;
}

void Forward::project(const ops::DeviceWeight& W, cl::Buffer& out, int ldo, int col, bool accumulate) {
  const bool gemm = input_rows_ > kMatvecMaxRows;
  if (!input_norm_.w) prepare_input(W, gemm);  // a normed input is never rounded (fusable) nor packed (decode)
  if (gemm) return gemm_.multiply(W, out, ldo, col, accumulate);
  if (input_norm_.w) {
    if (accumulate) throw cl::ClError("project: a normed input cannot accumulate");  // matvec_norm writes y
    ops::matvec_norm(ctx_, W, *input_, input_norm_, input_rows_, out, ldo, col);
  } else if (int8_path(W)) {
    // Quantized once per input, on its first integer product (q|k|v share one, gate|up one).
    if (!input_q8_) ops::quantize_q8(ctx_, *input_, input_rows_, input_cols_, xq_);
    input_q8_ = true;
    ops::matvec_q8(ctx_, W, xq_, input_rows_, out, ldo, accumulate, col);
  } else {
    ops::matvec(ctx_, W, *input_, input_rows_, out, ldo, accumulate, col);
  }
}

void Forward::eval(const std::vector<TokenId>& tokens, const EvalOptions& opts) {
  eval(tokens.data(), static_cast<int>(tokens.size()), opts);
}

void Forward::upload_rows(const TokenId* tokens, int n, int first, int local_first) {
  const LlamaConfig& c = m_.cfg;
  // The in-order queue has run the last uploads by the time a later step read anything back;
  // waiting here covers evaluations with no read between them.
  cl::Context::wait(ids_written_);
  cl::Context::wait(angles_written_);
  cl::Context::wait(angles_local_written_);
  ids_host_.assign(tokens, tokens + n);
  ids_written_ = ctx_.write_async(ids_, ids_host_.data(), size_t(n) * sizeof(int));
  ops::rope_angles(first, n, c.n_rot, c.rope_theta, c.rope_freq_factors, angles_host_);
  angles_written_ = ctx_.write_async(pos_, angles_host_.data(), angles_host_.size() * sizeof(float));
  if (window_) {  // local layers: positions in the local store (slot == position there)
    ops::rope_angles(local_first, n, c.n_rot, c.rope_theta_local, {}, angles_local_host_);
    angles_local_written_ =
        ctx_.write_async(pos_local_, angles_local_host_.data(), angles_local_host_.size() * sizeof(float));
  }
}

void Forward::eval(const TokenId* tokens, int n, const EvalOptions& opts) {
  const LlamaConfig& c = m_.cfg;
  if (n <= 0) return;
  if (n > max_chunk_)
    throw cl::ClError("eval: " + std::to_string(n) + " tokens exceed the chunk size " + std::to_string(max_chunk_));
  if (n > kv_.free_slots())
    throw cl::ClError("eval: " + std::to_string(n) + " tokens do not fit in the KV store (" +
                      std::to_string(kv_.free_slots()) + " free slots)");
  for (int i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab)
      throw cl::ClError("eval: token id " + std::to_string(tokens[i]) + " outside the vocabulary");
  if (window_) reserve_window(n);
  upload_rows(tokens, n, kv_.next_position(), window_ ? window_->next_position() : 0);
  mass_ = opts.mass;
  mass_from_ = opts.mass_from_row;
  mass_to_ = opts.mass_to_row < 0 ? n : std::min(n, opts.mass_to_row);

  // Embedding: x = token_embd[tokens] * embd_scale                        [n][n_embd]
  ops::embed(ctx_, m_.token_embd, ids_, n, x_);
  if (c.embd_scale != 1.f) ops::scale(ctx_, x_, size_t(n) * c.n_embd, c.embd_scale);

  for (int l = 0; l < c.n_layer; ++l) layer(l, n);
  // Final norm of every row: the LM head reads xn.
  ops::rms_norm(ctx_, x_, m_.output_norm, xn_, n, c.n_embd, c.rms_eps);
  // A chunk is waited for (its callers time it and read its results); a decode row goes on
  // into the LM head and the one read of its token without a stop in between.
  if (n > 1) ctx_.finish();
  kv_.commit(n);
  if (window_) window_->commit(n);
  last_n_ = n;
}

// The attention mass that the rows [mass_from_, mass_to_) of this step pay to store layer li's
// entries, into its slice of mass_ (when the step asked for it: EvalOptions::mass).
void Forward::add_mass(KvStore& kv, int li, const ops::AttentionShape& shape, int n_past) {
  if (!mass_) return;
  ops::attention_mass(ctx_, shape, qkv_, qkv_ld_, kv.keys(li), n_past, mass_from_, mass_to_, lse_, *mass_,
                      size_t(li) * m_.cfg.n_head_kv * kv.capacity());
}

void Forward::layer(int l, int n) {
  const LlamaConfig& c = m_.cfg;
  const DeviceLayer& L = m_.layers[l];
  const int q_dim = c.n_head * c.head_dim, kv_dim = c.n_head_kv * c.head_dim;
  const bool local = window_ && c.is_local(l);
  KvStore& kv = local ? *window_ : kv_;
  const int li = kv.index_of(l), n_past = kv.size();
  ops::AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, kv.capacity(), kv.half()};
  shape.scale = c.attn_scale;
  shape.window = local ? c.sliding_window : 0;
  if (n == 1 && one_launch_[l]) {
    // The whole block in one launch: x += Wo . attention, x += Wd . GLU (decode_layer.cl).
    ops::decode_layer(ctx_, shape, one_launch_layer(l, local ? pos_local_ : pos_), x_, qkv_, kv.keys(li),
                      kv.values(li), n_past, attn_, lse_, act_, {decode_splits_, &split_part_},
                      layer_sync_);
    if (!local) add_mass(kv, li, shape, n_past);
    return;
  }

  // Attention block: x += [post_norm] Wo · attention(rope(qk_norm(Wq·xn + bq)), rope(qk_norm(Wk·xn + bk)), Wv·xn + bv)
  // with xn = rmsnorm(x) * attn_norm (biases and QK-norm where the model has them)
  set_normed_input(L.attn_norm, n, fusable({&L.wqkv, &L.wq, &L.wk, &L.wv}, n), L.qkv_fused() ? L.wqkv : L.wq);
  const cl::Buffer& angles = local ? pos_local_ : pos_;
  // Decode without QK-norm (which needs whole heads first): the biases, RoPE and the KV store
  // happen in the q|k|v product's epilogue.
  if (L.qkv_fused() && !c.qk_norm && c.head_dim % 4 == 0 && fusable({&L.wqkv}, n)) {
    const ops::RopeKv rkv{c.n_head,      c.n_head_kv,     c.head_dim,    c.n_rot, &angles,
                          &kv.keys(li),  &kv.values(li),  kv.capacity(), n_past,  kv.half(),
                          c.qkv_bias ? &L.qkv_bias : nullptr};
    ops::matvec_qkv_rope(ctx_, L.wqkv, *input_, input_norm_, n, qkv_, rkv);  // q|k|v [n][qkv_ld], k v stored
  } else {
    if (L.qkv_fused()) {
      project(L.wqkv, qkv_, qkv_ld_, 0, false);                        // q|k|v [n][qkv_ld]
    } else {
      project(L.wq, qkv_, qkv_ld_, 0, false);                          // q   [n][q_dim]
      project(L.wk, qkv_, qkv_ld_, q_dim, false);                      // k   [n][kv_dim]
      project(L.wv, qkv_, qkv_ld_, q_dim + kv_dim, false);             // v   [n][kv_dim]
    }
    if (c.qkv_bias) ops::add_bias(ctx_, qkv_, qkv_ld_, n, qkv_ld_, L.qkv_bias);  // q|k|v += bq|bk|bv
    if (c.qk_norm) {  // each q and k head normalised over head_dim, in place
      ops::rms_norm_heads(ctx_, qkv_, qkv_ld_, 0, c.n_head, c.head_dim, n, L.q_norm, c.rms_eps);
      ops::rms_norm_heads(ctx_, qkv_, qkv_ld_, q_dim, c.n_head_kv, c.head_dim, n, L.k_norm, c.rms_eps);
    }
    // RoPE on the q and k heads (adjacent in a row), keys and values into the KV store.
    ops::rope_store_kv(ctx_, qkv_, qkv_ld_, c.n_head, c.n_head_kv, c.head_dim, c.n_rot, angles, kv.keys(li),
                       kv.values(li), kv.capacity(), n_past, n, kv.half());
  }
  ops::attention(ctx_, shape, qkv_, qkv_ld_, kv.keys(li), kv.values(li), n_past, n, attn_, q_dim, lse_,
                 {decode_splits_, &split_part_});
  if (!local) add_mass(kv, li, shape, n_past);
  set_input(attn_, n, q_dim);
  if (c.post_norms) {  // xn is free again: it takes Wo's output, normed into x
    project(L.wo, xn_, c.n_embd, 0, false);                            // xn  = attn Wo^T
    ops::rms_norm_add(ctx_, xn_, L.post_attn_norm, x_, n, c.n_embd, c.rms_eps);  // x += norm(xn)
  } else {
    project(L.wo, x_, c.n_embd, 0, true);                              // x  += attn Wo^T
  }

  // Feed-forward block: x += [post_norm] W_down · (act(W_gate·xn) * (W_up·xn)), act SiLU or GELU-tanh,
  // xn = rmsnorm(x) * ffn_norm
  set_normed_input(L.ffn_norm, n, fusable({&L.w_gate_up, &L.w_gate, &L.w_up}, n),
                   L.gate_up_fused() ? L.w_gate_up : L.w_gate);
  gate_up_act(L, n);                                                   // act [n][n_ff]
  set_input(act_, n, c.n_ff);
  if (c.post_norms) {
    project(L.w_down, xn_, c.n_embd, 0, false);                        // xn  = act Wd^T
    ops::rms_norm_add(ctx_, xn_, L.post_ffn_norm, x_, n, c.n_embd, c.rms_eps);   // x += norm(xn)
  } else {
    project(L.w_down, x_, c.n_embd, 0, true);                          // x  += act Wd^T
  }
}

ops::DecodeLayer Forward::one_launch_layer(int l, const cl::Buffer& angles) const {
  const LlamaConfig& c = m_.cfg;
  const DeviceLayer& L = m_.layers[l];
  const GateUp g = gate_up_of(L, c.n_ff);
  return {&L.wqkv, &L.wo, &g.gate, &g.up, g.up_row0, c.n_ff, &L.w_down, &L.attn_norm, &L.ffn_norm,
          c.rms_eps, glu_of(c), c.n_rot, &angles};
}

void Forward::gate_up_act(const DeviceLayer& L, int n) {
  const LlamaConfig& c = m_.cfg;
  const ops::Glu act = glu_of(c);
  // Decode: one product writes act directly (gate and up rows side by side in one work-item),
  // when both are on the float path in one encoding.
  const GateUp g = gate_up_of(L, c.n_ff);
  if (fusable({&g.gate, &g.up}, n) && g.gate.type == g.up.type && g.gate.row_bytes == g.up.row_bytes) {
    ops::matvec_glu(ctx_, g.gate, g.up, g.up_row0, c.n_ff, act, *input_, input_norm_, n, act_);
    return;
  }
  if (L.gate_up_fused()) {
    project(L.w_gate_up, gu_, 2 * c.n_ff, 0, false);                   // gate|up [n][2 n_ff]
  } else {
    project(L.w_gate, gu_, 2 * c.n_ff, 0, false);                      // gate [n][n_ff]
    project(L.w_up, gu_, 2 * c.n_ff, c.n_ff, false);                   // up   [n][n_ff]
  }
  if (act == ops::Glu::GeluTanh) ops::geglu_tanh(ctx_, gu_, n, c.n_ff, act_);  // act [n][n_ff]
  else ops::swiglu(ctx_, gu_, n, c.n_ff, act_);                                // act [n][n_ff]
}

void Forward::lm_head_last_row() {
  const LlamaConfig& c = m_.cfg;
  if (last_n_ == 0) throw cl::ClError("last_logits: nothing evaluated yet");
  if (last_n_ == 1) {
    set_input(xn_, 1, c.n_embd);  // a decode row is already the first row of xn
  } else {  // move the last normed row to the front of x (free after eval) for the matvec
    ctx_.copy(xn_, x_, size_t(c.n_embd) * 4, size_t(last_n_ - 1) * c.n_embd * 4, 0);
    set_input(x_, 1, c.n_embd);
  }
  project(m_.lm_head(), logits_, c.n_vocab, 0, false);                         // logits [n_vocab]
}

const std::vector<float>& Forward::last_logits() {
  lm_head_last_row();
  logits_host_.resize(m_.cfg.n_vocab);
  ctx_.read(logits_, logits_host_.data(), logits_host_.size() * 4);
  return logits_host_;
}

TokenId Forward::last_greedy_token() {
  lm_head_last_row();
  ops::argmax_row(ctx_, logits_, m_.cfg.n_vocab, greedy_);
  TokenId token = 0;
  ctx_.read(greedy_, &token, sizeof(token));
  return token;
}

std::vector<float> Forward::token_nll(const std::vector<TokenId>& targets, int first_row, int stride) {
  const LlamaConfig& c = m_.cfg;
  const int n = static_cast<int>(targets.size());
  if (stride < 1 || first_row < 0 || first_row >= stride)
    throw cl::ClError("token_nll: rows first_row, first_row + stride, ... need stride >= 1 and 0 <= first_row < stride");
  if (n < 1 || first_row + int64_t(n - 1) * stride >= last_n_)
    throw cl::ClError("token_nll: need one target per scored row of the last eval");
  ctx_.write(targets_, targets.data(), n * sizeof(int));
  ops::ce_init(ctx_, ce_m_, ce_s_, ce_t_, n);
  const ops::DeviceWeight& head = m_.lm_head();
  if (stride == 1) {
    set_input(xn_, n, c.n_embd);
  } else {  // the scored rows of the final norm's output packed into x (free after eval)
    const size_t row = size_t(c.n_embd) * 4;
    ctx_.copy_rows(xn_, x_, row, size_t(n), row * stride, row * first_row);  // x [n][n_embd]
    set_input(x_, n, c.n_embd);
  }
  prepare_input(head, true);
  for (int v0 = 0; v0 < c.n_vocab; v0 += lm_tile_) {
    const int tile = std::min(lm_tile_, c.n_vocab - v0);
    gemm_.multiply_rows(head, v0, tile, logits_, false);                         // logits tile [n][tile]
    ops::ce_update(ctx_, logits_, n, tile, v0, targets_, ce_m_, ce_s_, ce_t_);
  }
  std::vector<float> m(n), s(n), t(n), nll(n);
  ctx_.read(ce_m_, m.data(), n * 4);
  ctx_.read(ce_s_, s.data(), n * 4);
  ctx_.read(ce_t_, t.data(), n * 4);
  for (int r = 0; r < n; ++r)
    nll[r] = targets[r] < 0 ? std::numeric_limits<float>::quiet_NaN() : m[r] + std::log(s[r]) - t[r];
  return nll;
}

}  // namespace infinipot
