// The family table (model_loader/model_family.h) on tiny models of each family: the description
// each row gives, the weights it maps (Phi-3's fused tensors as row views of the same bytes,
// Qwen2's biases), and files with a family's fault refused naming the tensor, by the loader
// and by `inspect`.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "model_loader/gguf.h"
#include "model_loader/model_config.h"
#include "model_loader/model_family.h"
#include "model_loader/quant.h"
#include "model_loader/runnable.h"
#include "tests/kit/tiny_model.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using gguf::GgufFile;
using gguf::GgufWriter;
using gguf::TensorType;

TinyLlamaOptions tiny(const std::string& arch) {
  TinyLlamaOptions o;
  o.arch = arch;
  if (arch == "qwen3") o.head_dim = 32;  // 4 heads of 32 over 64: heads need not tile n_embd
  return o;
}

struct Loaded {
  std::vector<uint8_t> bytes;  // must outlive file
  GgufFile file;
};

Loaded load(const GgufWriter& w) {
  std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
  return Loaded{std::move(bytes), std::move(f)};
}

TEST(ModelFamilies, EveryRowIsFoundByItsArchitectureAndNamed) {
  EXPECT_EQ(model_family_names(), "llama, gemma3, qwen2, qwen3, phi3");
  for (const ModelFamily& f : model_families()) {
    EXPECT_EQ(find_model_family(f.arch), &f);
    EXPECT_TRUE(*f.models) << f.arch;
  }
  EXPECT_EQ(find_model_family("mamba"), nullptr);
}

