// The forward pass on tiny generated models of each family (tests/kit/tiny_model.h), on the
// default device: what each row of the family table adds must reach the logits, on the
// chunked path (GEMM) and token by token (the decode products) alike. Agreement with
// llama.cpp on real-shaped files is test_family_reference.cpp's.
//  - Phi-3's fused attn_qkv and gate|up read as views give the logits that the same values
//    as separate tensors give, bit for bit;
//  - Qwen2's biases change the logits (they are added), and Qwen3's QK-norm runs with a head
//    size that does not tile n_embd;
//  - a prompt evaluated in one chunk and one token at a time gives the same last logits.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/kit/tiny_model.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

// Relative to the largest |logit|: the chunked products (GEMM) and the decode products
// (matvec) sum in different orders over 64-128 terms, as do the two attention kernels.
constexpr double kPathTol = 2e-4;

const std::vector<TokenId> kPrompt = {5, 17, 42, 99, 150, 7, 33, 260, 12, 81, 64, 3};

std::string write(test::TempDir& dir, const std::string& name, const TinyLlamaOptions& o) {
  const std::string p = dir.file(name + ".gguf");
  write_tiny_llama(p, o);
  return p;
}

std::unique_ptr<Engine> engine_for(const std::string& path) {
  EngineOptions o;
  o.model_path = path;
  o.kv_type = "f32";
  return std::make_unique<Engine>(o);
}

std::vector<float> last_logits_chunked(Engine& e, const std::vector<TokenId>& tokens) {
  e.prepare(64);
  e.forward().eval(tokens);
  return e.forward().last_logits();
}

std::vector<float> last_logits_stepwise(Engine& e, const std::vector<TokenId>& tokens) {
  e.prepare(64);
  for (TokenId t : tokens) e.forward().eval(std::vector<TokenId>{t});
  return e.forward().last_logits();
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

::testing::AssertionResult close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  const double scale = std::max(max_abs(a), 1e-6);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i]))
      return ::testing::AssertionFailure() << "logit " << i << " is not finite: " << a[i] << " vs " << b[i];
    if (std::fabs(double(a[i]) - b[i]) > rel * scale)
      return ::testing::AssertionFailure() << "logit " << i << ": " << a[i] << " vs " << b[i] << " (scale " << scale << ")";
  }
  return ::testing::AssertionSuccess();
}

TinyLlamaOptions family(const std::string& arch) {
  TinyLlamaOptions o;
  o.arch = arch;
  o.name = "tiny-" + arch;
  if (arch == "qwen3") o.head_dim = 32;  // 4 heads x 32 = 128 wide q over n_embd 64
  return o;
}

class FamilyForward : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyForward, OneChunkAndTokenByTokenGiveTheSameLogits) {
  test::TempDir dir;
  auto e = engine_for(write(dir, GetParam(), family(GetParam())));
  const std::vector<float> chunked = last_logits_chunked(*e, kPrompt);
  const std::vector<float> stepwise = last_logits_stepwise(*e, kPrompt);
  EXPECT_GT(max_abs(chunked), 0.1);
  EXPECT_TRUE(close(chunked, stepwise, kPathTol));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyForward, ::testing::Values("llama", "qwen2", "qwen3", "phi3"),
                         [](const auto& info) { return info.param; });

TEST(FamilyForwardPhi3, FusedTensorsGiveWhatTheSameValuesSplitGiveBitForBit) {
  test::TempDir dir;
  for (gguf::TensorType type : {gguf::TensorType::F32, gguf::TensorType::Q8_0}) {
    TinyLlamaOptions fused = family("phi3"), split = family("phi3");
    fused.matrix_type = split.matrix_type = type;
    split.fused = false;
    auto a = engine_for(write(dir, "fused", fused));
    auto b = engine_for(write(dir, "split", split));
    EXPECT_EQ(last_logits_chunked(*a, kPrompt), last_logits_chunked(*b, kPrompt)) << "chunked, type " << int(type);
    EXPECT_EQ(last_logits_stepwise(*a, kPrompt), last_logits_stepwise(*b, kPrompt)) << "stepwise, type " << int(type);
  }
}

// With its biases zeroed a Qwen2 file gives other logits: the biases are added, on both paths.
TEST(FamilyForwardQwen2, BiasesReachTheLogits) {
  test::TempDir dir;
  const TinyLlamaOptions o = family("qwen2");
  gguf::GgufWriter zeroed = tiny_llama_writer(o);
  const int64_t q_dim = 64, kv_dim = 32;
  for (int l = 0; l < o.n_layer; ++l)
    for (auto [part, n] : {std::pair{"attn_q", q_dim}, {"attn_k", kv_dim}, {"attn_v", kv_dim}}) {
      const std::string name = "blk." + std::to_string(l) + "." + part + ".bias";
      zeroed.erase_tensor(name);
      zeroed.add_tensor_f32(name, gguf::TensorType::F32, {n}, std::vector<float>(size_t(n), 0.f));
    }
  const std::string zero_path = dir.file("qwen2-zero-bias.gguf");
  zeroed.write(zero_path);
  auto with = engine_for(write(dir, "qwen2", o));
  auto without = engine_for(zero_path);
  const std::vector<float> a = last_logits_chunked(*with, kPrompt), b = last_logits_chunked(*without, kPrompt);
  EXPECT_FALSE(close(a, b, 1e-3)) << "zeroing the q/k/v biases left the logits unchanged";
  const std::vector<float> c = last_logits_stepwise(*with, kPrompt), d = last_logits_stepwise(*without, kPrompt);
  EXPECT_FALSE(close(c, d, 1e-3)) << "token by token, too";
}

}  // namespace
}  // namespace infinipot
