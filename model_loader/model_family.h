// The model families infinipot runs, as one table: each row says what a family's GGUF files
// hold beyond the llama block and how its forward pass differs. read_llama_config copies a row
// into the description (LlamaConfig) the forward pass reads; nothing below model_loader/ asks
// which family a model is. A new family is a row here plus the ops it lacks.
#pragma once
#include <string>
#include <vector>

#include "model_loader/gguf.h"

namespace infinipot {

struct LlamaConfig;

struct ModelFamily {
  const char* arch;    // general.architecture, the prefix of its hyperparameter keys
  const char* models;  // what it covers, for `inspect --families` and docs/models.md
  // RoPE pairs (i, i + n_rot/2) ("NEOX") instead of adjacent ones (llama's converter permuted q/k).
  bool rope_neox = false;
  bool qk_norm = false;      // blk.N.attn_{q,k}_norm.weight [head_dim]: RMSNorm of each q and k head
  bool post_norms = false;   // blk.N.post_attention_norm / post_ffw_norm [n_embd]
  bool qkv_bias = false;     // blk.N.attn_{q,k,v}.bias, added to the q|k|v product
  bool fused_qkv = false;    // blk.N.attn_qkv.weight [n_embd, q_dim + 2 kv_dim] may replace attn_q/k/v
  bool fused_gate_up = false;  // blk.N.ffn_up.weight [n_embd, 2 n_ff] holds gate | up (no ffn_gate)
  bool rope_freqs = false;   // rope_freqs.weight [n_rot/2] (Llama 3 RoPE factors) is read
  bool gelu = false;         // GELU-tanh gate (gemma); else SiLU
  bool embd_scale_sqrt = false;  // embeddings times sqrt(n_embd) (gemma)
  float rms_eps = 1e-5f;     // when the file has no <arch>.attention.layer_norm_rms_epsilon
  // Family-specific metadata beyond the row (gemma3's sliding windows and refusals); may be null.
  void (*read_extra)(const gguf::GgufFile& file, LlamaConfig& cfg) = nullptr;
  const char* extra = "";  // what read_extra reads, for listings
};

const std::vector<ModelFamily>& model_families();
// The row for general.architecture, or nullptr.
const ModelFamily* find_model_family(const std::string& arch);
// "llama, gemma3, qwen2, qwen3, phi3" (for errors and listings).
std::string model_family_names();

}  // namespace infinipot
