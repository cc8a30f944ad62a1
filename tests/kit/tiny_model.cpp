// Writes a random-weight llama GGUF shaped like SmolLM2 (same metadata keys, tensor names,
// tokenizer kind and chat template) at a tiny size. Weight scales keep activations O(1):
// matrices ~ N(0, 0.5/sqrt(fan_in)), embeddings ~ N(0, 0.5), norm weights ~ 1 + N(0, 0.05).
#include "tests/kit/tiny_model.h"

#include <fmt/format.h>

#include <cmath>

#include "model_loader/quant.h"

namespace infinipot {
namespace {

using gguf::GgufError;
using gguf::GgufWriter;
using gguf::TensorType;

constexpr const char* kChatTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// splitmix64: tiny, portable and good enough for test weights; std:: distributions are not
// reproducible across standard libraries.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  float normal() {  // Box-Muller
    return static_cast<float>(std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()));
  }

 private:
  uint64_t state_;
};

uint64_t hash_name(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::vector<float> random_values(uint64_t seed, const std::string& name, int64_t n, float mean,
                                 float stddev) {
  Rng rng(hash_name(seed, name));
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = mean + stddev * rng.normal();
  return v;
}

void check_block(TensorType t, int64_t row, const char* what) {
  const quant::TypeTraits& tr = quant::traits(t);
  if (!tr.supported || row % tr.block_elems != 0) {
    throw GgufError(fmt::format("tiny model: {} type {} needs a supported type with rows (here {}) "
                                "a multiple of its block size {}", what, tr.name, row, tr.block_elems));
  }
}

void validate(const TinyLlamaOptions& o) {
  if (o.n_layer <= 0 || o.n_embd <= 0 || o.n_ff <= 0 || o.n_head <= 0 || o.n_head_kv <= 0 ||
      o.n_ctx <= 0 || (o.head_dim == 0 && o.n_embd % o.n_head != 0) || o.n_head % o.n_head_kv != 0) {
    throw GgufError(fmt::format("tiny model: inconsistent sizes (n_layer {}, n_embd {}, n_ff {}, "
                                "n_head {}, n_head_kv {}, n_ctx {})", o.n_layer, o.n_embd, o.n_ff,
                                o.n_head, o.n_head_kv, o.n_ctx));
  }
  if (o.arch != "llama" && o.arch != "gemma3" && o.arch != "qwen2" && o.arch != "qwen3" && o.arch != "phi3")
    throw GgufError("tiny model: arch must be llama, gemma3, qwen2, qwen3 or phi3, got " + o.arch);
  if (!o.with_tokenizer && o.n_vocab <= 0) {
    throw GgufError("tiny model: without a tokenizer, n_vocab must be set");
  }
  check_block(o.matrix_type, o.n_embd, "matrix_type");
  check_block(o.matrix_type, o.n_ff, "matrix_type (ffn_down rows are n_ff long)");
  check_block(o.embd_type, o.n_embd, "embd_type");
  if (!o.tied_embeddings) check_block(o.output_type, o.n_embd, "output_type");
}

int head_dim_of(const TinyLlamaOptions& o) { return o.head_dim > 0 ? o.head_dim : o.n_embd / o.n_head; }

void add_metadata(GgufWriter& w, const TinyLlamaOptions& o) {
  const std::string& a = o.arch;
  const int hd = head_dim_of(o);
  w.set_string("general.architecture", a);
  w.set_string("general.type", "model");
  w.set_string("general.name", o.name);
  w.set_u32(a + ".block_count", static_cast<uint32_t>(o.n_layer));
  w.set_u32(a + ".context_length", static_cast<uint32_t>(o.n_ctx));
  w.set_u32(a + ".embedding_length", static_cast<uint32_t>(o.n_embd));
  w.set_u32(a + ".feed_forward_length", static_cast<uint32_t>(o.n_ff));
  w.set_u32(a + ".attention.head_count", static_cast<uint32_t>(o.n_head));
  w.set_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(o.n_head_kv));
  w.set_f32(a + ".rope.freq_base", o.rope_theta);
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", o.rms_eps);
  w.set_u32(a + ".rope.dimension_count", static_cast<uint32_t>(hd));
  w.set_u32("general.file_type", static_cast<uint32_t>(o.matrix_type));
  if (a == "gemma3" || o.head_dim > 0) {
    w.set_u32(a + ".attention.key_length", static_cast<uint32_t>(hd));
    w.set_u32(a + ".attention.value_length", static_cast<uint32_t>(hd));
  }
  if (a == "gemma3") {
    w.set_u32(a + ".attention.sliding_window", static_cast<uint32_t>(o.sliding_window));
    w.set_u32(a + ".attention.sliding_window_pattern", static_cast<uint32_t>(o.swa_pattern));
    w.set_f32(a + ".rope.freq_base_swa", o.rope_theta_local);
  }
}

void add_tokenizer(GgufWriter& w, const TinyVocab& v) {
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "smollm");
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  w.set_i32_array("tokenizer.ggml.token_type", v.token_types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);      // <|im_start|>, as in SmolLM2
  w.set_u32("tokenizer.ggml.eos_token_id", 2);      // <|im_end|>
  w.set_u32("tokenizer.ggml.unknown_token_id", 0);  // <|endoftext|>
  w.set_u32("tokenizer.ggml.padding_token_id", 2);
  w.set_string("tokenizer.chat_template", kChatTemplate);
}

}  // namespace

