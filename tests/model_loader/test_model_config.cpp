// read_llama_config + map_weights on tiny models (every weight type, tied and untied), on the
// real SmolLM2 model, and on broken variants derived from a tiny model: each error must name
// the key or tensor and what was expected.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "model_loader/gguf.h"
#include "model_loader/inspect.h"
#include "model_loader/model_config.h"
#include "model_loader/quant.h"
#include "model_loader/runnable.h"
#include "tests/kit/tiny_model.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using gguf::GgufFile;
using gguf::GgufWriter;
using gguf::TensorType;
using test::throws_gguf_error;

struct Loaded {
  std::vector<uint8_t> bytes;  // must outlive file
  GgufFile file;
};

Loaded load(const GgufWriter& w, const std::string& label = "tiny.gguf") {
  std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), label);
  return Loaded{std::move(bytes), std::move(f)};  // moving a vector keeps its buffer
}

void expect_shape(const gguf::TensorInfo* t, std::vector<int64_t> shape) {
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, shape) << t->name;
}

TEST(TinyModel, DefaultLoadsWithTheDocumentedShape) {
  Loaded m = load(tiny_llama_writer({}));
  const LlamaConfig cfg = read_llama_config(m.file);
  EXPECT_EQ(cfg.architecture, "llama");
  EXPECT_EQ(cfg.name, "tiny-llama");
  EXPECT_EQ(cfg.n_layer, 2);
  EXPECT_EQ(cfg.n_embd, 64);
  EXPECT_EQ(cfg.n_ff, 128);
  EXPECT_EQ(cfg.n_head, 4);
  EXPECT_EQ(cfg.n_head_kv, 2);
  EXPECT_EQ(cfg.head_dim, 16);
  EXPECT_EQ(cfg.n_rot, 16);
  EXPECT_EQ(cfg.n_ctx_train, 256);
  EXPECT_EQ(cfg.rope_theta, 10000.f);
  EXPECT_EQ(cfg.rms_eps, 1e-5f);
  EXPECT_TRUE(cfg.tied_embeddings);
  EXPECT_EQ(cfg.n_vocab % 32, 0);
  EXPECT_GT(cfg.n_vocab, 259 + 200);  // specials + bytes + most of the 300 merges

  const WeightTable w = map_weights(m.file, cfg);
  EXPECT_EQ(w.output, w.token_embd);
  expect_shape(w.token_embd, {64, cfg.n_vocab});
  expect_shape(w.output_norm, {64});
  ASSERT_EQ(w.layers.size(), 2u);
  const LayerWeights& l = w.layers[1];
  expect_shape(l.wq, {64, 64});
  expect_shape(l.wk, {64, 32});
  expect_shape(l.wv, {64, 32});
  expect_shape(l.wo, {64, 64});
  expect_shape(l.w_gate, {64, 128});
  expect_shape(l.w_up, {64, 128});
  expect_shape(l.w_down, {128, 64});
  expect_shape(l.attn_norm, {64});
  expect_shape(l.ffn_norm, {64});
  EXPECT_EQ(l.wq->name, "blk.1.attn_q.weight");
}

TEST(TinyModel, WeightsHaveTheIntendedScale) {
  Loaded m = load(tiny_llama_writer({}));
  const WeightTable w = map_weights(m.file, read_llama_config(m.file));
  auto stats = [&](const gguf::TensorInfo* t, double& mean, double& stddev) {
    std::vector<float> v(static_cast<size_t>(t->n_elements()));
    quant::dequantize_row(t->type, m.file.tensor_data(*t), v.data(), t->n_elements());
    double s = 0, s2 = 0;
    for (float x : v) { s += x; s2 += double{x} * x; }
    mean = s / static_cast<double>(v.size());
    stddev = std::sqrt(s2 / static_cast<double>(v.size()) - mean * mean);
  };
  double mean, sd;
  stats(w.layers[0].wq, mean, sd);
  EXPECT_NEAR(sd, 0.5 / 8, 0.01);  // 0.5 / sqrt(n_embd)
  EXPECT_NEAR(mean, 0, 0.01);
  stats(w.layers[0].attn_norm, mean, sd);
  EXPECT_NEAR(mean, 1, 0.03);
  stats(w.token_embd, mean, sd);
  EXPECT_NEAR(sd, 0.5, 0.02);
}

