// One test per class of malformed GGUF: each asserts the GgufError message names the file,
// the field and the problem, so a user can tell a truncated download from a wrong format.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>

#include "model_loader/gguf.h"
#include "tests/kit/gguf_writer.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using gguf::GgufFile;
using gguf::TensorType;
using gguf::ValueType;
using test::parse_fails_with;
using test::RawGguf;

constexpr uint32_t kF32 = 0, kQ4_0 = 2;
constexpr uint32_t kString = static_cast<uint32_t>(ValueType::STRING);
constexpr uint32_t kArray = static_cast<uint32_t>(ValueType::ARRAY);
constexpr uint32_t kUint32 = static_cast<uint32_t>(ValueType::UINT32);

// One F32 tensor of `dims` at `offset` with enough zero data after the aligned header.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                                size_t data_bytes) {
  return RawGguf().header(3, 1, 0).tensor_info("t", dims, type, offset).pad_to(32).zeros(data_bytes).bytes();
}

TEST(GgufMalformed, BadMagic) {
  std::vector<uint8_t> b = RawGguf().raw("GGML").u32(3).u64(0).u64(0).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"test.gguf", "bad magic \"GGML\"", "expected \"GGUF\"", "not a GGUF"}));
  b = RawGguf().raw("\x7f" "ELF").zeros(60).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"bad magic \"\\x7fELF\""}));
}

TEST(GgufMalformed, UnsupportedVersions) {
  EXPECT_TRUE(parse_fails_with(RawGguf().header(1, 0, 0).bytes(),
                               {"unsupported GGUF version 1", "re-convert the model with a current converter"}));
  EXPECT_TRUE(parse_fails_with(RawGguf().header(4, 0, 0).bytes(), {"unsupported GGUF version 4", "expected 2 or 3"}));
  EXPECT_TRUE(parse_fails_with(RawGguf().header(0, 0, 0).bytes(), {"unsupported GGUF version 0"}));
  EXPECT_TRUE(parse_fails_with(RawGguf().header(0x03000000, 0, 0).bytes(), {"big-endian"}));
}

TEST(GgufMalformed, TruncatedHeader) {
  EXPECT_TRUE(parse_fails_with(RawGguf().raw("GG").bytes(), {"header magic", "needs 4 bytes", "only 2 remain", "truncated"}));
  EXPECT_TRUE(parse_fails_with(RawGguf().raw("GGUF").u32(3).u32(0).bytes(),
                               {"header tensor_count", "at offset 8", "needs 8 bytes", "truncated"}));
  EXPECT_TRUE(parse_fails_with(RawGguf().raw("GGUF").u32(3).u64(0).bytes(), {"header metadata kv_count", "truncated"}));
}

TEST(GgufMalformed, TruncatedMetadata) {
  // A UINT32 value cut after 2 bytes.
  std::vector<uint8_t> b = RawGguf().header(3, 0, 1).str("general.thing").u32(kUint32).raw("ab").bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'general.thing'", "needs 4 bytes but only 2 remain", "truncated"}));
  // A string value longer than the rest of the file.
  b = RawGguf().header(3, 0, 1).str("general.name").u32(kString).u64(100).raw("short").bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'general.name'", "string length 100", "exceeds the 5 bytes left"}));
  // The second key is cut in the middle of its name.
  b = RawGguf().header(3, 0, 2).kv_u32("a", 1).u64(20).raw("general.na").bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata key #1", "string length 20", "truncated"}));
  // An array whose elements run out.
  b = RawGguf().header(3, 0, 1).str("arr").u32(kArray).u32(kUint32).u64(4).u32(1).u32(2).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'arr'", "array of 4 UINT32 elements", "8 bytes remain"}));
}

