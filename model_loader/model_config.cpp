// Model hyperparameters (every family of model_family.h) from GGUF metadata and the weight table, each checked against the
// tensors in the file so the runtime can trust every shape. Errors start with the file name
// and say which key or tensor is wrong, what was expected and where that expectation came
// from.
#include "model_loader/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "model_loader/metadata_read.h"
#include "model_loader/model_family.h"
#include "model_loader/quant.h"

namespace infinipot {

using gguf::GgufError;
using gguf::GgufFile;
using gguf::TensorInfo;
using gguf::TensorType;

namespace {

constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
constexpr int64_t kDeviceRowMultiple = 32;

using meta::fail;
using meta::get_int;
using meta::get_int_or;
using meta::get_positive_float_or;
using meta::shape_str;

// Llama 3's RoPE frequency factors (rope_freqs.weight, [n_rot/2] F32, each finite and positive):
// pair i's angle is divided by factor i. Empty when absent or all 1 (the same angles).
std::vector<float> read_rope_freq_factors(const GgufFile& f, int n_rot) {
  const TensorInfo* t = f.find_tensor("rope_freqs.weight");
  if (t == nullptr) return {};
  const std::vector<int64_t> expected = {n_rot / 2};
  if (t->type != TensorType::F32 || t->shape != expected)
    fail(f, fmt::format("tensor 'rope_freqs.weight' has type {} and shape {}; RoPE frequency factors must be F32 of "
                        "shape {} (half the rotated dimensions)",
                        quant::traits(t->type).name, shape_str(t->shape), shape_str(expected)));
  const float* v = reinterpret_cast<const float*>(f.tensor_data(*t));
  std::vector<float> factors(v, v + n_rot / 2);
  for (size_t i = 0; i < factors.size(); ++i)
    if (!std::isfinite(factors[i]) || factors[i] <= 0.f)
      fail(f, fmt::format("tensor 'rope_freqs.weight' entry {} is {}; RoPE frequency factors must be positive", i,
                          factors[i]));
  if (std::all_of(factors.begin(), factors.end(), [](float x) { return x == 1.0f; })) return {};
  return factors;
}

// Looks up one weight and checks shape and type. `from` names the metadata the expected
// shape was derived from, so a mismatch says which hyperparameter disagrees with the tensor.
const TensorInfo* require_tensor(const GgufFile& f, const std::string& name,
                                 const std::vector<int64_t>& expected, const std::string& from,
                                 bool is_norm) {
  const TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) {
    fail(f, fmt::format("missing tensor '{}' (expected shape {} from {})", name,
                        shape_str(expected), from));
  }
  if (t->shape != expected) {
    fail(f, fmt::format("tensor '{}' has shape {}, expected {} from {}", name,
                        shape_str(t->shape), shape_str(expected), from));
  }
  const quant::TypeTraits& tr = quant::traits(t->type);
  if (is_norm && t->type != TensorType::F32) {
    fail(f, fmt::format("tensor '{}' has type {}; norm weights and biases must be F32", name, tr.name));
  }
  if (!tr.on_device) {
    fail(f, fmt::format("tensor '{}' has type {}, which is not supported (supported: {})", name,
                        tr.name, quant::device_type_names()));
  }
  // The device matrix kernels read rows in 32-element steps (runtime/model_weights.cpp checks
  // it again at upload); refusing here says so before any device work, and lets inspect say it.
  if (!is_norm && t->shape[0] % kDeviceRowMultiple != 0) {
    fail(f, fmt::format("tensor '{}' has rows of {} elements; the device kernels need a multiple of {}",
                        name, t->shape[0], kDeviceRowMultiple));
  }
  return t;
}

void read_vocab_size(const GgufFile& f, LlamaConfig& cfg) {
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) fail(f, "missing tensor 'token_embd.weight' (the token embedding table)");
  if (embd->shape.size() != 2 || embd->shape[0] != cfg.n_embd) {
    fail(f, fmt::format("tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab] from "
                        "{}.embedding_length", shape_str(embd->shape), cfg.n_embd, cfg.architecture));
  }
  if (embd->shape[1] > kIntMax) {
    fail(f, fmt::format("tensor 'token_embd.weight' has {} rows; at most {} tokens are supported",
                        embd->shape[1], kIntMax));
  }
  cfg.n_vocab = static_cast<int>(embd->shape[1]);
  const std::string vocab_key = cfg.architecture + ".vocab_size";
  if (f.has(vocab_key)) {
    uint64_t declared = f.get_u64(vocab_key);
    if (declared != static_cast<uint64_t>(cfg.n_vocab)) {
      fail(f, fmt::format("metadata '{}' is {} but tensor 'token_embd.weight' has "
                          "{} rows (one per token)", vocab_key, declared, cfg.n_vocab));
    }
  }
  if (f.has("tokenizer.ggml.tokens")) {
    const gguf::Value& tokens = f.get("tokenizer.ggml.tokens");
    if (!tokens.is_array()) fail(f, "metadata 'tokenizer.ggml.tokens' is not an array");
    if (tokens.array.size() != static_cast<size_t>(cfg.n_vocab)) {
      fail(f, fmt::format("metadata 'tokenizer.ggml.tokens' has {} entries but tensor "
                          "'token_embd.weight' has {} rows (one per token)",
                          tokens.array.size(), cfg.n_vocab));
    }
  }
}

}  // namespace