TEST(TinyModel, EveryWeightTypeAndUntiedOutput) {
  struct Case { TensorType matrix, embd, output; int n_embd, n_ff; };
  const Case cases[] = {
      {TensorType::F16, TensorType::F16, TensorType::F16, 64, 128},
      {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_0, 64, 128},
      {TensorType::Q4_1, TensorType::Q8_0, TensorType::Q6_K, 256, 512},
      {TensorType::Q8_0, TensorType::F32, TensorType::Q8_0, 64, 128},
      {TensorType::Q6_K, TensorType::Q6_K, TensorType::F32, 256, 512},
      {TensorType::Q5_K, TensorType::Q5_1, TensorType::Q5_K, 256, 512},  // a Q5_K_M-like mix
      {TensorType::Q5_1, TensorType::Q5_0, TensorType::Q5_1, 64, 128},
      {TensorType::BF16, TensorType::BF16, TensorType::F16, 64, 128},
  };
  for (const Case& c : cases) {
    TinyLlamaOptions o;
    o.matrix_type = c.matrix;
    o.embd_type = c.embd;
    o.output_type = c.output;
    o.n_embd = c.n_embd;
    o.n_ff = c.n_ff;
    o.tied_embeddings = false;
    o.n_merges = 50;
    SCOPED_TRACE(quant::traits(c.matrix).name);
    Loaded m = load(tiny_llama_writer(o));
    const LlamaConfig cfg = read_llama_config(m.file);
    EXPECT_FALSE(cfg.tied_embeddings);
    EXPECT_EQ(cfg.head_dim, c.n_embd / 4);
    const WeightTable w = map_weights(m.file, cfg);
    EXPECT_NE(w.output, w.token_embd);
    EXPECT_EQ(w.output->type, c.output);
    EXPECT_EQ(w.token_embd->type, c.embd);
    EXPECT_EQ(w.layers[0].w_down->type, c.matrix);
    EXPECT_EQ(w.layers[0].attn_norm->type, TensorType::F32);
  }
}