TEST(GgufMalformed, TruncatedTensorInfos) {
  // Three tensor infos with long names, the file cut inside the third one's dimensions.
  const std::string pad(40, 'x');
  std::vector<uint8_t> b = RawGguf()
                               .header(3, 3, 0)
                               .tensor_info("first" + pad, {32}, kF32, 0)
                               .tensor_info("second" + pad, {32}, kF32, 128)
                               .str("third" + pad).u32(2).u64(32).raw(std::string_view("\x01\x00", 2))
                               .bytes();
  EXPECT_TRUE(parse_fails_with(b, {"tensor 'third" + pad + "' dimension 1", "needs 8 bytes but only 2 remain", "truncated"}));
  b = RawGguf().header(3, 2, 0).tensor_info("a" + pad, {8}, kF32, 0).str("b").u32(1).u64(8).u32(kF32).raw("\x01").bytes();
  EXPECT_TRUE(parse_fails_with(b, {"tensor 'b' offset", "needs 8 bytes", "truncated"}));
}

TEST(GgufMalformed, TruncatedTensorData) {
  gguf::GgufWriter w;
  w.add_tensor_f32("blk.3.attn_q.weight", TensorType::F32, {64, 4}, std::vector<float>(256, 1.f));
  std::vector<uint8_t> b = w.to_bytes();
  b.resize(b.size() - 100);
  EXPECT_TRUE(parse_fails_with(b, {"tensor 'blk.3.attn_q.weight': data [offset 0, 1024 bytes] runs past the end of the file",
                                   "the file is truncated or corrupt"}));
  // Cut before the data section even starts.
  b = RawGguf().header(3, 1, 0).tensor_info("t", {8}, kF32, 0).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"tensor data section starts at offset 64", "truncated"}));
}

TEST(GgufMalformed, HugeCounts) {
  EXPECT_TRUE(parse_fails_with(RawGguf().header(3, uint64_t{1} << 60, 0).zeros(64).bytes(),
                               {"tensor_count 1152921504606846976 is impossible", "only 64 bytes follow"}));
  EXPECT_TRUE(parse_fails_with(RawGguf().header(3, 0, std::numeric_limits<uint64_t>::max()).zeros(64).bytes(),
                               {"kv_count 18446744073709551615 is impossible"}));
  // Counts that fit one by one but not together.
  EXPECT_TRUE(parse_fails_with(RawGguf().header(3, 2, 2).zeros(70).bytes(), {"kv_count 2 is impossible"}));
}

TEST(GgufMalformed, HugeStringAndArrayLengths) {
  std::vector<uint8_t> b = RawGguf().header(3, 0, 1).u64(std::numeric_limits<uint64_t>::max()).zeros(32).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata key #0", "string length 18446744073709551615", "exceeds the 32 bytes left"}));
  b = RawGguf().header(3, 0, 1).str("arr").u32(kArray).u32(kUint32).u64(uint64_t{1} << 62).zeros(40).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'arr'", "array of 4611686018427387904 UINT32 elements", "only 40 bytes remain"}));
  b = RawGguf().header(3, 0, 1).str("arr").u32(kArray).u32(kString).u64(1000).zeros(40).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"array of 1000 STRING elements"}));
  // An array element string longer than the file.
  b = RawGguf().header(3, 0, 1).str("toks").u32(kArray).u32(kString).u64(2).str("ok").u64(1ull << 40).zeros(8).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'toks' element 1 of 2", "string length 1099511627776"}));
}

// Counts that the file could hold but whose parsed form would take far more memory than the
// file (an element of 1 byte becomes a Value) hit the loader's limits before allocating.
TEST(GgufMalformed, CountsOverTheLoaderLimits) {
  const uint64_t n = (uint64_t{1} << 23) + 1;
  std::vector<uint8_t> b = RawGguf().header(3, 0, 1).str("big").u32(kArray).u32(0 /* UINT8 */).u64(n).zeros(n).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'big'", "array of 8388609 elements exceeds the loader's limit"}));
  const uint64_t n_kv = (uint64_t{1} << 16) + 1;
  b = RawGguf().header(3, 0, n_kv).zeros(n_kv * 14).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"kv_count 65537 exceeds the loader's limit of 65536 keys"}));
  const uint64_t n_t = (uint64_t{1} << 20) + 1;
  b = RawGguf().header(3, n_t, 0).zeros(n_t * 33).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"tensor_count 1048577 exceeds the loader's limit"}));
}

