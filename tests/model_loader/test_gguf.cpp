// GGUF reader: round trips through GgufWriter (every value type, tensors, alignment), the
// typed getters and their errors, the real model's structure, and robustness on every
// truncation and single-byte corruption of a small file. Malformed classes one by one are in
// test_gguf_malformed.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "model_loader/gguf.h"
#include "tests/kit/gguf_writer.h"
#include "model_loader/quant.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using gguf::GgufFile;
using gguf::GgufWriter;
using gguf::TensorType;
using gguf::ValueType;
using test::throws_gguf_error;

GgufWriter every_value_type_writer(uint32_t alignment = 32) {
  GgufWriter w(alignment);
  w.set("u8", gguf::value_u8(200));
  w.set("i8", gguf::value_i8(-100));
  w.set("u16", gguf::value_u16(60000));
  w.set("i16", gguf::value_i16(-30000));
  w.set("u32", gguf::value_u32(4000000000u));
  w.set("i32", gguf::value_i32(-2000000000));
  w.set("u64", gguf::value_u64(std::numeric_limits<uint64_t>::max()));
  w.set("i64", gguf::value_i64(std::numeric_limits<int64_t>::min()));
  w.set("f32", gguf::value_f32(0.1f));
  w.set("f64", gguf::value_f64(0.1));
  w.set("bool", gguf::value_bool(true));
  w.set("string", gguf::value_string("héllo\nworld"));
  w.set("empty_string", gguf::value_string(""));
  w.set_string_array("str_array", {"a", "", "ccc"});
  w.set_i32_array("i32_array", {1, -2, 3});
  w.set_f32_array("f32_array", {0.5f, -1.25f});
  w.set("u8_array", gguf::value_array(ValueType::UINT8, {gguf::value_u8(1), gguf::value_u8(255)}));
  w.set("bool_array", gguf::value_array(ValueType::BOOL, {gguf::value_bool(false), gguf::value_bool(true)}));
  w.set("u64_array", gguf::value_array(ValueType::UINT64, {gguf::value_u64(1ull << 40)}));
  w.set("f64_array", gguf::value_array(ValueType::FLOAT64, {gguf::value_f64(-2.5)}));
  w.set("empty_array", gguf::value_array(ValueType::INT16, {}));
  return w;
}

void add_test_tensors(GgufWriter& w) {
  std::vector<float> v(64 * 3);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i));
  w.add_tensor_f32("f32", TensorType::F32, {64, 3}, v);
  w.add_tensor_f32("q8", TensorType::Q8_0, {64, 3}, v);
  w.add_tensor_f32("one_d", TensorType::F16, {7}, {1, 2, 3, 4, 5, 6, 7});
  w.add_tensor_f32("four_d", TensorType::F32, {2, 3, 4, 5}, std::vector<float>(120, 1.f));
}