TEST(TinyModel, TokenizerMetadataLooksLikeSmolLM2) {
  TinyLlamaOptions o;
  o.alignment = 64;
  Loaded m = load(tiny_llama_writer(o));
  const GgufFile& f = m.file;
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "smollm");
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto types = f.get_int_array("tokenizer.ggml.token_type");
  const auto merges = f.get_string_array("tokenizer.ggml.merges");
  ASSERT_EQ(tokens.size(), types.size());
  EXPECT_EQ(tokens[0], "<|endoftext|>");
  EXPECT_EQ(tokens[1], "<|im_start|>");
  EXPECT_EQ(tokens[2], "<|im_end|>");
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(tokens[3], "!");  // GPT-2 byte order: printable bytes first
  EXPECT_EQ(merges.size(), 300u);
  EXPECT_EQ(f.get_u64("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(f.get_u64("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_NE(f.get_string("tokenizer.chat_template").find("<|im_start|>"), std::string::npos);
  // Every byte has its token and every merge's halves and result are tokens.
  std::set<std::string> vocab(tokens.begin(), tokens.end());
  for (int b = 0; b < 256; ++b) EXPECT_EQ(vocab.count(gpt2_byte_to_unicode(static_cast<uint8_t>(b))), 1u) << b;
  EXPECT_EQ(gpt2_byte_to_unicode(' '), "Ġ");
  EXPECT_EQ(gpt2_byte_to_unicode('\n'), "Ċ");
  for (const std::string& mg : merges) {
    const size_t sp = mg.find(' ');
    ASSERT_NE(sp, std::string::npos) << mg;
    EXPECT_EQ(vocab.count(mg.substr(0, sp)), 1u) << mg;
    EXPECT_EQ(vocab.count(mg.substr(sp + 1)), 1u) << mg;
    EXPECT_EQ(vocab.count(mg.substr(0, sp) + mg.substr(sp + 1)), 1u) << mg;
  }
  EXPECT_EQ(tokens.back().rfind("[PAD", 0), 0u);  // padding up to a multiple of 32
  EXPECT_EQ(types.back(), 5);
}

TEST(TinyModel, DeterministicForASeed) {
  TinyLlamaOptions o;
  EXPECT_EQ(tiny_llama_bytes(o), tiny_llama_bytes(o));
  TinyLlamaOptions other = o;
  other.seed = 7;
  EXPECT_NE(tiny_llama_bytes(o), tiny_llama_bytes(other));
  test::TempDir dir;
  write_tiny_llama(dir.file("t.gguf"), o);
  EXPECT_EQ(test::read_file(dir.file("t.gguf")), tiny_llama_bytes(o));
}

TEST(TinyModel, OptionsThatCannotWorkAreRefused) {
  TinyLlamaOptions o;
  o.matrix_type = TensorType::Q6_K;  // 64 is not a multiple of 256
  EXPECT_TRUE(throws_gguf_error([&] { tiny_llama_writer(o); }, {"matrix_type", "Q6_K", "block size 256"}));
  o = {};
  o.n_head = 5;
  EXPECT_TRUE(throws_gguf_error([&] { tiny_llama_writer(o); }, {"inconsistent sizes"}));
  o = {};
  o.n_vocab = 100;
  EXPECT_TRUE(throws_gguf_error([&] { tiny_llama_writer(o); }, {"n_vocab 100 is smaller"}));
  o = {};
  o.with_tokenizer = false;
  EXPECT_TRUE(throws_gguf_error([&] { tiny_llama_writer(o); }, {"n_vocab must be set"}));
  o.n_vocab = 96;
  Loaded m = load(tiny_llama_writer(o));
  EXPECT_EQ(read_llama_config(m.file).n_vocab, 96);
  EXPECT_FALSE(m.file.has("tokenizer.ggml.tokens"));
}

TEST(RealModel, SmolLM2Config) {
  const std::string path = test::real_model_path();
  ASSERT_FALSE(path.empty());
  GgufFile f = GgufFile::open(path);
  const LlamaConfig cfg = read_llama_config(f);
  EXPECT_EQ(cfg.n_layer, 30);
  EXPECT_EQ(cfg.n_embd, 576);
  EXPECT_EQ(cfg.n_head, 9);
  EXPECT_EQ(cfg.n_head_kv, 3);
  EXPECT_EQ(cfg.head_dim, 64);
  EXPECT_EQ(cfg.n_rot, 64);
  EXPECT_EQ(cfg.n_ff, 1536);
  EXPECT_EQ(cfg.n_vocab, 49152);
  EXPECT_EQ(cfg.n_ctx_train, 8192);
  EXPECT_EQ(cfg.rope_theta, 100000.f);
  EXPECT_EQ(cfg.rms_eps, 1e-5f);
  EXPECT_TRUE(cfg.tied_embeddings);
  const WeightTable w = map_weights(f, cfg);
  ASSERT_EQ(w.layers.size(), 30u);
  EXPECT_EQ(w.output, w.token_embd);
  EXPECT_EQ(w.token_embd->type, TensorType::Q8_0);
  EXPECT_EQ(w.layers[29].w_down->type, TensorType::Q4_1);
  expect_shape(w.layers[29].wk, {576, 192});
  expect_shape(w.layers[0].w_down, {1536, 576});
}

// A tiny model writer with one change applied, then config + weights read. Every such fault
// must also make `inspect` say the model cannot run, with the same reason (less the file
// name) on its "cannot run:" line and in its JSON.
::testing::AssertionResult broken(const std::function<void(GgufWriter&)>& change,
                                  std::initializer_list<std::string_view> needles) {
  GgufWriter w = tiny_llama_writer({});
  change(w);
  const std::vector<uint8_t> bytes = w.to_bytes();
  std::string message;
  ::testing::AssertionResult refused = throws_gguf_error(
      [&] {
        GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
        try {
          map_weights(f, read_llama_config(f));
        } catch (const gguf::GgufError& e) {
          message = e.what();
          throw;
        }
      },
      needles);
  if (!refused) return refused;
  const std::string prefix = "tiny.gguf: ";
  if (message.compare(0, prefix.size(), prefix) != 0) {
    return ::testing::AssertionFailure() << "message does not start with the file name: " << message;
  }
  const std::string reason = message.substr(prefix.size());
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
  const Runnability verdict = check_runnable(f);
  if (verdict.runnable || verdict.reason != reason) {
    return ::testing::AssertionFailure() << "check_runnable: runnable=" << verdict.runnable << " reason \""
                                         << verdict.reason << "\", expected \"" << reason << "\"";
  }
  const std::string text = inspect_text(f);
  if (text.find("\ncannot run: " + reason + "\n") == std::string::npos) {
    return ::testing::AssertionFailure() << "inspect_text lacks \"cannot run: " << reason << "\":\n" << text;
  }
  const nlohmann::json j = inspect_json(f);
  if (j.at("runnable") != false || j.at("cannot_run") != reason) {
    return ::testing::AssertionFailure() << "inspect_json: runnable=" << j.at("runnable")
                                         << " cannot_run=" << j.at("cannot_run");
  }
  return refused;
}

TEST(ModelConfigErrors, MissingRequiredKeys) {
  for (const char* key : {"general.architecture", "llama.block_count", "llama.embedding_length",
                          "llama.feed_forward_length", "llama.attention.head_count", "llama.context_length"}) {
    EXPECT_TRUE(broken([&](GgufWriter& w) { w.erase(key); },
                       {"tiny.gguf", fmt::format("missing required metadata key '{}'", key)}));
  }
}

TEST(ModelConfigErrors, OptionalKeysTakeTheirDefaults) {
  GgufWriter w = tiny_llama_writer({});
  for (const char* key : {"llama.attention.head_count_kv", "llama.rope.freq_base", "llama.rope.dimension_count",
                          "llama.attention.layer_norm_rms_epsilon", "llama.vocab_size", "general.name"}) {
    EXPECT_TRUE(w.erase(key)) << key;
  }
  // head_count_kv defaults to head_count, so the K/V weights (sized for 2 KV heads) mismatch.
  Loaded m = load(w);
  const LlamaConfig cfg = read_llama_config(m.file);
  EXPECT_EQ(cfg.n_head_kv, cfg.n_head);
  EXPECT_EQ(cfg.rope_theta, 10000.f);
  EXPECT_EQ(cfg.n_rot, cfg.head_dim);
  EXPECT_EQ(cfg.rms_eps, 1e-5f);
  EXPECT_EQ(cfg.name, "");
  EXPECT_TRUE(throws_gguf_error([&] { map_weights(m.file, cfg); },
                                {"tensor 'blk.0.attn_k.weight' has shape [64, 32], expected [64, 64]",
                                 "llama.attention.head_count_kv"}));
}

TEST(ModelConfigErrors, MissingTensor) {
  EXPECT_TRUE(broken([](GgufWriter& w) { w.erase_tensor("blk.1.ffn_up.weight"); },
                     {"tiny.gguf", "missing tensor 'blk.1.ffn_up.weight'", "expected shape [64, 128]"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.erase_tensor("output_norm.weight"); }, {"missing tensor 'output_norm.weight'"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.erase_tensor("token_embd.weight"); }, {"missing tensor 'token_embd.weight'"}));
}

TEST(ModelConfigErrors, WrongShape) {
  EXPECT_TRUE(broken(
      [](GgufWriter& w) {
        w.erase_tensor("blk.1.ffn_up.weight");
        w.add_tensor_f32("blk.1.ffn_up.weight", TensorType::F32, {64, 100}, std::vector<float>(6400));
      },
      {"tensor 'blk.1.ffn_up.weight' has shape [64, 100], expected [64, 128] from", "llama.feed_forward_length"}));
  EXPECT_TRUE(broken(
      [](GgufWriter& w) {
        w.erase_tensor("blk.0.attn_norm.weight");
        w.add_tensor_f32("blk.0.attn_norm.weight", TensorType::F32, {64, 1}, std::vector<float>(64));
      },
      {"'blk.0.attn_norm.weight' has shape [64, 1], expected [64]"}));
  EXPECT_TRUE(broken(
      [](GgufWriter& w) {
        w.replace("llama.embedding_length", gguf::value_u32(32));
        w.erase("llama.rope.dimension_count");
      },
                     {"tensor 'token_embd.weight' has shape [64, ", "expected [32, n_vocab]"}));
}

// A tensor the forward pass would not read is refused by name: running without it (a bias, an
// extra norm) would give wrong outputs without a word.
TEST(ModelConfigErrors, TensorsTheForwardPassWouldIgnore) {
  EXPECT_TRUE(broken([](GgufWriter& w) { w.add_tensor_f32("blk.0.attn_q.bias", TensorType::F32, {64}, std::vector<float>(64)); },
                     {"tensor 'blk.0.attn_q.bias' is not part of the llama forward pass", "does not implement"}));
}

// Llama 3's RoPE frequency factors (rope_freqs.weight, [n_rot/2] F32) are read into the config
// (all 1: none, the same angles); a wrong shape or type, or a factor that is not positive, is
// refused by name.
TEST(ModelConfig, RopeFrequencyFactorsAreReadOrRefused) {
  const int pairs = 8;  // the tiny model's n_rot / 2 (head_dim 16)
  std::vector<float> factors(pairs, 1.0f);
  factors[pairs - 1] = 4.0f;
  auto with = [&](const std::vector<float>& f, std::vector<int64_t> shape = {}) {
    GgufWriter w = tiny_llama_writer({});
    w.add_tensor_f32("rope_freqs.weight", TensorType::F32, shape.empty() ? std::vector<int64_t>{int64_t(f.size())} : shape, f);
    return w;
  };
  {
    const Loaded m = load(with(factors));
    const LlamaConfig cfg = read_llama_config(m.file);
    ASSERT_EQ(cfg.n_rot / 2, pairs);
    EXPECT_EQ(cfg.rope_freq_factors, factors);
    EXPECT_NO_THROW(map_weights(m.file, cfg));
  }
  {
    const Loaded m = load(with(std::vector<float>(pairs, 1.0f)));
    EXPECT_TRUE(read_llama_config(m.file).rope_freq_factors.empty());
  }
  EXPECT_TRUE(throws_gguf_error([&] { read_llama_config(load(with(std::vector<float>(pairs - 1, 2.0f))).file); },
                                {"'rope_freqs.weight' has type F32 and shape [7]", "shape [8]"}));
  std::vector<float> negative = factors;
  negative[2] = -1.0f;
  EXPECT_TRUE(throws_gguf_error([&] { read_llama_config(load(with(negative)).file); },
                                {"'rope_freqs.weight' entry 2 is -1", "must be positive"}));
}

TEST(ModelConfigErrors, UnsupportedTypes) {
  EXPECT_TRUE(broken(
      [](GgufWriter& w) {
        w.erase_tensor("blk.0.attn_norm.weight");
        w.add_tensor_f32("blk.0.attn_norm.weight", TensorType::F16, {64}, std::vector<float>(64));
      },
      {"'blk.0.attn_norm.weight' has type F16; norm weights and biases must be F32"}));
  EXPECT_TRUE(broken(
      [](GgufWriter& w) {
        w.erase_tensor("blk.0.attn_q.weight");
        w.add_tensor("blk.0.attn_q.weight", TensorType::Q8_1, {64, 64}, std::vector<uint8_t>(64 * 2 * 36));
      },
      {"'blk.0.attn_q.weight' has type Q8_1, which is not supported", "supported: F32, F16, Q4_0"}));
}

TEST(ModelConfigErrors, RowsTheDeviceKernelsCannotRead) {
  TinyLlamaOptions o;
  o.n_embd = 48;  // F32 allows any row length; the device matrix kernels need multiples of 32
  o.n_head = 4;
  o.n_head_kv = 2;
  Loaded m = load(tiny_llama_writer(o));
  EXPECT_TRUE(throws_gguf_error([&] { map_weights(m.file, read_llama_config(m.file)); },
                                {"tensor 'token_embd.weight' has rows of 48 elements",
                                 "need a multiple of 32"}));
  const Runnability verdict = check_runnable(m.file);
  EXPECT_FALSE(verdict.runnable);
  EXPECT_NE(verdict.reason.find("rows of 48 elements"), std::string::npos) << verdict.reason;
}

// Gemma 3 270M maps into the same description as llama, its differences as data: values from
// the file's metadata (inspect) and llama.cpp's gemma3 loader (pattern 6, local base 1e4,
// attention scale 1/sqrt(head_dim) below 27B).
TEST(ModelConfig, Gemma3MapsIntoTheSameDescription) {
  const std::string path = test::gemma_model_path();
  ASSERT_FALSE(path.empty());
  GgufFile f = GgufFile::open(path);
  const LlamaConfig cfg = read_llama_config(f);
  EXPECT_EQ(cfg.architecture, "gemma3");
  EXPECT_EQ(cfg.n_layer, 18);
  EXPECT_EQ(cfg.n_embd, 640);
  EXPECT_EQ(cfg.n_head, 4);
  EXPECT_EQ(cfg.n_head_kv, 1);
  EXPECT_EQ(cfg.head_dim, 256);  // key_length: 4 heads x 256 != 640
  EXPECT_EQ(cfg.n_rot, 256);
  EXPECT_EQ(cfg.n_ff, 2048);
  EXPECT_EQ(cfg.n_vocab, 262144);
  EXPECT_FLOAT_EQ(cfg.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(cfg.rope_theta_local, 1e4f);
  EXPECT_FLOAT_EQ(cfg.rms_eps, 1e-6f);
  EXPECT_EQ(cfg.sliding_window, 512);
  EXPECT_TRUE(cfg.rope_neox && cfg.qk_norm && cfg.post_norms && cfg.tied_embeddings);
  EXPECT_EQ(cfg.ffn_act, FfnActivation::GeluTanh);
  EXPECT_FLOAT_EQ(cfg.embd_scale, std::sqrt(640.f));
  EXPECT_FLOAT_EQ(cfg.attn_scale, 1.f / 16.f);
  ASSERT_EQ(cfg.layer_kind.size(), 18u);
  for (int il = 0; il < 18; ++il) EXPECT_EQ(cfg.is_local(il), il % 6 != 5) << "layer " << il;
  const WeightTable w = map_weights(f, cfg);
  ASSERT_EQ(w.layers.size(), 18u);
  expect_shape(w.layers[0].wq, {640, 1024});
  expect_shape(w.layers[0].wo, {1024, 640});
  expect_shape(w.layers[0].q_norm, {256});
  expect_shape(w.layers[17].k_norm, {256});
  expect_shape(w.layers[3].post_attn_norm, {640});
  expect_shape(w.layers[3].post_ffn_norm, {640});
}

// The llama description keeps llama's behaviour: nothing gemma-specific is switched on.
TEST(ModelConfig, LlamaHasNoGemmaFeatures) {
  Loaded m = load(tiny_llama_writer({}));
  const LlamaConfig cfg = read_llama_config(m.file);
  EXPECT_FALSE(cfg.rope_neox || cfg.qk_norm || cfg.post_norms || cfg.has_local_layers());
  EXPECT_EQ(cfg.ffn_act, FfnActivation::SiLU);
  EXPECT_EQ(cfg.embd_scale, 1.f);
  EXPECT_FLOAT_EQ(cfg.attn_scale, 1.f / std::sqrt(static_cast<float>(cfg.head_dim)));
  const WeightTable w = map_weights(m.file, cfg);
  EXPECT_EQ(w.layers[0].q_norm, nullptr);
  EXPECT_EQ(w.layers[0].post_ffn_norm, nullptr);
}

TEST(ModelConfigErrors, UnsupportedArchitecture) {
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("general.architecture", gguf::value_string("mamba")); },
                     {"tiny.gguf", "unsupported architecture 'mamba'", "supported are llama, gemma3, qwen2, qwen3, phi3"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("general.architecture", gguf::value_u32(1)); },
                     {"metadata 'general.architecture'", "expected a STRING"}));
}