TEST(GgufMalformed, UnknownValueTypes) {
  std::vector<uint8_t> b = RawGguf().header(3, 0, 1).str("k").u32(13).zeros(16).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'k'", "unknown value type 13", "expected 0..12"}));
  b = RawGguf().header(3, 0, 1).str("k").u32(kArray).u32(99).u64(1).zeros(16).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'k' array element", "unknown value type 99"}));
  b = RawGguf().header(3, 0, 1).str("k").u32(kArray).u32(kArray).u64(1).zeros(16).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'k'", "arrays of arrays are not supported"}));
  b = RawGguf().header(3, 0, 1).str("flag").u32(static_cast<uint32_t>(ValueType::BOOL)).u8(2).zeros(8).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata 'flag'", "BOOL value 2", "not 0 or 1"}));
}

TEST(GgufMalformed, UnknownTensorTypes) {
  EXPECT_TRUE(parse_fails_with(one_tensor({32}, 99, 0, 128), {"tensor 't' has unknown tensor type id 99"}));
  EXPECT_TRUE(parse_fails_with(one_tensor({32}, 4, 0, 128), {"unknown tensor type id 4"}));  // removed Q4_2
}

TEST(GgufMalformed, DimensionCounts) {
  EXPECT_TRUE(parse_fails_with(one_tensor({2, 2, 2, 2, 2}, kF32, 0, 128), {"tensor 't' has 5 dimensions; expected 1 to 4"}));
  EXPECT_TRUE(parse_fails_with(one_tensor({}, kF32, 0, 128), {"tensor 't' has 0 dimensions"}));
  std::vector<uint8_t> b = RawGguf().header(3, 1, 0).str("t").u32(0xffffffffu).zeros(64).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"has 4294967295 dimensions"}));
}

TEST(GgufMalformed, ZeroDimension) {
  EXPECT_TRUE(parse_fails_with(one_tensor({4, 0}, kF32, 0, 128), {"tensor 't': dimension 1 is 0", "must be > 0"}));
}

TEST(GgufMalformed, DimensionProductsThatOverflow) {
  EXPECT_TRUE(parse_fails_with(one_tensor({1ull << 32, 1ull << 32}, kF32, 0, 64),
                               {"tensor 't'", "element count", "overflows int64"}));
  // 2^62 elements fit in int64, but 2^64 bytes of F32 do not fit in uint64.
  EXPECT_TRUE(parse_fails_with(one_tensor({1ull << 31, 1ull << 31}, kF32, 0, 64), {"byte size", "overflows"}));
  EXPECT_TRUE(parse_fails_with(one_tensor({1ull << 63}, kF32, 0, 64), {"does not fit in int64"}));
}

TEST(GgufMalformed, RowNotAMultipleOfTheBlockSize) {
  EXPECT_TRUE(parse_fails_with(one_tensor({33, 2}, kQ4_0, 0, 128),
                               {"tensor 't' of type Q4_0 has row length 33", "not a multiple of the block size 32"}));
}

TEST(GgufMalformed, OffsetsPastTheEnd) {
  EXPECT_TRUE(parse_fails_with(one_tensor({8}, kF32, 1ull << 40, 64),
                               {"tensor 't': data [offset 1099511627776, 32 bytes] runs past the end of the file"}));
  EXPECT_TRUE(parse_fails_with(one_tensor({8}, kF32, std::numeric_limits<uint64_t>::max() - 31, 64), {"runs past the end"}));
  EXPECT_TRUE(parse_fails_with(one_tensor({8}, kF32, 64, 64), {"[offset 64, 32 bytes] runs past the end"}));
}

TEST(GgufMalformed, MisalignedTensor) {
  EXPECT_TRUE(parse_fails_with(one_tensor({8}, kF32, 4, 64), {"tensor 't': data offset 4 is not a multiple of the alignment 32"}));
  std::vector<uint8_t> b = RawGguf().header(3, 1, 1).kv_u32("general.alignment", 64).tensor_info("t", {8}, kF32, 32)
                               .pad_to(64).zeros(128).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"data offset 32 is not a multiple of the alignment 64"}));
}