namespace {

// What differs between the families, from their row in the table (model_family.cpp): the
// forward pass reads these fields.
void apply_family(const GgufFile& f, const ModelFamily& fam, LlamaConfig& cfg) {
  cfg.layer_kind.assign(static_cast<size_t>(cfg.n_layer), AttentionKind::Global);
  cfg.rope_neox = fam.rope_neox;
  cfg.qk_norm = fam.qk_norm;
  cfg.post_norms = fam.post_norms;
  cfg.qkv_bias = fam.qkv_bias;
  cfg.ffn_act = fam.gelu ? FfnActivation::GeluTanh : FfnActivation::SiLU;
  if (fam.embd_scale_sqrt) cfg.embd_scale = std::sqrt(static_cast<float>(cfg.n_embd));
  if (fam.read_extra) fam.read_extra(f, cfg);
}

}  // namespace

LlamaConfig read_llama_config(const GgufFile& f) {
  LlamaConfig cfg;
  cfg.architecture = f.get_string("general.architecture");
  const std::string& a = cfg.architecture;
  const ModelFamily* fam = find_model_family(a);
  if (fam == nullptr)
    fail(f, fmt::format("unsupported architecture '{}' (general.architecture): supported are {}", a,
                        model_family_names()));
  if (f.has("general.name") && f.get("general.name").type == gguf::ValueType::STRING) {
    cfg.name = f.get_string("general.name");
  }
  cfg.n_layer = get_int(f, a + ".block_count", 1, 4096);
  cfg.n_embd = get_int(f, a + ".embedding_length", 1, 1 << 20);
  cfg.n_ff = get_int(f, a + ".feed_forward_length", 1, 1 << 24);
  cfg.n_head = get_int(f, a + ".attention.head_count", 1, 4096);
  // The head size is <arch>.attention.key_length where the file says (Gemma 3 270M: 4 heads of
  // 256 over 640; Qwen3: 128), else n_embd / n_head, as llama.cpp reads it for every family.
  const std::string key_len = a + ".attention.key_length", value_len = a + ".attention.value_length";
  if (f.has(key_len)) {
    cfg.head_dim = get_int(f, key_len, 1, 1 << 16);
  } else {
    if (cfg.n_embd % cfg.n_head != 0)
      fail(f, fmt::format("{0}.embedding_length {1} is not divisible by {0}.attention.head_count {2} (and no {3} "
                          "gives the head size)",
                          a, cfg.n_embd, cfg.n_head, key_len));
    cfg.head_dim = cfg.n_embd / cfg.n_head;
  }
  cfg.n_head_kv = get_int_or(f, a + ".attention.head_count_kv", 1, cfg.n_head, cfg.n_head);
  cfg.n_ctx_train = get_int(f, a + ".context_length", 1, kIntMax);
  if (cfg.n_head % cfg.n_head_kv != 0) {
    fail(f, fmt::format("{0}.attention.head_count {1} is not divisible by {0}.attention.head_count_kv {2}", a,
                        cfg.n_head, cfg.n_head_kv));
  }
  const int v = get_int_or(f, value_len, 1, 1 << 16, cfg.head_dim);
  if (v != cfg.head_dim) {
    fail(f, fmt::format("metadata '{}' is {} but the key head size is {}; different key and value sizes are not "
                        "supported",
                        value_len, v, cfg.head_dim));
  }
  cfg.n_rot = get_int_or(f, a + ".rope.dimension_count", 1, cfg.head_dim, cfg.head_dim);
  if (cfg.n_rot % 2 != 0) {
    fail(f, fmt::format("metadata '{}.rope.dimension_count' is {}; expected an even number", a, cfg.n_rot));
  }
  cfg.rope_theta = get_positive_float_or(f, a + ".rope.freq_base", 10000.f);
  if (fam->rope_freqs) cfg.rope_freq_factors = read_rope_freq_factors(f, cfg.n_rot);
  cfg.rms_eps = get_positive_float_or(f, a + ".attention.layer_norm_rms_epsilon", fam->rms_eps);
  // Ignoring RoPE scaling would silently give wrong outputs past the original context.
  if (f.has(a + ".rope.scaling.type")) {
    std::string scaling = f.get_string(a + ".rope.scaling.type");
    if (scaling != "none") {
      fail(f, fmt::format("RoPE scaling '{}' ({}.rope.scaling.type) is not supported", scaling, a));
    }
  }
  read_vocab_size(f, cfg);
  cfg.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  apply_family(f, *fam, cfg);
  cfg.attn_scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
  return cfg;
}

