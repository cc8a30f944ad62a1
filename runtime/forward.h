// The forward pass on the device, for every architecture the model description (LlamaConfig)
// covers. eval() runs a chunk of tokens through every layer, appending their keys/values to
// the KV store; the results stay on the device until asked for (last-row logits for
// sampling, per-token NLL for perplexity and NuC).
//
// The KV store given (the full cache or the pot) holds the global-attention layers only. A
// model with sliding-window layers gets a second store here, of the local layers
// (KvStore::window_capacity entries), which slides before a chunk would overflow it: its cost
// is fixed by the window and the chunk, whatever the input's length or the pot's size.
#pragma once
#include <memory>
#include <vector>
#include "model_loader/tokenizer.h"
#include "runtime/kv_store.h"
#include "runtime/context.h"
#include "runtime/gemm_layer.h"
#include "runtime/model_weights.h"
#include "runtime/ops.h"

namespace infinipot {

struct EvalOptions {
  // Attention mass, for a caller that scores KV entries by the attention they receive: when
  // set, the rows [mass_from_row, mass_to_row) of this chunk (mass_to_row < 0: to its end)
  // add the attention they pay to every KV entry into
  // mass: [global store layers][n_kv_heads][capacity] (sliding-window layers measure nothing).
  cl::Buffer* mass = nullptr;
  int mass_from_row = 0;
  int mass_to_row = -1;
};

class Forward {
 public:
  // max_chunk: most tokens one eval() takes (prefill chunk); lm_tile: vocabulary rows per
  // cross-entropy tile.
  Forward(cl::Context& ctx, const DeviceModel& model, KvStore& kv, int max_chunk, int lm_tile = 4096);
  // Waits for uploads still reading the host staging (an eval that threw before any read).
  ~Forward();
  Forward(const Forward&) = delete;
  Forward& operator=(const Forward&) = delete;
  const DeviceModel& model() const { return m_; }
  // Device bytes the forward pass allocates (activations + scratch, and the local store of a
  // model with sliding-window layers, under kv_cache) for a memory plan.
  static cl::MemoryPlan plan(const LlamaConfig& cfg, int max_chunk, const cl::Tuning& tuning, bool kv_half,
                             int lm_tile = 4096);

  // Runs tokens at positions kv.next_position() ..; n <= max_chunk and must fit in the KV store.
  // A chunk's rows run to the end before eval() returns; a single row (decode) is only
  // queued, and the next read (last_greedy_token, last_logits) waits for it.
  void eval(const std::vector<TokenId>& tokens, const EvalOptions& opts = {});
  void eval(const TokenId* tokens, int n, const EvalOptions& opts = {});
  // Logits [n_vocab] of the last row of the last eval(), valid until the next call.
  const std::vector<float>& last_logits();
  // The greedy token of the last row of the last eval() (Sampler::argmax of its logits),
  // chosen on the device: a decode step reads back one int, not n_vocab floats.
  TokenId last_greedy_token();
  // -log p(targets[r] | rows <= r) for the first targets.size() rows of the last eval() (rows
  // after them are not scored: the pot's catalyst rows); targets[r] < 0 skips a row (its value
  // is NaN). Tiled over the vocabulary: no [n x n_vocab] matrix is ever held.
  // The same for the rows first_row, first_row + stride, ... of the last eval() only, one
  // target each (targets[i] is row first_row + i * stride's): the LM head multiplies those
  // rows alone (pot NuC on a subsample of rows, PolicyParams::nuc_stride).
  std::vector<float> token_nll(const std::vector<TokenId>& targets, int first_row, int stride);
  std::vector<float> token_nll(const std::vector<TokenId>& targets) { return token_nll(targets, 0, 1); }
  int max_chunk() const { return max_chunk_; }
  // --round-activations: round every product's input in place to what llama.cpp's CPU backend
  // multiplies (act_round.cl), to compare perplexity and greedy output under its numerics.
  void set_round_activations(bool on) { round_activations_ = on; }

  // The local store (sliding-window layers), null for a model without them. Mutable for pot
  // snapshots (MemoryPot::restore writes a saved local store back).
  const KvStore* window_store() const { return window_.get(); }
  KvStore* window_store() { return window_.get(); }
  // Evaluations the caller will take back (rows evaluated only to be scored): reserve_window
  // slides now if n more would not fit, so they do not slide the local store and
  // rewind_window(n) can drop them again, as KvStore::set_size does in the global store.
  // No-ops without sliding-window layers.
  void reserve_window(int n);
  void rewind_window(int n);