TEST(GgufMalformed, BadAlignmentValue) {
  EXPECT_TRUE(parse_fails_with(RawGguf().header(3, 0, 1).kv_u32("general.alignment", 48).bytes(),
                               {"'general.alignment' is 48; expected a power of two"}));
  EXPECT_TRUE(parse_fails_with(RawGguf().header(3, 0, 1).kv_u32("general.alignment", 0).bytes(), {"is 0"}));
  std::vector<uint8_t> b = RawGguf().header(3, 0, 1).str("general.alignment").u32(static_cast<uint32_t>(ValueType::UINT64)).u64(32).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"'general.alignment' has type UINT64; expected UINT32"}));
}

TEST(GgufMalformed, OverlappingTensors) {
  std::vector<uint8_t> b = RawGguf().header(3, 2, 0).tensor_info("a", {16}, kF32, 0).tensor_info("b", {8}, kF32, 32)
                               .pad_to(32).zeros(128).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"tensors 'a' [offset 0, 64 bytes] and 'b' [offset 32, 32 bytes] overlap"}));
  b = RawGguf().header(3, 2, 0).tensor_info("a", {8}, kF32, 0).tensor_info("b", {8}, kF32, 0).pad_to(32).zeros(64).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"overlap"}));
}

TEST(GgufMalformed, DuplicateKeys) {
  std::vector<uint8_t> b = RawGguf().header(3, 0, 2).kv_u32("llama.block_count", 1).kv_u32("llama.block_count", 2).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"duplicate metadata key 'llama.block_count'"}));
  b = RawGguf().header(3, 0, 1).str("").u32(kUint32).u32(1).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"metadata key #0 is empty"}));
}

TEST(GgufMalformed, DuplicateTensors) {
  std::vector<uint8_t> b = RawGguf().header(3, 2, 0).tensor_info("w", {8}, kF32, 0).tensor_info("w", {8}, kF32, 32)
                               .pad_to(32).zeros(64).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"duplicate tensor name 'w'", "#0 and #1"}));
  b = RawGguf().header(3, 1, 0).tensor_info("", {8}, kF32, 0).pad_to(32).zeros(64).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"tensor info #0 has an empty name"}));
}

TEST(GgufMalformed, BinaryNamesAreEscapedInMessages) {
  std::vector<uint8_t> b = RawGguf().header(3, 0, 2).kv_u32(std::string("k\x01\xff", 3), 1)
                               .kv_u32(std::string("k\x01\xff", 3), 1).bytes();
  EXPECT_TRUE(parse_fails_with(b, {"duplicate metadata key 'k\\x01\\xff'"}));
}

TEST(GgufMalformed, EmptyFile) {
  EXPECT_TRUE(parse_fails_with({}, {"test.gguf", "the file is empty"}));
  test::TempDir dir;
  test::write_file(dir.file("empty.gguf"), {});
  EXPECT_TRUE(test::throws_gguf_error([&] { GgufFile::open(dir.file("empty.gguf")); }, {"empty.gguf", "the file is empty"}));
}

TEST(GgufMalformed, DirectoryPath) {
  test::TempDir dir;
  EXPECT_TRUE(test::throws_gguf_error([&] { GgufFile::open(dir.path()); }, {dir.path(), "is a directory"}));
}

TEST(GgufMalformed, MissingFile) {
  test::TempDir dir;
  const std::string path = dir.file("nope.gguf");
  EXPECT_TRUE(test::throws_gguf_error([&] { GgufFile::open(path); },
                                      {path, "cannot open the model file", "No such file or directory"}));
}

TEST(GgufMalformed, UnreadableFile) {
  test::TempDir dir;
  const std::string path = dir.file("locked.gguf");
  test::write_file(path, gguf::GgufWriter().to_bytes());
  chmod(path.c_str(), 0);
  if (geteuid() == 0) {
    // root reads it anyway; the open must then succeed rather than fail oddly.
    EXPECT_NO_THROW(GgufFile::open(path));
  } else {
    EXPECT_TRUE(test::throws_gguf_error([&] { GgufFile::open(path); }, {path, "Permission denied"}));
  }
}

TEST(GgufMalformed, NotARegularFile) {
  EXPECT_TRUE(test::throws_gguf_error([&] { GgufFile::open("/dev/null"); }, {"/dev/null", "not a regular file"}));
}

}  // namespace
}  // namespace infinipot