TEST(ModelFamilies, Qwen2ReadsItsBiasesAndNeoxRope) {
  Loaded m = load(tiny_llama_writer(tiny("qwen2")));
  const LlamaConfig cfg = read_llama_config(m.file);
  EXPECT_TRUE(cfg.rope_neox && cfg.qkv_bias);
  EXPECT_FALSE(cfg.qk_norm || cfg.post_norms || cfg.has_local_layers());
  const WeightTable w = map_weights(m.file, cfg);
  ASSERT_NE(w.layers[1].bq, nullptr);
  EXPECT_EQ(w.layers[1].bq->name, "blk.1.attn_q.bias");
  EXPECT_EQ(w.layers[1].bq->shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(w.layers[1].bk->shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(w.layers[1].bv->name, "blk.1.attn_v.bias");
}

TEST(ModelFamilies, Qwen3HasQkNormAndItsOwnHeadSize) {
  Loaded m = load(tiny_llama_writer(tiny("qwen3")));
  const LlamaConfig cfg = read_llama_config(m.file);
  EXPECT_TRUE(cfg.rope_neox && cfg.qk_norm);
  EXPECT_FALSE(cfg.qkv_bias || cfg.post_norms);
  EXPECT_EQ(cfg.head_dim, 32);
  EXPECT_EQ(cfg.n_rot, 32);
  EXPECT_FLOAT_EQ(cfg.rms_eps, 1e-5f);  // the file's, not the family's 1e-6 default
  const WeightTable w = map_weights(m.file, cfg);
  EXPECT_EQ(w.layers[0].wq->shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(w.layers[0].wo->shape, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(w.layers[0].q_norm->shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(w.layers[0].bq, nullptr);
}

// Phi-3's fused tensors are read as row views: q, k and v (gate and up) are consecutive rows
// of attn_qkv (ffn_up), so each view starts where the one before ends, in the same bytes.
TEST(ModelFamilies, Phi3FusedTensorsAreRowViewsOfTheSameBytes) {
  Loaded m = load(tiny_llama_writer(tiny("phi3")));
  const LlamaConfig cfg = read_llama_config(m.file);
  EXPECT_TRUE(cfg.rope_neox);
  EXPECT_FALSE(cfg.qk_norm || cfg.qkv_bias || cfg.has_local_layers());  // full attention, as llama.cpp
  const WeightTable w = map_weights(m.file, cfg);
  const gguf::TensorInfo* qkv = m.file.find_tensor("blk.0.attn_qkv.weight");
  const gguf::TensorInfo* gate_up = m.file.find_tensor("blk.0.ffn_up.weight");
  ASSERT_TRUE(qkv && gate_up);
  const LayerWeights& l = w.layers[0];
  const uint64_t row = quant::row_bytes(qkv->type, 64);
  EXPECT_EQ(l.wq->offset, qkv->offset);
  EXPECT_EQ(l.wq->shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(l.wk->offset, qkv->offset + 64 * row);
  EXPECT_EQ(l.wv->offset, qkv->offset + 96 * row);
  EXPECT_EQ(l.wq->n_bytes + l.wk->n_bytes + l.wv->n_bytes, qkv->n_bytes);
  EXPECT_EQ(l.w_gate->offset, gate_up->offset);
  EXPECT_EQ(l.w_up->offset, gate_up->offset + 128 * row);
  EXPECT_EQ(l.w_up->shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(l.w_gate->n_bytes + l.w_up->n_bytes, gate_up->n_bytes);
  EXPECT_NE(l.wq->name.find("attn_qkv"), std::string::npos);  // errors name the file's tensor
  // The views outlive copies of the table.
  const WeightTable copy = w;
  EXPECT_EQ(copy.layers[0].wk->offset, qkv->offset + 64 * row);
}

// A family's fault in a generated file: refused by the loader and by `inspect`, naming the
// tensor and what was expected.
::testing::AssertionResult refused(const std::string& arch, const std::function<void(GgufWriter&)>& change,
                                   std::initializer_list<std::string_view> needles) {
  GgufWriter w = tiny_llama_writer(tiny(arch));
  change(w);
  const std::vector<uint8_t> bytes = w.to_bytes();
  ::testing::AssertionResult loader = test::throws_gguf_error(
      [&] {
        GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
        map_weights(f, read_llama_config(f));
      },
      needles);
  if (!loader) return loader;
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
  const Runnability check = check_runnable(f);
  if (check.runnable) return ::testing::AssertionFailure() << "inspect says the broken " << arch << " file can run";
  for (std::string_view n : needles)
    if (check.reason.find(n) == std::string::npos)
      return ::testing::AssertionFailure() << "inspect's reason \"" << check.reason << "\" lacks \"" << n << "\"";
  return ::testing::AssertionSuccess();
}

TEST(ModelFamilies, FaultsAreRefusedNamingTheTensor) {
  EXPECT_TRUE(refused("qwen2", [](GgufWriter& w) { w.erase_tensor("blk.1.attn_k.bias"); },
                      {"missing tensor 'blk.1.attn_k.bias'", "expected shape [32]"}));
  EXPECT_TRUE(refused("qwen2",
                      [](GgufWriter& w) {
                        w.erase_tensor("blk.0.attn_v.bias");
                        w.add_tensor_f32("blk.0.attn_v.bias", TensorType::F32, {64}, std::vector<float>(64));
                      },
                      {"tensor 'blk.0.attn_v.bias' has shape [64], expected [32]"}));
  EXPECT_TRUE(refused("phi3",
                      [](GgufWriter& w) {
                        w.erase_tensor("blk.1.attn_qkv.weight");
                        w.add_tensor_f32("blk.1.attn_qkv.weight", TensorType::F32, {64, 160}, std::vector<float>(64 * 160));
                      },
                      {"tensor 'blk.1.attn_qkv.weight' has shape [64, 160], expected [64, 128]", "q | k | v rows"}));
  EXPECT_TRUE(refused("phi3",
                      [](GgufWriter& w) {
                        w.erase_tensor("blk.0.ffn_up.weight");
                        w.add_tensor_f32("blk.0.ffn_up.weight", TensorType::F32, {64, 128}, std::vector<float>(64 * 128));
                      },
                      {"tensor 'blk.0.ffn_up.weight' has shape [64, 128], expected [64, 256]", "gate | up rows"}));
  EXPECT_TRUE(refused("qwen3", [](GgufWriter& w) { w.erase_tensor("blk.0.attn_q_norm.weight"); },
                      {"missing tensor 'blk.0.attn_q_norm.weight'"}));
  // A bias on a family that has none, and Phi-3's LongRoPE factors, which are not computed.
  EXPECT_TRUE(refused("qwen3",
                      [](GgufWriter& w) { w.add_tensor_f32("blk.0.attn_q.bias", TensorType::F32, {128}, std::vector<float>(128)); },
                      {"tensor 'blk.0.attn_q.bias' is not part of the qwen3 forward pass"}));
  EXPECT_TRUE(refused("phi3",
                      [](GgufWriter& w) { w.add_tensor_f32("rope_factors_long.weight", TensorType::F32, {8}, std::vector<float>(8, 1.f)); },
                      {"tensor 'rope_factors_long.weight' is not part of the phi3 forward pass"}));
}

}  // namespace
}  // namespace infinipot