GgufWriter tiny_llama_writer(const TinyLlamaOptions& o) {
  validate(o);
  GgufWriter w(o.alignment);
  add_metadata(w, o);
  int64_t n_vocab = o.n_vocab;
  if (o.with_tokenizer) {
    TinyVocab v = make_tiny_vocab(o.n_merges, o.n_vocab);
    n_vocab = static_cast<int64_t>(v.tokens.size());
    add_tokenizer(w, v);
  }
  w.set_u32(o.arch + ".vocab_size", static_cast<uint32_t>(n_vocab));

  const int64_t embd = o.n_embd, ff = o.n_ff;
  const int64_t hd = head_dim_of(o), q_dim = int64_t{o.n_head} * hd, kv_dim = int64_t{o.n_head_kv} * hd;
  auto matrix = [&](const std::string& name, TensorType type, int64_t cols, int64_t rows, float stddev) {
    const auto over = o.tensor_types.find(name);
    if (over != o.tensor_types.end()) type = over->second;
    w.add_tensor_f32(name, type, {cols, rows}, random_values(o.seed, name, cols * rows, 0.f, stddev));
  };
  // Row-wise concatenation of matrices named `parts`, values as each would have on its own.
  auto fused_matrix = [&](const std::string& name, TensorType type, int64_t cols,
                          const std::vector<std::pair<std::string, int64_t>>& parts, float stddev) {
    std::vector<float> values;
    int64_t rows = 0;
    for (const auto& [part, n] : parts) {
      const std::vector<float> v = random_values(o.seed, part, cols * n, 0.f, stddev);
      values.insert(values.end(), v.begin(), v.end());
      rows += n;
    }
    w.add_tensor_f32(name, type, {cols, rows}, values);
  };
  auto norm = [&](const std::string& name, int64_t n = 0) {
    if (n == 0) n = embd;
    w.add_tensor_f32(name, TensorType::F32, {n}, random_values(o.seed, name, n, 1.f, 0.05f));
  };
  const float embd_std = 0.5f, ff_std = 0.5f / std::sqrt(static_cast<float>(ff));
  const float in_std = 0.5f / std::sqrt(static_cast<float>(embd));

  matrix("token_embd.weight", o.embd_type, embd, n_vocab, embd_std);
  norm("output_norm.weight");
  if (!o.tied_embeddings) matrix("output.weight", o.output_type, embd, n_vocab, in_std);
  for (int i = 0; i < o.n_layer; ++i) {
    auto name = [i](const char* part) { return fmt::format("blk.{}.{}.weight", i, part); };
    auto bias = [&](const char* part, int64_t n) {
      const std::string b = fmt::format("blk.{}.{}.bias", i, part);
      w.add_tensor_f32(b, TensorType::F32, {n}, random_values(o.seed, b, n, 0.f, 0.5f));
    };
    norm(name("attn_norm"));
    if (o.arch == "phi3" && o.fused) {
      fused_matrix(name("attn_qkv"), o.matrix_type, embd,
                   {{name("attn_q"), q_dim}, {name("attn_k"), kv_dim}, {name("attn_v"), kv_dim}}, in_std);
    } else {
      matrix(name("attn_q"), o.matrix_type, embd, q_dim, in_std);
      matrix(name("attn_k"), o.matrix_type, embd, kv_dim, in_std);
      matrix(name("attn_v"), o.matrix_type, embd, kv_dim, in_std);
    }
    if (o.arch == "qwen2") {
      bias("attn_q", q_dim);
      bias("attn_k", kv_dim);
      bias("attn_v", kv_dim);
    }
    matrix(name("attn_output"), o.matrix_type, q_dim, embd, in_std);
    norm(name("ffn_norm"));
    if (o.arch == "phi3" && o.fused) {
      fused_matrix(name("ffn_up"), o.matrix_type, embd, {{name("ffn_gate"), ff}, {name("ffn_up"), ff}}, in_std);
    } else {
      matrix(name("ffn_gate"), o.matrix_type, embd, ff, in_std);
      matrix(name("ffn_up"), o.matrix_type, embd, ff, in_std);
    }
    matrix(name("ffn_down"), o.matrix_type, ff, embd, ff_std);
    if (o.arch == "qwen3") {
      norm(name("attn_q_norm"), hd);
      norm(name("attn_k_norm"), hd);
    }
    if (o.arch == "gemma3") {
      norm(name("attn_q_norm"), hd);
      norm(name("attn_k_norm"), hd);
      norm(name("post_attention_norm"));
      norm(name("post_ffw_norm"));
    }
  }
  return w;
}

std::vector<uint8_t> tiny_llama_bytes(const TinyLlamaOptions& opts) {
  return tiny_llama_writer(opts).to_bytes();
}

void write_tiny_llama(const std::string& path, const TinyLlamaOptions& opts) {
  tiny_llama_writer(opts).write(path);
}

}  // namespace infinipot