 private:
  // Projections of one input: set_input once, then project() per weight matrix:
  // out[:, col .. col+W.rows) (+)= in[n][W.cols] W^T. Few rows (decode) read the quantized
  // weights directly (matvec, or matvec_q8 over the input quantized to 8 bits for the weight
  // types the tuning's matvec_int8 lists); more go through the GEMM layer.
  void set_input(cl::Buffer& in, int n, int k);
  // Before the first product of W over the current input: its --round-activations rounding,
  // and the GEMM layer's packing of it when the product goes through the GEMM (gemm).
  void prepare_input(const ops::DeviceWeight& W, bool gemm);
  void project(const ops::DeviceWeight& W, cl::Buffer& out, int ldo, int col, bool accumulate);
  // The input of the next products is rmsnorm(x_) * w: decode products of the float path read
  // x_ and norm it themselves when `fuse` and the tuning's matvec_norm_fusion say so (matvec_norm,
  // matvec_glu, matvec_qkv_rope); otherwise xn_ is written.
  void set_normed_input(const cl::Buffer& w, int n, bool fuse, const ops::DeviceWeight& first);  // first: its first reader
  bool int8_path(const ops::DeviceWeight& W) const;  // decode product in integers (matvec_int8)
  // Whether decode products with these weights can take the norm / GLU into the matvec.
  bool fusable(std::initializer_list<const ops::DeviceWeight*> ws, int n) const;
  // Feed-forward gate|up and activation into act_, from the current input.
  void gate_up_act(const DeviceLayer& L, int n);
  // One transformer block: attention, then the gated feed-forward, each added into x_.
  void layer(int l, int n);
  void add_mass(KvStore& kv, int li, const ops::AttentionShape& shape, int n_past);
  // A decode row's block in one launch (tuning decode_layer_launch, ops::decode_layer_supported).
  ops::DecodeLayer one_launch_layer(int l, const cl::Buffer& angles) const;
  // Writes the token ids and RoPE tables of rows at positions first.. (and the local layers'
  // from local_first) through host staging that persists, without waiting for the copies.
  void upload_rows(const TokenId* tokens, int n, int first, int local_first);
  // The LM head of the last row of the last eval() into logits_.
  void lm_head_last_row();

  cl::Context& ctx_;
  const DeviceModel& m_;
  KvStore& kv_;
  int max_chunk_;
  int lm_tile_;
  int last_n_ = 0;
  int qkv_ld_ = 0;  // (n_head + 2 n_head_kv) * head_dim
  std::unique_ptr<KvStore> window_;  // sliding-window layers (null: none)
  int window_resets_ = -1;           // kv_.resets() when window_ was last restarted
  cl::Buffer* mass_ = nullptr;  // the current eval()'s EvalOptions::mass, and its rows
  int mass_from_ = 0, mass_to_ = 0;

  cl::Buffer ids_;   // [max_chunk] int
  cl::Buffer pos_;   // [max_chunk][n_rot/2] float2: RoPE (cos, sin) of each token's position
  cl::Buffer pos_local_;  // [max_chunk][n_rot/2] float2: the same at rope_theta_local (local layers only)
  cl::Buffer x_;     // [max_chunk][n_embd]   residual stream
  cl::Buffer xn_;    // [max_chunk][n_embd]   normed input of a block; final norm output
  cl::Buffer qkv_;   // [max_chunk][qkv_ld]   q | k | v
  cl::Buffer attn_;  // [max_chunk][n_head*head_dim]
  cl::Buffer lse_;   // [max_chunk][n_head]
  cl::Buffer split_part_;   // [n_head][kMaxDecodeSplits][head_dim + 2]: decode attention's partials
  cl::Buffer layer_sync_;   // [ops::kDecodeLayerSyncInts] ints, zero between launches
  std::vector<bool> one_launch_;  // [n_layer]: a decode row runs block l in one launch
  int decode_splits_ = 1;   // items per KV head of a decode row's attention (ops::decode_splits)
  cl::Buffer gu_;    // [max_chunk][2*n_ff]   gate | up
  cl::Buffer act_;   // [max_chunk][n_ff]
  GemmLayer gemm_;   // prefill products (its buffers: category gemm)
  cl::Buffer* input_ = nullptr;
  int input_rows_ = 0;
  int input_cols_ = 0;
  bool input_packed_ = false;  // the GEMM layer holds the current input
  bool round_activations_ = false;
  ops::ActRound input_round_ = ops::ActRound::None;  // how the current input has been rounded
  bool input_q8_ = false;  // xq_ holds the current input (tuning matvec_int8)
  ops::RowNorm input_norm_;  // set: the input is x_, and products norm it (set_normed_input)
  cl::Buffer xq_;            // [kMatvecMaxRows][widest input / 32] Q8 blocks (ops::quantize_q8)
  cl::Buffer logits_;  // [max(n_vocab, max_chunk*lm_tile)] floats: decode logits / CE tile
  cl::Buffer ce_m_, ce_s_, ce_t_, targets_;  // [max_chunk] each
  cl::Buffer greedy_;  // [1] int: last_greedy_token's answer
  // Host side of the per-row uploads (kept, so a decode step allocates nothing), each staging
  // vector untouched until its write's event completes.
  std::vector<TokenId> ids_host_;
  std::vector<float> angles_host_, angles_local_host_;
  cl::EventHandle ids_written_, angles_written_, angles_local_written_;
  std::vector<float> logits_host_;  // [n_vocab]: last_logits()
};

}  // namespace infinipot
