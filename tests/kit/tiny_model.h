// Random-weight llama models in GGUF, small enough to build in milliseconds, for tests of the
// loader, tokenizer and runtime without the real model. The tokenizer is a real byte-level
// BPE ("gpt2" model, "smollm" pre-tokenizer) with merges learned from a built-in English
// sample, ChatML special tokens and a SmolLM2-style chat template.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model_loader/gguf.h"
#include "tests/kit/gguf_writer.h"

namespace infinipot {

struct TinyLlamaOptions {
  int n_layer = 2;            // llama.block_count
  int n_embd = 64;            // llama.embedding_length; head_dim = n_embd / n_head
  int n_ff = 128;             // llama.feed_forward_length
  int n_head = 4;             // llama.attention.head_count (head_dim 16 by default)
  int n_head_kv = 2;          // llama.attention.head_count_kv
  int n_ctx = 256;            // llama.context_length
  float rope_theta = 10000.f; // llama.rope.freq_base
  float rms_eps = 1e-5f;      // llama.attention.layer_norm_rms_epsilon
  uint64_t seed = 42;         // weights are a pure function of (seed, tensor name)
  // Storage types. Quantized types need the row length (n_embd, or n_ff for ffn_down) to be a
  // multiple of their block size: 32, or 256 for the k-quants (e.g. n_embd 256, n_ff 512).
  gguf::TensorType matrix_type = gguf::TensorType::F32;  // attention and FFN matrices
  gguf::TensorType embd_type = gguf::TensorType::F32;    // token_embd.weight
  gguf::TensorType output_type = gguf::TensorType::F32;  // output.weight (untied only)
  // Per-tensor storage types over the above, by GGUF name ("blk.0.attn_v.weight"): layers
  // whose encodings differ, as in Q4_K_M files (the loader then fuses q|k|v or gate|up only
  // in the layers where they match). Row lengths must suit the type as above.
  std::map<std::string, gguf::TensorType> tensor_types;
  bool tied_embeddings = true;  // false: write a separate output.weight
  bool with_tokenizer = true;   // false: no tokenizer.* metadata; n_vocab must then be set
  int n_merges = 300;           // BPE merges to learn (fewer if the sample runs out of pairs)
  // 0: the tokenizer's size rounded up to a multiple of 32 ([PADn] unused tokens fill the
  // rest). Otherwise exactly this many tokens (>= the tokenizer's size).
  int n_vocab = 0;
  uint32_t alignment = 32;      // general.alignment
  std::string name = "tiny-llama";
  // "gemma3": the Gemma 3 description instead (keys under gemma3.*, QK-norm and post-norm
  // weights, GELU-tanh, sliding-window layers), same tokenizer, so the runtime's gemma paths
  // (the sliding-window store above all) can be tested without the real model. "qwen2":
  // q/k/v biases; "qwen3": QK-norm; "phi3": fused attn_qkv and gate|up in ffn_up.
  std::string arch = "llama";
  int head_dim = 0;             // 0: n_embd / n_head; else written as <arch>.attention.key_length
  // phi3: attn_qkv and ffn_up (gate | up) fused as Phi-3 files have them; false: the same
  // values as separate attn_q/k/v, ffn_gate and ffn_up tensors (the loader takes both).
  bool fused = true;
  int sliding_window = 16;      // gemma3.attention.sliding_window
  int swa_pattern = 3;          // gemma3.attention.sliding_window_pattern: 2 local layers, then a global one
  float rope_theta_local = 10000.f;  // gemma3.rope.freq_base_swa
};

// The vocabulary the tiny model uses: ids 0..2 are <|endoftext|>, <|im_start|>, <|im_end|>
// (control), then the 256 byte tokens in GPT-2 byte-to-unicode form, then merged tokens.
struct TinyVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 3 control, 5 unused (padding)
  std::vector<std::string> merges;   // "left right", highest priority first
};
TinyVocab make_tiny_vocab(int n_merges, int n_vocab);

// The writer holding the whole model, so tests can erase or replace entries before writing.
gguf::GgufWriter tiny_llama_writer(const TinyLlamaOptions& opts);
void write_tiny_llama(const std::string& path, const TinyLlamaOptions& opts);
std::vector<uint8_t> tiny_llama_bytes(const TinyLlamaOptions& opts);

// GPT-2's reversible byte -> printable unicode mapping (UTF-8 of the code point), as used in
// byte-level BPE vocabularies: byte 0x20 (space) is "Ġ", 0x0a is "Ċ".
std::string gpt2_byte_to_unicode(uint8_t byte);

}  // namespace infinipot
