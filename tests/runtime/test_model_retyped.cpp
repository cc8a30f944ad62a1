// Real-model files rewritten to hold what no shipped model has. (1) Weight types:
// SmolLM2-135M-Instruct's weights rewritten as BF16, and as a Q5_K_M-like mix (Q5_K where
// rows are whole 256-element super-blocks, Q5_1 elsewhere). The kernels are checked against the host reference one by
// one (test_dequant.cpp, test_matvec.cpp); this checks whole forward passes: each file reads the text
// as its F16 twin (the same values, dequantized by the host reference) does. Requantizing
// Q4_1's values onto a 5-bit grid costs accuracy of its own (perplexity 3.46 -> 5.0 here), so
// the Q5 file is not compared with the original. (2) Llama 3's RoPE frequency factors
// (rope_freqs.weight) added to SmolLM2 (RopeFactorsOnARealModel).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model_loader/gguf.h"
#include "tests/kit/gguf_writer.h"
#include "model_loader/quant.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using gguf::TensorType;

// A writer holding `f`'s metadata, and one of `f`'s tensors copied as stored.
gguf::GgufWriter writer_with_metadata_of(const gguf::GgufFile& f) {
  gguf::GgufWriter w(static_cast<uint32_t>(f.alignment()));
  for (const auto& [key, value] : f.metadata())
    if (key != "general.alignment") w.set(key, value);
  return w;
}
void copy_tensor(const gguf::GgufFile& f, const gguf::TensorInfo& t, gguf::GgufWriter& w) {
  const uint8_t* data = f.tensor_data(t);
  w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(data, data + quant::row_bytes(t.type, t.shape[0]) * t.rows()));
}

// A copy of `src` whose matrices (2-D, not F32) are dequantized and stored as `type`, or as
// `fallback` when their rows are not whole blocks of `type`.
void write_retyped(const std::string& src, const std::string& dst, TensorType type, TensorType fallback) {
  const gguf::GgufFile f = gguf::GgufFile::open(src);
  gguf::GgufWriter w = writer_with_metadata_of(f);
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.shape.size() != 2 || t.type == TensorType::F32) {
      copy_tensor(f, t, w);
      continue;
    }
    std::vector<float> values(t.n_elements());
    quant::dequantize_row(t.type, f.tensor_data(t), values.data(), t.n_elements());
    const TensorType to = t.shape[0] % quant::traits(type).block_elems == 0 ? type : fallback;
    w.add_tensor_f32(t.name, to, t.shape, values);
  }
  w.write(dst);
}

// A copy of `src` with Llama 3 style RoPE frequency factors (rope_freqs.weight) added.
void write_with_rope_factors(const std::string& src, const std::string& dst, const std::vector<float>& factors) {
  const gguf::GgufFile f = gguf::GgufFile::open(src);
  gguf::GgufWriter w = writer_with_metadata_of(f);
  for (const gguf::TensorInfo& t : f.tensors()) copy_tensor(f, t, w);
  w.add_tensor_f32("rope_freqs.weight", TensorType::F32, {int64_t(factors.size())}, factors);
  w.write(dst);
}

double perplexity(const std::string& model) {
  const auto r = test::run_infinipot({"perplexity", "-m", model, "-f",
                                      std::string(INFINIPOT_TEST_SOURCE_DIR) + "/data/perplexity.txt", "-c", "256",
                                      "--chunks", "3", "--json"},
                                     {{}, 900});
  EXPECT_TRUE(test::succeeded(r)) << r.describe();
  if (r.exit_code != 0) return -1;
  return nlohmann::json::parse(r.out).at("perplexity").get<double>();
}

TEST(RetypedModel, Bf16AndQ5MixesReadTheTextAsTheirF16TwinsDo) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  test::TempDir dir;
  const std::string bf16 = dir.file("bf16.gguf"), q5 = dir.file("q5.gguf"), twin = dir.file("twin.gguf");
  // BF16 holds Q4_1's values to 8 significant bits: nearly the original's figure.
  write_retyped(model, bf16, TensorType::BF16, TensorType::BF16);
  const double original = perplexity(model), bf16_ppl = perplexity(bf16);
  ASSERT_GT(original, 1.0);
  EXPECT_NEAR(bf16_ppl, original, 0.005 * original);  // measured: 3.4605 and 3.4625
  // Each file against its F16 twin (the same values, read by the F16 kernels): only the
  // kernels differ, so the figures agree to the F16 rounding of the values.
  write_retyped(bf16, twin, TensorType::F16, TensorType::F16);
  EXPECT_NEAR(bf16_ppl, perplexity(twin), 0.002 * original);
  write_retyped(model, q5, TensorType::Q5_K, TensorType::Q5_1);
  int q5k = 0, q51 = 0;
  // The file must outlive the loop: a range-for over open(q5).tensors() would read a
  // vector the temporary GgufFile has already freed.
  const auto q5_file = gguf::GgufFile::open(q5);
  for (const auto& t : q5_file.tensors()) q5k += t.type == TensorType::Q5_K, q51 += t.type == TensorType::Q5_1;
  EXPECT_GT(q5k, 0);
  EXPECT_GT(q51, 0);
  const double q5_ppl = perplexity(q5);
  write_retyped(q5, twin, TensorType::F16, TensorType::F16);
  EXPECT_NEAR(q5_ppl, perplexity(twin), 0.002 * original);  // measured: 5.0407 and 5.0410
}

// Llama 3's RoPE frequency factors reach the forward pass: SmolLM2 with factors that are all 1
// reads the text exactly as the file without them; with the slow pairs turned 8 times slower
// (as Llama 3.2's are 32 times) it reads it differently. The factors' arithmetic itself is
// checked kernel by kernel (test_rope.cpp) and through the pot's re-rotation
// (test_memory_pot.cpp, CrRope ..._RopeFactors).
TEST(RopeFactorsOnARealModel, ReachTheForwardPass) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  test::TempDir dir;
  const int pairs = 32;  // SmolLM2: head_dim 64, all rotated
  std::vector<float> slow(pairs, 1.0f);
  for (int i = pairs / 2; i < pairs; ++i) slow[size_t(i)] = 8.0f;
  const std::string ones = dir.file("ones.gguf"), scaled = dir.file("scaled.gguf");
  write_with_rope_factors(model, ones, std::vector<float>(pairs, 1.0f));
  write_with_rope_factors(model, scaled, slow);
  const double original = perplexity(model);
  ASSERT_GT(original, 1.0);
  EXPECT_EQ(perplexity(ones), original);
  const double with_factors = perplexity(scaled);
  EXPECT_GT(with_factors, 1.0);
  EXPECT_GT(std::abs(with_factors - original), 1e-3 * original) << with_factors << " vs " << original;
}

}  // namespace
}  // namespace infinipot