namespace {

// A tensor the forward pass would not read means the file needs something this runtime does
// not compute (biases, extra norms, RoPE factors on gemma3): running it anyway would give
// wrong outputs without a word, so it is refused by name. `fused` are the tensors read
// through row views.
void refuse_unused_tensors(const GgufFile& f, const LlamaConfig& cfg, const WeightTable& w,
                           const std::set<const TensorInfo*>& fused) {
  std::set<const TensorInfo*> used = fused;
  used.insert({w.token_embd, w.output_norm, w.output});
  for (const LayerWeights& l : w.layers)
    used.insert({l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.w_gate, l.w_up, l.w_down, l.q_norm, l.k_norm,
                 l.post_attn_norm, l.post_ffn_norm, l.bq, l.bk, l.bv});
  for (const TensorInfo& t : f.tensors()) {
    if (used.count(&t)) continue;
    if (t.name == "rope_freqs.weight" && find_model_family(cfg.architecture)->rope_freqs) continue;  // read_llama_config
    fail(f, fmt::format("tensor '{}' is not part of the {} forward pass this runtime computes (a bias or another "
                        "extra it would ignore, giving wrong outputs); this model needs features infinipot does not "
                        "implement",
                        t.name, cfg.architecture));
  }
}

// Rows [row0, row0 + rows) of a 2-D tensor, as a tensor of its own (the bytes in place).
TensorInfo row_view(const TensorInfo& t, const std::string& name, int64_t row0, int64_t rows) {
  const uint64_t row_bytes = quant::row_bytes(t.type, t.shape[0]);
  TensorInfo v = t;
  v.name = name;
  v.shape = {t.shape[0], rows};
  v.offset = t.offset + static_cast<uint64_t>(row0) * row_bytes;
  v.n_bytes = static_cast<uint64_t>(rows) * row_bytes;
  return v;
}

}  // namespace