TEST(GgufRoundTrip, EveryValueTypeSurvives) {
  GgufWriter w = every_value_type_writer();
  const std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "rt.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 21u);
  EXPECT_EQ(f.get("u8").type, ValueType::UINT8);
  EXPECT_EQ(f.get_u64("u8"), 200u);
  EXPECT_EQ(f.get("i8").as_i64(), -100);
  EXPECT_EQ(f.get_u32("u16"), 60000u);
  EXPECT_EQ(f.get("i16").as_i64(), -30000);
  EXPECT_EQ(f.get_u32("u32"), 4000000000u);
  EXPECT_EQ(f.get("i32").as_i64(), -2000000000);
  EXPECT_EQ(f.get_u64("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get("i64").as_i64(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_f32("f32"), 0.1f);
  EXPECT_EQ(f.get("f64").as_f64(), 0.1);
  EXPECT_TRUE(f.get_bool("bool", false));
  EXPECT_EQ(f.get_string("string"), "héllo\nworld");
  EXPECT_EQ(f.get_string("empty_string"), "");
  EXPECT_EQ(f.get_string_array("str_array"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_int_array("i32_array"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_float_array("f32_array"), (std::vector<float>{0.5f, -1.25f}));
  EXPECT_EQ(f.get_int_array("u8_array"), (std::vector<int64_t>{1, 255}));
  EXPECT_EQ(f.get("bool_array").array.at(1).as_bool(), true);
  EXPECT_EQ(f.get_int_array("u64_array"), (std::vector<int64_t>{1ll << 40}));
  EXPECT_EQ(f.get_float_array("f64_array"), (std::vector<float>{-2.5f}));
  EXPECT_EQ(f.get("empty_array").elem_type, ValueType::INT16);
  EXPECT_TRUE(f.get("empty_array").array.empty());
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufRoundTrip, TensorsKeepShapeTypeOffsetAndBytes) {
  for (uint32_t alignment : {32u, 64u, 1u, 4096u}) {
    SCOPED_TRACE(alignment);
    GgufWriter w = every_value_type_writer(alignment);
    add_test_tensors(w);
    const std::vector<uint8_t> bytes = w.to_bytes();
    GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_EQ(f.alignment(), alignment);
    EXPECT_EQ(f.data_offset() % alignment, 0u);
    ASSERT_EQ(f.tensors().size(), 4u);
    const gguf::TensorInfo* t = f.find_tensor("q8");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, TensorType::Q8_0);
    EXPECT_EQ(t->shape, (std::vector<int64_t>{64, 3}));
    EXPECT_EQ(t->n_elements(), 192);
    EXPECT_EQ(t->rows(), 3);
    EXPECT_EQ(t->n_bytes, 3u * 2 * 34);
    for (const gguf::TensorInfo& ti : f.tensors()) EXPECT_EQ(ti.offset % alignment, 0u) << ti.name;
    const gguf::TensorInfo* four = f.find_tensor("four_d");
    ASSERT_NE(four, nullptr);
    EXPECT_EQ(four->shape.size(), 4u);
    EXPECT_EQ(four->rows(), 60);

    const gguf::TensorInfo* f32 = f.find_tensor("f32");
    ASSERT_NE(f32, nullptr);
    float first[3];
    std::memcpy(first, f.tensor_data(*f32), sizeof first);
    EXPECT_EQ(first[0], std::sin(0.f));
    EXPECT_EQ(first[2], std::sin(2.f));
    std::vector<float> d(7);
    quant::dequantize_row(TensorType::F16, f.tensor_data(*f.find_tensor("one_d")), d.data(), 7);
    EXPECT_EQ(d, (std::vector<float>{1, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(f.find_tensor("absent"), nullptr);
  }
}

TEST(GgufRoundTrip, OpenMapsTheFileFromDisk) {
  test::TempDir dir;
  GgufWriter w = every_value_type_writer();
  add_test_tensors(w);
  const std::string path = dir.file("m.gguf");
  w.write(path);
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.path(), path);
  EXPECT_EQ(f.file_size(), w.to_bytes().size());
  EXPECT_EQ(f.tensors().size(), 4u);
  // Moving keeps the mapping (and tensor pointers) valid.
  const uint8_t* data = f.tensor_data(f.tensors()[0]);
  GgufFile moved = std::move(f);
  EXPECT_EQ(moved.tensor_data(moved.tensors()[0]), data);
  EXPECT_EQ(moved.get_string("string"), "héllo\nworld");
}

TEST(GgufRoundTrip, Version2FilesAreAccepted) {
  std::vector<uint8_t> bytes = every_value_type_writer().to_bytes();
  bytes[4] = 2;  // v2 has the same layout as v3 (v3 only added big-endian files)
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(f.version(), 2u);
}

TEST(GgufGetters, ErrorsNameTheKeyAndTheTypes) {
  const std::vector<uint8_t> bytes = every_value_type_writer().to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "g.gguf");
  EXPECT_TRUE(throws_gguf_error([&] { f.get("nope"); }, {"g.gguf", "missing required metadata key 'nope'"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_u64("string"); }, {"metadata 'string'", "expected an integer", "STRING"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_u64("i8"); }, {"'i8'", "non-negative", "-100"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_u32("u64"); }, {"'u64'", "does not fit in uint32"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get("u64").as_i64(); }, {"does not fit in int64"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_string("u32"); }, {"'u32'", "expected a STRING", "UINT32"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_bool("u8", true); }, {"'u8'", "expected a BOOL"}));
  EXPECT_TRUE(f.get_bool("absent", true));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_f32("str_array"); }, {"'str_array'", "ARRAY of STRING"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_string_array("i32_array"); }, {"'i32_array'", "element 0", "STRING"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_int_array("f32_array"); }, {"'f32_array'", "element 0", "integer"}));
  EXPECT_TRUE(throws_gguf_error([&] { f.get_float_array("string"); }, {"'string'", "expected an ARRAY"}));
  EXPECT_EQ(f.get_f32("u16"), 60000.f);  // integers convert to float
  EXPECT_TRUE(f.get("f32").is_float());
  EXPECT_TRUE(f.get("i16").is_integer());
  EXPECT_FALSE(f.get("bool").is_integer());
}

TEST(GgufWriterTest, RejectsWhatTheFormatForbids) {
  GgufWriter w;
  w.set_u32("a", 1);
  EXPECT_TRUE(throws_gguf_error([&] { w.set_u32("a", 2); }, {"duplicate metadata key 'a'"}));
  EXPECT_TRUE(throws_gguf_error([&] { w.set_u32("general.alignment", 48); }, {"not a power of two"}));
  EXPECT_TRUE(throws_gguf_error(
      [&] { gguf::value_array(ValueType::UINT8, {gguf::value_i8(1)}); }, {"element 0", "INT8", "UINT8"}));
  EXPECT_TRUE(throws_gguf_error([&] { gguf::value_array(ValueType::ARRAY, {}); }, {"arrays of arrays"}));
  EXPECT_TRUE(throws_gguf_error([&] { w.add_tensor("t", TensorType::F32, {4}, std::vector<uint8_t>(15)); },
                                {"'t'", "15 bytes", "need 16"}));
  EXPECT_TRUE(throws_gguf_error([&] { w.add_tensor_f32("q", TensorType::Q4_0, {33}, std::vector<float>(33)); },
                                {"not a multiple of the block size 32"}));
  w.add_tensor("t", TensorType::F32, {4}, std::vector<uint8_t>(16));
  EXPECT_TRUE(throws_gguf_error([&] { w.add_tensor("t", TensorType::F32, {4}, std::vector<uint8_t>(16)); },
                                {"duplicate tensor 't'"}));
  w.replace("a", gguf::value_string("x"));
  EXPECT_TRUE(w.erase_tensor("t"));
  EXPECT_FALSE(w.erase("zzz"));
  const std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  EXPECT_EQ(f.get_string("a"), "x");
  EXPECT_TRUE(f.tensors().empty());
}

TEST(GgufRealModel, StructureMatchesSmolLM2) {
  const std::string path = test::real_model_path();
  ASSERT_FALSE(path.empty());
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 33u);
  ASSERT_EQ(f.tensors().size(), 272u);
  std::map<std::string, int> by_type;
  for (const gguf::TensorInfo& t : f.tensors()) ++by_type[quant::traits(t.type).name];
  EXPECT_EQ(by_type, (std::map<std::string, int>{{"F32", 61}, {"Q4_1", 210}, {"Q8_0", 1}}));
  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, TensorType::Q8_0);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "smollm");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges").at(0), "Ġ t");
}