TEST(ModelConfigErrors, VocabSizeMismatch) {
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.vocab_size", gguf::value_u32(1000)); },
                     {"'llama.vocab_size' is 1000 but tensor 'token_embd.weight' has"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("tokenizer.ggml.tokens", gguf::value_array(gguf::ValueType::STRING, {gguf::value_string("a")})); },
                     {"'tokenizer.ggml.tokens' has 1 entries but tensor 'token_embd.weight' has"}));
}

TEST(ModelConfigErrors, InconsistentHyperparameters) {
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.attention.head_count", gguf::value_u32(3)); },
                     {"llama.embedding_length 64 is not divisible by llama.attention.head_count 3"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.attention.head_count_kv", gguf::value_u32(8)); },
                     {"'llama.attention.head_count_kv' is 8; expected 1 to 4"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.attention.head_count_kv", gguf::value_u32(3)); },
                     {"llama.attention.head_count 4 is not divisible by llama.attention.head_count_kv 3"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.block_count", gguf::value_u32(0)); },
                     {"'llama.block_count' is 0; expected 1 to"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.block_count", gguf::value_u32(3)); },
                     {"missing tensor 'blk.2.attn_norm.weight'"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.rope.dimension_count", gguf::value_u32(7)); },
                     {"'llama.rope.dimension_count' is 7; expected an even number"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.rope.freq_base", gguf::value_f32(-1.f)); },
                     {"'llama.rope.freq_base' is -1; expected a positive number"}));
  // A head size of its own (as Gemma 3 and Qwen3 have) must match the tensors.
  EXPECT_TRUE(broken([](GgufWriter& w) { w.set_u32("llama.attention.key_length", 32); },
                     {"tensor 'blk.0.attn_q.weight' has shape [64, 64], expected [64, 128]"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.set_u32("llama.attention.value_length", 8); },
                     {"'llama.attention.value_length' is 8", "different key and value sizes"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.set_string("llama.rope.scaling.type", "yarn"); },
                     {"RoPE scaling 'yarn'", "not supported"}));
  EXPECT_TRUE(broken([](GgufWriter& w) { w.replace("llama.block_count", gguf::value_i32(-2)); },
                     {"'llama.block_count'", "non-negative", "-2"}));
}

}  // namespace
}  // namespace infinipot