WeightTable map_weights(const GgufFile& f, const LlamaConfig& cfg) {
  const ModelFamily& fam = *find_model_family(cfg.architecture);
  const int64_t embd = cfg.n_embd, vocab = cfg.n_vocab, ff = cfg.n_ff, hd = cfg.head_dim;
  const int64_t q_dim = int64_t{cfg.n_head} * cfg.head_dim;
  const int64_t kv_dim = int64_t{cfg.n_head_kv} * cfg.head_dim;
  const std::string a = cfg.architecture;
  const std::string from_embd = a + ".embedding_length";
  const std::string from_vocab = a + ".embedding_length and the token_embd.weight rows";
  const std::string from_q = a + ".embedding_length and " + a + ".attention.head_count";
  const std::string from_kv = a + ".embedding_length and " + a + ".attention.head_count_kv";
  const std::string from_qkv = a + ".embedding_length and " + a + ".attention.head_count(_kv): q | k | v rows";
  const std::string from_ff = a + ".embedding_length and " + a + ".feed_forward_length";
  const std::string from_gate_up = a + ".embedding_length and " + a + ".feed_forward_length: gate | up rows";
  const std::string from_hd = "the head size (" + a + ".attention.key_length)";

  WeightTable w{};
  auto views = std::make_shared<std::deque<TensorInfo>>();
  std::set<const TensorInfo*> fused;
  auto view = [&](const TensorInfo* t, const std::string& name, int64_t row0, int64_t rows) {
    views->push_back(row_view(*t, name, row0, rows));
    return &views->back();
  };
  w.token_embd = require_tensor(f, "token_embd.weight", {embd, vocab}, from_vocab, false);
  w.output_norm = require_tensor(f, "output_norm.weight", {embd}, from_embd, true);
  w.output = cfg.tied_embeddings ? w.token_embd
                                 : require_tensor(f, "output.weight", {embd, vocab}, from_vocab, false);
  w.layers.reserve(static_cast<size_t>(cfg.n_layer));
  for (int i = 0; i < cfg.n_layer; ++i) {
    auto name = [i](const char* part) { return fmt::format("blk.{}.{}.weight", i, part); };
    auto bias = [i](const char* part) { return fmt::format("blk.{}.{}.bias", i, part); };
    LayerWeights l{};
    l.attn_norm = require_tensor(f, name("attn_norm"), {embd}, from_embd, true);
    if (fam.fused_qkv && f.find_tensor(name("attn_qkv")) != nullptr) {
      const TensorInfo* qkv = require_tensor(f, name("attn_qkv"), {embd, q_dim + 2 * kv_dim}, from_qkv, false);
      fused.insert(qkv);
      l.wq = view(qkv, name("attn_qkv") + "[q]", 0, q_dim);
      l.wk = view(qkv, name("attn_qkv") + "[k]", q_dim, kv_dim);
      l.wv = view(qkv, name("attn_qkv") + "[v]", q_dim + kv_dim, kv_dim);
    } else {
      l.wq = require_tensor(f, name("attn_q"), {embd, q_dim}, from_q, false);
      l.wk = require_tensor(f, name("attn_k"), {embd, kv_dim}, from_kv, false);
      l.wv = require_tensor(f, name("attn_v"), {embd, kv_dim}, from_kv, false);
    }
    if (cfg.qkv_bias) {
      l.bq = require_tensor(f, bias("attn_q"), {q_dim}, from_q, true);
      l.bk = require_tensor(f, bias("attn_k"), {kv_dim}, from_kv, true);
      l.bv = require_tensor(f, bias("attn_v"), {kv_dim}, from_kv, true);
    }
    l.wo = require_tensor(f, name("attn_output"), {q_dim, embd}, from_q, false);
    l.ffn_norm = require_tensor(f, name("ffn_norm"), {embd}, from_embd, true);
    if (fam.fused_gate_up && f.find_tensor(name("ffn_gate")) == nullptr) {
      const TensorInfo* gate_up = require_tensor(f, name("ffn_up"), {embd, 2 * ff}, from_gate_up, false);
      fused.insert(gate_up);
      l.w_gate = view(gate_up, name("ffn_up") + "[gate]", 0, ff);
      l.w_up = view(gate_up, name("ffn_up") + "[up]", ff, ff);
    } else {
      l.w_gate = require_tensor(f, name("ffn_gate"), {embd, ff}, from_ff, false);
      l.w_up = require_tensor(f, name("ffn_up"), {embd, ff}, from_ff, false);
    }
    l.w_down = require_tensor(f, name("ffn_down"), {ff, embd}, from_ff, false);
    if (cfg.qk_norm) {
      l.q_norm = require_tensor(f, name("attn_q_norm"), {hd}, from_hd, true);
      l.k_norm = require_tensor(f, name("attn_k_norm"), {hd}, from_hd, true);
    }
    if (cfg.post_norms) {
      l.post_attn_norm = require_tensor(f, name("post_attention_norm"), {embd}, from_embd, true);
      l.post_ffn_norm = require_tensor(f, name("post_ffw_norm"), {embd}, from_embd, true);
    }
    w.layers.push_back(l);
  }
  w.views = views;
  refuse_unused_tensors(f, cfg, w, fused);
  return w;
}

}  // namespace infinipot