// A small but complete file: metadata of several kinds, three tensors.
std::vector<uint8_t> small_file() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("n", 7);
  w.set_string_array("list", {"x", "yy"});
  w.set_f32_array("floats", {1.f, 2.f});
  w.add_tensor_f32("a", TensorType::F32, {4, 2}, std::vector<float>(8, 1.f));
  w.add_tensor_f32("b", TensorType::Q8_0, {32}, std::vector<float>(32, 0.5f));
  w.add_tensor_f32("c", TensorType::F16, {3}, {1, 2, 3});
  return w.to_bytes();
}

// Every outcome must be success or GgufError: no other exception, crash or hang.
void parse_must_not_misbehave(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::from_memory(bytes.data(), bytes.size());
  } catch (const gguf::GgufError&) {
  }
}

TEST(GgufRobustness, EveryTruncationIsAnErrorNotACrash) {
  const std::vector<uint8_t> full = small_file();
  GgufFile whole = GgufFile::from_memory(full.data(), full.size());
  const gguf::TensorInfo& last = whole.tensors().back();
  const size_t needed = whole.data_offset() + last.offset + last.n_bytes;
  ASSERT_LT(needed, full.size());  // the writer pads after the last tensor
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    // Prefixes holding the last tensor's data parse (trailing padding is optional); all
    // shorter ones must fail cleanly.
    bool ok = true;
    try {
      GgufFile::from_memory(prefix.data(), prefix.size());
    } catch (const gguf::GgufError&) {
      ok = false;
    }
    EXPECT_EQ(ok, n >= needed) << "prefix of " << n << " bytes";
  }
}

TEST(GgufRobustness, EverySingleByteCorruptionIsHandled) {
  const std::vector<uint8_t> full = small_file();
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t x : {uint8_t{0x00}, uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x01}, uint8_t{0x7f}}) {
      std::vector<uint8_t> bad = full;
      bad[i] ^= x;
      parse_must_not_misbehave(bad);
    }
  }
}

}  // namespace
}  // namespace infinipot
