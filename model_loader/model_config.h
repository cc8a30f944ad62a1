// The model description every supported family (model_family.h) maps its GGUF metadata into,
// and the weight table, validated against the tensors actually present. The forward pass
// reads only this description: what differs between families is data here, not a code fork.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>
#include "model_loader/gguf.h"

namespace infinipot {

// Global layers attend to every earlier position; local (sliding-window) layers only to the
// last `sliding_window` positions, the query's own included.
enum class AttentionKind { Global, Local };
// The gated feed-forward's activation: act = f(gate) * up.
enum class FfnActivation { SiLU, GeluTanh };

// (The name predates gemma3; it describes every supported architecture. `<arch>` below is
// general.architecture, the prefix of every hyperparameter key.)
struct LlamaConfig {
  std::string architecture;   // general.architecture: a row of model_families()
  std::string name;           // general.name, for display
  int n_layer = 0;            // <arch>.block_count
  int n_embd = 0;             // <arch>.embedding_length (d_model)
  int n_ff = 0;               // <arch>.feed_forward_length
  int n_head = 0;             // <arch>.attention.head_count
  int n_head_kv = 0;          // <arch>.attention.head_count_kv (GQA groups)
  int head_dim = 0;           // <arch>.attention.key_length, else n_embd / n_head
  int n_rot = 0;              // <arch>.rope.dimension_count (rotated dims per head), else head_dim
  int n_vocab = 0;            // rows of token_embd
  int n_ctx_train = 0;        // <arch>.context_length
  float rope_theta = 10000.f; // <arch>.rope.freq_base (global layers)
  // [n_rot/2] rope_freqs.weight (Llama 3 RoPE scaling): pair i's angle is divided by entry i.
  // Empty: none (also when every factor is 1). llama only.
  std::vector<float> rope_freq_factors;
  float rms_eps = 1e-5f;      // <arch>.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;  // no output.weight: the LM head reuses token_embd

  // What the architecture table (model_config.cpp) sets; the defaults are llama's.
  // RoPE pairs (i, i + n_rot/2) ("NEOX", gemma) instead of (2i, 2i+1) (llama GGUF, whose
  // converter already permuted q/k). The runtime rotates adjacent pairs only, so the loader
  // permutes the q/k rows (and QK-norm weights) of a NEOX model at upload: same dot products.
  bool rope_neox = false;
  std::vector<AttentionKind> layer_kind;  // [n_layer]; all Global for llama
  int sliding_window = 0;                 // <arch>.attention.sliding_window (Local layers)
  float rope_theta_local = 10000.f;       // <arch>.rope.freq_base_swa (Local layers), else 1e4
  bool qk_norm = false;       // RMSNorm over head_dim on each q and k head (attn_q_norm/attn_k_norm)
  bool qkv_bias = false;      // q|k|v biases added to their product, before QK-norm and RoPE (qwen2)
  bool post_norms = false;    // RMSNorm of the attention and FFN outputs before the residual add
  FfnActivation ffn_act = FfnActivation::SiLU;
  float embd_scale = 1.f;     // embeddings are multiplied by this (gemma: sqrt(n_embd))
  float attn_scale = 0.f;     // scores = q.k * attn_scale (1/sqrt(head_dim) for both families)

  bool has_local_layers() const {
    for (AttentionKind k : layer_kind)
      if (k == AttentionKind::Local) return true;
    return false;
  }
  bool is_local(int layer) const { return layer_kind.at(static_cast<size_t>(layer)) == AttentionKind::Local; }
  int n_local_layers() const {
    int n = 0;
    for (AttentionKind k : layer_kind) n += k == AttentionKind::Local;
    return n;
  }
  // Layers with global attention: the ones the full cache or the pot holds (all, for llama).
  int n_global_layers() const { return n_layer - n_local_layers(); }
};

// Shapes below are in ggml order [ne0 (contiguous), ne1].
struct LayerWeights {
  const gguf::TensorInfo* attn_norm;  // [n_embd]
  const gguf::TensorInfo* wq;         // [n_embd, n_head*head_dim]
  const gguf::TensorInfo* wk;         // [n_embd, n_head_kv*head_dim]
  const gguf::TensorInfo* wv;         // [n_embd, n_head_kv*head_dim]
  const gguf::TensorInfo* wo;         // [n_head*head_dim, n_embd]
  const gguf::TensorInfo* ffn_norm;   // [n_embd]
  const gguf::TensorInfo* w_gate;     // [n_embd, n_ff]
  const gguf::TensorInfo* w_up;       // [n_embd, n_ff]
  const gguf::TensorInfo* w_down;     // [n_ff, n_embd]
  // Only when the config says so (else nullptr):
  const gguf::TensorInfo* q_norm = nullptr;          // [head_dim]  qk_norm
  const gguf::TensorInfo* k_norm = nullptr;          // [head_dim]  qk_norm
  const gguf::TensorInfo* post_attn_norm = nullptr;  // [n_embd]    post_norms
  const gguf::TensorInfo* post_ffn_norm = nullptr;   // [n_embd]    post_norms
  const gguf::TensorInfo* bq = nullptr;              // [n_head*head_dim]     qkv_bias
  const gguf::TensorInfo* bk = nullptr;              // [n_head_kv*head_dim]  qkv_bias
  const gguf::TensorInfo* bv = nullptr;              // [n_head_kv*head_dim]  qkv_bias
};

struct WeightTable {
  const gguf::TensorInfo* token_embd;   // [n_embd, n_vocab]
  const gguf::TensorInfo* output_norm;  // [n_embd]
  const gguf::TensorInfo* output;       // [n_embd, n_vocab]; == token_embd when tied
  std::vector<LayerWeights> layers;     // n_layer
  // Row slices of fused tensors that the layers point into (a Phi-3 file's attn_qkv gives
  // wq, wk and wv; its ffn_up gives w_gate and w_up): same bytes, read as separate weights.
  std::shared_ptr<const std::deque<gguf::TensorInfo>> views;
};

// Reads and checks the hyperparameters: architecture must be a row of model_families(), required keys
// present, values positive and consistent (n_head % n_head_kv == 0, ...). With <arch> the
// architecture: required general.architecture, <arch>.block_count, <arch>.embedding_length,
// <arch>.feed_forward_length, <arch>.attention.head_count, <arch>.context_length. Optional:
// <arch>.attention.head_count_kv (= head_count), <arch>.rope.freq_base (10000),
// <arch>.attention.layer_norm_rms_epsilon (the family's default), <arch>.rope.dimension_count
// (= head_dim), <arch>.attention.key_length/value_length (the head size, equal; else
// n_embd / n_head). gemma3 also: <arch>.attention.sliding_window (required),
// <arch>.attention.sliding_window_pattern (6: five local layers, then one global),
// <arch>.rope.freq_base_swa (10000). n_vocab is token_embd.weight's row count;
// <arch>.vocab_size and tokenizer.ggml.tokens, when present, must agree with it. RoPE scaling
// and a final logit soft-cap are refused (the runtime does not implement them).
LlamaConfig read_llama_config(const gguf::GgufFile& file);
// Finds every tensor, checks its shape against the config and that its type is supported;
// errors name the tensor, the expected and the found shape/type. A tensor the forward pass
// would not read (a bias its family has not, an extra norm, LongRoPE factors) is refused by name.
WeightTable map_weights(const gguf::GgufFile& file, const LlamaConfig& cfg);

}  // namespace infinipot
