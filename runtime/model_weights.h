// The model's weights on the device, uploaded once in their GGUF encoding
// (quantized blocks stay quantized: decode reads them directly, prefill dequantizes
// one matrix at a time into GEMM panels).
#pragma once
#include <vector>
#include "model_loader/gguf.h"
#include "model_loader/model_config.h"
#include "runtime/context.h"
#include "runtime/ops/device_weight.h"

namespace infinipot {

// Projections that read the same input are fused into one matrix when their encodings
// match (the usual case), so decode and prefill launch one kernel instead of three / two.
struct DeviceLayer {
  cl::Buffer attn_norm;       // [n_embd] float
  ops::DeviceWeight wqkv;     // [(n_head + 2 n_head_kv)*head_dim rows][n_embd]  q | k | v rows, if fused
  ops::DeviceWeight wq;       // [n_head*head_dim rows][n_embd]       (only when not fused)
  ops::DeviceWeight wk;       // [n_head_kv*head_dim rows][n_embd]    (only when not fused)
  ops::DeviceWeight wv;       // [n_head_kv*head_dim rows][n_embd]    (only when not fused)
  ops::DeviceWeight wo;       // [n_embd rows][n_head*head_dim]
  cl::Buffer ffn_norm;        // [n_embd] float
  ops::DeviceWeight w_gate_up;  // [2*n_ff rows][n_embd]  gate | up rows, if fused
  ops::DeviceWeight w_gate;   // [n_ff rows][n_embd]      (only when not fused)
  ops::DeviceWeight w_up;     // [n_ff rows][n_embd]      (only when not fused)
  ops::DeviceWeight w_down;   // [n_embd rows][n_ff]
  // Only when the config asks for them (gemma3):
  cl::Buffer q_norm;          // [head_dim] float  QK-norm of each q head
  cl::Buffer k_norm;          // [head_dim] float  QK-norm of each k head
  cl::Buffer post_attn_norm;  // [n_embd] float    norm of the attention output before the residual add
  cl::Buffer post_ffn_norm;   // [n_embd] float    norm of the FFN output before the residual add
  cl::Buffer qkv_bias;        // [(n_head + 2 n_head_kv)*head_dim] float  q | k | v biases (qwen2)
  bool qkv_fused() const { return static_cast<bool>(wqkv.buf); }
  bool gate_up_fused() const { return static_cast<bool>(w_gate_up.buf); }
};

// Where the matrices' bytes live. InPlace: in buffers the host maps (CL_MEM_ALLOC_HOST_PTR),
// read from the file straight into them and the file's pages then dropped, for devices that
// share the host's DRAM (CL_DEVICE_HOST_UNIFIED_MEMORY), where a copied weight would sit in
// DRAM twice (page cache and buffer). Copied: a staging copy written to device buffers (a
// discrete GPU's own memory). The bytes on the device are the same either way.
enum class WeightPlace { InPlace, Copied };
inline const char* weight_place_name(WeightPlace p) { return p == WeightPlace::InPlace ? "in_place" : "copied"; }

struct DeviceModel {
  LlamaConfig cfg;
  WeightPlace place = WeightPlace::Copied;
  ops::DeviceWeight token_embd;  // [n_vocab rows][n_embd]
  cl::Buffer output_norm;        // [n_embd] float
  ops::DeviceWeight output;      // [n_vocab rows][n_embd]; shares token_embd's buffer when tied
  bool output_tied = false;
  std::vector<DeviceLayer> layers;

  const ops::DeviceWeight& lm_head() const { return output_tied ? token_embd : output; }
};

// Bytes the weights take on the device (for the memory plan, before uploading).
uint64_t device_weight_bytes(const gguf::GgufFile& file, const WeightTable& table);
// Uploads every weight through the allocator (category Weights). For a cfg.rope_neox model the
// rows of wq and wk (and the QK-norm weights) are reordered within each head so that element
// i + n_rot/2 sits next to element i: the runtime's adjacent-pair RoPE then rotates exactly the
// pairs NEOX RoPE rotates, and q.k is unchanged (both sides permuted alike; v is not touched).
// InPlace where the device shares the host's memory, Copied elsewhere.
WeightPlace default_weight_place(const cl::Context& ctx);
DeviceModel upload_model(cl::Context& ctx, const gguf::GgufFile& file, const LlamaConfig& cfg,
                         const WeightTable& table, WeightPlace place);

}  // namespace infinipot
