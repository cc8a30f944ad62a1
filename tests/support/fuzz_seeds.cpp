#include "tests/support/fuzz_seeds.h"

#include <cmath>

#include "tests/kit/gguf_writer.h"
#include "model_loader/quant.h"
#include "tests/kit/tiny_model.h"

namespace infinipot::test {
namespace {

using gguf::GgufWriter;
using gguf::TensorType;
using gguf::ValueType;

TinyLlamaOptions small_model() {
  TinyLlamaOptions o;
  o.n_layer = 1;
  o.n_embd = 32;
  o.n_ff = 64;
  o.n_head = 2;
  o.n_head_kv = 1;
  o.n_ctx = 64;
  o.n_merges = 24;
  return o;
}

// Every value type, short and long (> 16 elements, summarised by inspect) arrays.
std::vector<uint8_t> all_value_types() {
  GgufWriter w;
  w.set("u8", gguf::value_u8(1));
  w.set("i8", gguf::value_i8(-1));
  w.set("u16", gguf::value_u16(2));
  w.set("i16", gguf::value_i16(-2));
  w.set("u32", gguf::value_u32(3));
  w.set("i32", gguf::value_i32(-3));
  w.set("u64", gguf::value_u64(4));
  w.set("i64", gguf::value_i64(-4));
  w.set("f32", gguf::value_f32(0.5f));
  w.set("f64", gguf::value_f64(0.25));
  w.set("bool", gguf::value_bool(true));
  w.set("string", gguf::value_string("text"));
  w.set_string_array("strings", {"a", "bb"});
  w.set_i32_array("long_ints", std::vector<int32_t>(20, 7));
  w.set_f32_array("floats", {1.f, 2.f});
  w.set("bools", gguf::value_array(ValueType::BOOL, {gguf::value_bool(false), gguf::value_bool(true)}));
  w.set("u64s", gguf::value_array(ValueType::UINT64, {gguf::value_u64(9)}));
  w.set("general.alignment", gguf::value_u32(16));
  return w.to_bytes();
}

// One small tensor of each supported type, plus known-but-unsupported ones.
std::vector<uint8_t> tensor_zoo() {
  GgufWriter w;
  auto values = [](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i));
    return v;
  };
  w.add_tensor_f32("f32", TensorType::F32, {8}, values(8));
  w.add_tensor_f32("f16", TensorType::F16, {8, 2}, values(16));
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0}) {
    w.add_tensor_f32(quant::traits(t).name, t, {32, 2}, values(64));
  }
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    w.add_tensor_f32(quant::traits(t).name, t, {256}, values(256));
  }
  w.add_tensor("bf16", TensorType::BF16, {4}, std::vector<uint8_t>(8));
  w.add_tensor("q2_k", TensorType::Q2_K, {256}, std::vector<uint8_t>(84));
  return w.to_bytes();
}

}  // namespace

std::vector<FuzzSeed> gguf_fuzz_seeds() {
  std::vector<FuzzSeed> seeds;

  TinyLlamaOptions q4 = small_model();
  q4.matrix_type = TensorType::Q4_0;
  q4.embd_type = TensorType::Q4_0;
  seeds.push_back({"tiny_llama_q4_0_tokenizer.gguf.seed", tiny_llama_bytes(q4), true});

  TinyLlamaOptions q8 = small_model();
  q8.with_tokenizer = false;
  q8.n_vocab = 32;
  q8.matrix_type = TensorType::Q8_0;
  q8.embd_type = TensorType::Q4_1;
  q8.output_type = TensorType::Q8_0;
  q8.tied_embeddings = false;
  q8.alignment = 64;
  seeds.push_back({"tiny_llama_q8_0_untied.gguf.seed", tiny_llama_bytes(q8), true});

  TinyLlamaOptions f16 = small_model();
  f16.with_tokenizer = false;
  f16.n_vocab = 32;
  f16.matrix_type = TensorType::F16;
  f16.embd_type = TensorType::F16;
  f16.n_ff = 32;  // F16 weights are 4x the size of Q4_0: stay under 20 KB
  std::vector<uint8_t> v2 = tiny_llama_bytes(f16);
  v2[4] = 2;  // GGUF v2: same layout
  seeds.push_back({"tiny_llama_f16_v2.gguf.seed", std::move(v2), true});

  seeds.push_back({"all_value_types.gguf.seed", all_value_types(), false});
  seeds.push_back({"tensor_zoo.gguf.seed", tensor_zoo(), false});
  seeds.push_back({"header_only.gguf.seed", GgufWriter().to_bytes(), false});
  return seeds;
}

}  // namespace infinipot::test
