// Llama-architecture hyperparameters and the weight table, read from GGUF metadata and
// validated against the tensors actually present.
#pragma once
#include <string>
#include <vector>
#include "model_loader/gguf.h"

namespace infinipot {

struct LlamaConfig {
  std::string architecture;   // "llama"
  std::string name;           // general.name, for display
  int n_layer = 0;            // llama.block_count
  int n_embd = 0;             // llama.embedding_length (d_model)
  int n_ff = 0;               // llama.feed_forward_length
  int n_head = 0;             // llama.attention.head_count
  int n_head_kv = 0;          // llama.attention.head_count_kv (GQA groups)
  int head_dim = 0;           // n_embd / n_head (== llama.rope.dimension_count)
  int n_rot = 0;              // llama.rope.dimension_count (rotated dims per head)
  int n_vocab = 0;            // rows of token_embd
  int n_ctx_train = 0;        // llama.context_length
  float rope_theta = 10000.f; // llama.rope.freq_base
  float rms_eps = 1e-5f;      // llama.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;  // no output.weight: the LM head reuses token_embd
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
};

struct WeightTable {
  const gguf::TensorInfo* token_embd;   // [n_embd, n_vocab]
  const gguf::TensorInfo* output_norm;  // [n_embd]
  const gguf::TensorInfo* output;       // [n_embd, n_vocab]; == token_embd when tied
  std::vector<LayerWeights> layers;     // n_layer
};

// Reads and checks the hyperparameters: architecture must be "llama", required keys present,
// values positive and consistent (n_embd % n_head == 0, n_head % n_head_kv == 0, ...).
// Required: general.architecture, llama.block_count, llama.embedding_length,
// llama.feed_forward_length, llama.attention.head_count, llama.context_length. Optional:
// llama.attention.head_count_kv (= head_count), llama.rope.freq_base (10000),
// llama.attention.layer_norm_rms_epsilon (1e-5), llama.rope.dimension_count (= head_dim).
// n_vocab is token_embd.weight's row count; llama.vocab_size and tokenizer.ggml.tokens, when
// present, must agree with it. RoPE scaling and a head size other than n_embd / n_head are
// refused (the runtime does not implement them).
LlamaConfig read_llama_config(const gguf::GgufFile& file);
// Finds every tensor, checks its shape against the config and that its type is supported;
// errors name the tensor, the expected and the found shape/type.
WeightTable map_weights(const gguf::GgufFile& file, const LlamaConfig& cfg);

}  // namespace infinipot
