#include "model_loader/model_family.h"

#include <fmt/format.h>

#include "model_loader/metadata_read.h"
#include "model_loader/model_config.h"

namespace infinipot {
namespace {

using meta::fail;

// Gemma 3's sliding-window layers (llama.cpp src/models/gemma3.cpp; google/gemma_pytorch
// config.py): a window, its own RoPE base, and a period of local layers then one global.
void read_gemma3(const gguf::GgufFile& f, LlamaConfig& cfg) {
  const std::string& a = cfg.architecture;
  cfg.sliding_window = meta::get_int(f, a + ".attention.sliding_window", 1, 0x7fffffff);
  cfg.rope_theta_local = meta::get_positive_float_or(f, a + ".rope.freq_base_swa", 10000.f);
  const std::string pattern_key = a + ".attention.sliding_window_pattern";
  if (f.has(pattern_key) && f.get(pattern_key).is_array())
    fail(f, fmt::format("metadata '{}' is a per-layer array; only a period (an integer) is supported", pattern_key));
  // Period p: layers with il % p < p - 1 are local, every p-th is global (p == 0: all local).
  const int period = meta::get_int_or(f, pattern_key, 0, 4096, 6);
  for (int il = 0; il < cfg.n_layer; ++il)
    if (period == 0 || il % period < period - 1) cfg.layer_kind[static_cast<size_t>(il)] = AttentionKind::Local;
  // Gemma 3 27B scales by n_embd / n_head instead; its query_pre_attn_scalar differs from
  // head_dim, which the file does not record, so it is refused rather than mis-scaled.
  if (cfg.n_layer == 62) fail(f, "gemma3 with 62 layers (27B) scales attention by n_embd / n_head, which is not implemented");
  const std::string softcap_key = a + ".final_logit_softcapping";
  if (f.has(softcap_key) && f.get_f32(softcap_key) != 0.f)
    fail(f, fmt::format("metadata '{}' asks for a final logit soft-cap, which is not implemented", softcap_key));
}

// Phi-3 files record the window their training used (phi3.attention.sliding_window, 2047 on
// Phi-3-mini-4k); llama.cpp runs them with full attention all the same, and so does this
// runtime, so that outputs agree. A window is read only to check it is a number.
void read_phi3(const gguf::GgufFile& f, LlamaConfig& cfg) {
  (void)meta::get_int_or(f, cfg.architecture + ".attention.sliding_window", 0, 0x7fffffff, 0);
}

std::vector<ModelFamily> make_families() {
  std::vector<ModelFamily> t;
  ModelFamily llama{"llama", "Llama 2 and 3 (3.2 with tied output and RoPE factors), SmolLM2, TinyLlama, Mistral 7B v0.1"};
  llama.rope_freqs = true;
  t.push_back(llama);

  ModelFamily gemma3{"gemma3", "Gemma 3 (270M to 12B)"};
  gemma3.rope_neox = gemma3.qk_norm = gemma3.post_norms = gemma3.gelu = gemma3.embd_scale_sqrt = true;
  gemma3.rms_eps = 1e-6f;
  gemma3.read_extra = read_gemma3;
  gemma3.extra = "sliding-window layers";
  t.push_back(gemma3);

  ModelFamily qwen2{"qwen2", "Qwen2, Qwen2.5 (0.5B to 7B)"};
  qwen2.rope_neox = qwen2.qkv_bias = true;
  qwen2.rms_eps = 1e-6f;
  t.push_back(qwen2);

  ModelFamily qwen3{"qwen3", "Qwen3 dense (0.6B to 8B)"};
  qwen3.rope_neox = qwen3.qk_norm = true;
  qwen3.rms_eps = 1e-6f;
  t.push_back(qwen3);

  ModelFamily phi3{"phi3", "Phi-3 and Phi-3.5 mini (4K context; the 128K variants' LongRoPE is refused)"};
  phi3.rope_neox = phi3.fused_qkv = phi3.fused_gate_up = true;
  phi3.read_extra = read_phi3;
  phi3.extra = "its sliding_window key read, attention kept full (as llama.cpp)";
  t.push_back(phi3);
  return t;
}

}  // namespace

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> families = make_families();
  return families;
}

const ModelFamily* find_model_family(const std::string& arch) {
  for (const ModelFamily& f : model_families())
    if (arch == f.arch) return &f;
  return nullptr;
}

std::string model_family_names() {
  std::string out;
  for (const ModelFamily& f : model_families()) out += (out.empty() ? "" : ", ") + std::string(f.arch);
  return out;
}

}  // namespace infinipot
