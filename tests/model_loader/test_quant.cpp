// Quant formats: traits, fp16 conversion (exhaustively), reference dequantization of
// hand-built blocks with values worked out by hand from the layout, and quantize/dequantize
// round trips under stated error bounds. (The dequantizers were also checked bit-exact
// against gguf-py's numpy dequantizers on random blocks and on the real model's tensors.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "model_loader/quant.h"
#include "model_loader/quant_blocks.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using gguf::TensorType;
using quant::fp16_to_fp32;
using quant::fp32_to_fp16;

constexpr uint16_t kHalfOne = 0x3c00, kHalfHalf = 0x3800, kHalfQuarter = 0x3400, kHalfMinusOne = 0xbc00;

template <typename Block>
std::vector<float> dequant(TensorType t, const Block& b) {
  const int64_t n = quant::traits(t).block_elems;
  std::vector<float> out(static_cast<size_t>(n));
  quant::dequantize_row(t, &b, out.data(), n);
  return out;
}

TEST(QuantTraits, BlockSizesFollowTheGgmlFormats) {
  struct Row { TensorType t; const char* name; int64_t elems; size_t bytes; bool supported; };
  const Row rows[] = {
      {TensorType::F32, "F32", 1, 4, true},       {TensorType::F16, "F16", 1, 2, true},
      {TensorType::BF16, "BF16", 1, 2, true},    {TensorType::Q4_0, "Q4_0", 32, 18, true},
      {TensorType::Q4_1, "Q4_1", 32, 20, true},   {TensorType::Q5_0, "Q5_0", 32, 22, true},
      {TensorType::Q5_1, "Q5_1", 32, 24, true},   {TensorType::Q8_0, "Q8_0", 32, 34, true},
      {TensorType::Q8_1, "Q8_1", 32, 36, false},  {TensorType::Q2_K, "Q2_K", 256, 84, false},
      {TensorType::Q3_K, "Q3_K", 256, 110, false}, {TensorType::Q4_K, "Q4_K", 256, 144, true},
      {TensorType::Q5_K, "Q5_K", 256, 176, true}, {TensorType::Q6_K, "Q6_K", 256, 210, true},
      {TensorType::Q8_K, "Q8_K", 256, 292, false},
  };
  for (const Row& r : rows) {
    const quant::TypeTraits& tr = quant::traits(r.t);
    EXPECT_STREQ(tr.name, r.name);
    EXPECT_EQ(tr.block_elems, r.elems) << r.name;
    EXPECT_EQ(tr.block_bytes, r.bytes) << r.name;
    EXPECT_EQ(tr.supported, r.supported) << r.name;
    EXPECT_TRUE(quant::is_known_type(static_cast<uint32_t>(r.t)));
  }
  EXPECT_FALSE(quant::is_known_type(4));   // removed Q4_2
  EXPECT_FALSE(quant::is_known_type(31));  // removed Q4_0_4_4
  EXPECT_FALSE(quant::is_known_type(1000));
  EXPECT_TRUE(test::throws_gguf_error([] { quant::traits(static_cast<TensorType>(77)); }, {"unknown tensor type id 77"}));
  EXPECT_EQ(quant::row_bytes(TensorType::Q4_1, 576), 18u * 20);
  EXPECT_EQ(quant::row_bytes(TensorType::Q6_K, 512), 2u * 210);
  EXPECT_EQ(quant::row_bytes(TensorType::F16, 3), 6u);
  EXPECT_TRUE(test::throws_gguf_error([] { quant::row_bytes(TensorType::Q8_0, 40); }, {"40", "Q8_0", "block size 32"}));
}

TEST(QuantTraits, UnsupportedAndRaggedRowsAreErrors) {
  float out[256];
  uint8_t in[292] = {};
  EXPECT_TRUE(test::throws_gguf_error([&] { quant::dequantize_row(TensorType::Q2_K, in, out, 256); },
                                      {"no reference dequantizer", "Q2_K"}));
  EXPECT_TRUE(test::throws_gguf_error([&] { quant::quantize_row(TensorType::Q8_1, out, in, 32); },
                                      {"no reference quantizer", "Q8_1"}));
  EXPECT_TRUE(test::throws_gguf_error([&] { quant::dequantize_row(TensorType::Q4_0, in, out, 33); },
                                      {"33", "Q4_0", "block size 32"}));
}

// BF16 keeps a float's upper 16 bits, rounded to nearest with ties to even; reading it back
// is exact.
TEST(Bf16, RoundsToNearestEvenAndReadsBackExactly) {
  auto bits = [](uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; };
  const float in[6] = {1.0f, bits(0x3F808000), bits(0x3F818000), bits(0x3F80C000), -2.5f, std::nanf("")};
  uint16_t q[6];
  quant::quantize_row(TensorType::BF16, in, q, 6);
  EXPECT_EQ(q[0], 0x3F80);
  EXPECT_EQ(q[1], 0x3F80) << "a tie goes to the even neighbour (down here)";
  EXPECT_EQ(q[2], 0x3F82) << "a tie goes to the even neighbour (up here)";
  EXPECT_EQ(q[3], 0x3F81) << "above the tie rounds up";
  EXPECT_EQ(q[4], 0xC020);
  float out[6];
  quant::dequantize_row(TensorType::BF16, q, out, 6);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[2], bits(0x3F820000));
  EXPECT_EQ(out[4], -2.5f);
  EXPECT_TRUE(std::isnan(out[5]));
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(0.f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.f), 0x7bff);           // largest finite half
  EXPECT_EQ(fp32_to_fp16(65519.f), 0x7bff);           // still rounds down
  EXPECT_EQ(fp32_to_fp16(65520.f), 0x7c00);           // rounds up to inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -25)), 0x0000);  // half of it: tie to even (0)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.f, -26)), 0x0001);  // 0.75 of it rounds up
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.f, -25)), 0x0002);  // 1.5: tie to even (2)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.f, -25)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(1.f + std::ldexp(1.f, -11)), 0x3c00);       // tie to even
  EXPECT_EQ(fp32_to_fp16(1.f + 3 * std::ldexp(1.f, -11)), 0x3c02);   // tie to even (up)
  EXPECT_EQ(fp32_to_fp16(1e-10f), 0x0000);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);

  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(fp16_to_fp32(0x83ff), -std::ldexp(1023.f, -24));
  EXPECT_EQ(fp16_to_fp32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00)));
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
}

TEST(Fp16, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << std::hex << h;
    } else {
      ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
    }
  }
}

TEST(Fp16, RoundsToTheNearestHalf) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.f, 70000.f);
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng) * std::ldexp(1.f, static_cast<int>(rng() % 40) - 30);
    const uint16_t h = fp32_to_fp16(x);
    const float y = fp16_to_fp32(h);
    if (std::isinf(y)) {
      ASSERT_GE(std::fabs(x), 65520.f);
      continue;
    }
    // No other half is strictly closer than the one chosen.
    for (int delta : {-1, 1}) {
      const uint16_t other = static_cast<uint16_t>(h + delta);
      const float z = fp16_to_fp32(other);
      if (std::isnan(z) || ((other ^ h) & 0x8000)) continue;
      ASSERT_LE(std::fabs(y - x), std::fabs(z - x)) << x;
    }
  }
}

TEST(Dequant, F16AndF32) {
  const uint16_t halves[4] = {kHalfOne, kHalfHalf, kHalfMinusOne, 0x7bff};
  float out[4];
  quant::dequantize_row(TensorType::F16, halves, out, 4);
  EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{1.f, 0.5f, -1.f, 65504.f}));
  const float f[2] = {3.5f, -0.f};
  quant::dequantize_row(TensorType::F32, f, out, 2);
  EXPECT_EQ(out[0], 3.5f);
}

TEST(Dequant, Q4_0HandBuilt) {
  quant::BlockQ4_0 b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j);  // low nibble j, high nibble 0
  b.qs[15] = 0xff;
  const auto y = dequant(TensorType::Q4_0, b);
  EXPECT_EQ(y[0], -4.f);   // (0 - 8) * 0.5
  EXPECT_EQ(y[9], 0.5f);   // (9 - 8) * 0.5
  EXPECT_EQ(y[15], 3.5f);  // (15 - 8) * 0.5
  EXPECT_EQ(y[16], -4.f);  // high nibble of qs[0] is 0
  EXPECT_EQ(y[31], 3.5f);  // high nibble of qs[15]
}

TEST(Dequant, Q4_1HandBuilt) {
  quant::BlockQ4_1 b{};
  b.d = kHalfQuarter;
  b.m = kHalfMinusOne;
  b.qs[0] = 0xf0;
  b.qs[3] = 0x08;
  const auto y = dequant(TensorType::Q4_1, b);
  EXPECT_EQ(y[0], -1.f);         // 0 * 0.25 - 1
  EXPECT_EQ(y[16], 2.75f);       // 15 * 0.25 - 1
  EXPECT_EQ(y[3], 1.f);          // 8 * 0.25 - 1
  EXPECT_EQ(y[19], -1.f);
}

TEST(Dequant, Q5_0HandBuilt) {
  quant::BlockQ5_0 b{};
  b.d = kHalfOne;
  b.qs[0] = 0x03;
  b.qs[15] = 0xf0;
  const uint32_t qh = 0x80000001u;  // fifth bit of elements 0 and 31
  std::memcpy(b.qh, &qh, 4);
  const auto y = dequant(TensorType::Q5_0, b);
  EXPECT_EQ(y[0], 3.f);     // (3 | 16) - 16
  EXPECT_EQ(y[1], -16.f);   // (0 | 0) - 16
  EXPECT_EQ(y[16], -16.f);  // high nibble of qs[0], bit 16 clear
  EXPECT_EQ(y[31], 15.f);   // (15 | 16) - 16
  EXPECT_EQ(y[15], -16.f);  // low nibble of qs[15] is 0
}

TEST(Dequant, Q5_1HandBuilt) {
  quant::BlockQ5_1 b{};
  b.d = kHalfHalf;
  b.m = kHalfOne;
  b.qs[0] = 0x03;
  b.qs[15] = 0xf0;
  const uint32_t qh = 0x80000001u;
  std::memcpy(b.qh, &qh, 4);
  const auto y = dequant(TensorType::Q5_1, b);
  EXPECT_EQ(y[0], 10.5f);  // 19 * 0.5 + 1
  EXPECT_EQ(y[1], 1.f);    // 0 * 0.5 + 1
  EXPECT_EQ(y[31], 16.5f); // 31 * 0.5 + 1
}

TEST(Dequant, Q8_0HandBuilt) {
  quant::BlockQ8_0 b{};
  b.d = kHalfQuarter;
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i - 16);
  b.qs[0] = -128;
  const auto y = dequant(TensorType::Q8_0, b);
  EXPECT_EQ(y[0], -32.f);
  EXPECT_EQ(y[16], 0.f);
  EXPECT_EQ(y[31], 3.75f);
}

// Scales {1,2,3,4,5,6,7,63} and mins {0,1,2,3,4,5,6,63}, packed by hand: bytes 0-3 hold
// scales 0-3 plus the top 2 bits of scales 4-7 in bits 6-7 (only scale 7 = 63 has them), bytes
// 4-7 the same for the mins, bytes 8-11 the low nibbles of scale/min 4-7.
const uint8_t kKScales[12] = {1, 2, 3, 4 | 0xc0, 0, 1, 2, 3 | 0xc0, 0x45, 0x56, 0x67, 0xff};

TEST(Dequant, Q4_KHandBuilt) {
  quant::BlockQ4_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  std::memcpy(b.scales, kKScales, 12);
  std::memset(b.qs, 0x21, sizeof b.qs);  // low nibbles 1, high nibbles 2
  const auto y = dequant(TensorType::Q4_K, b);
  // Sub-block j covers elements 32j..32j+31: even j use low nibbles (1), odd j high ones (2).
  EXPECT_EQ(y[0], 1.f);      // 1*1*1 - 0.5*0
  EXPECT_EQ(y[32], 3.5f);    // 1*2*2 - 0.5*1
  EXPECT_EQ(y[64], 2.f);     // 1*3*1 - 0.5*2
  EXPECT_EQ(y[96], 6.5f);    // 1*4*2 - 0.5*3
  EXPECT_EQ(y[128], 3.f);    // 1*5*1 - 0.5*4
  EXPECT_EQ(y[160], 9.5f);   // 1*6*2 - 0.5*5
  EXPECT_EQ(y[192], 4.f);    // 1*7*1 - 0.5*6
  EXPECT_EQ(y[255], 94.5f);  // 1*63*2 - 0.5*63
}

TEST(Dequant, Q5_KHandBuilt) {
  quant::BlockQ5_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  std::memcpy(b.scales, kKScales, 12);
  std::memset(b.qs, 0x21, sizeof b.qs);
  b.qh[0] = 0x01;  // element 0 (chunk 0, low half) gets +16
  b.qh[5] = 0x80;  // element 64*3 + 32 + 5 = 229 (chunk 3, high half) gets +16
  const auto y = dequant(TensorType::Q5_K, b);
  EXPECT_EQ(y[0], 17.f);       // 1*1*(1+16) - 0
  EXPECT_EQ(y[1], 1.f);
  EXPECT_EQ(y[32], 3.5f);      // bit 1 of qh[0] clear
  EXPECT_EQ(y[229], 1102.5f);  // 1*63*(2+16) - 0.5*63
  EXPECT_EQ(y[228], 94.5f);
}

TEST(Dequant, Q6_KHandBuilt) {
  quant::BlockQ6_K b{};
  b.d = kHalfHalf;
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(i - 8);
  // With all codes 0 every element is 0.5 * scale * (0 - 32).
  b.ql[0] = 0x3a;   // element 0 low bits 10, element 64 low bits 3
  b.qh[0] = 0xe4;   // top bits: element 0 -> 0, element 32 -> 1, element 64 -> 2, element 96 -> 3
  b.ql[80] = 0x0f;  // second half (ql[64..]), l = 16: element 128 + 16 = 144 low bits 15
  b.qh[48] = 0x03;  // its top bits 3 -> code 63
  const auto y = dequant(TensorType::Q6_K, b);
  EXPECT_EQ(y[0], 88.f);     // 0.5 * -8 * (10 - 32)
  EXPECT_EQ(y[32], 48.f);    // 0.5 * -6 * (16 - 32)   (scale index 32 / 16 = 2)
  EXPECT_EQ(y[64], -6.f);    // 0.5 * -4 * (35 - 32)
  EXPECT_EQ(y[96], -16.f);   // 0.5 * -2 * (48 - 32)
  EXPECT_EQ(y[144], 15.5f);  // 0.5 * 1 * (63 - 32)
  EXPECT_EQ(y[1], 128.f);    // 0.5 * -8 * -32
  EXPECT_EQ(y[255], -112.f); // 0.5 * 7 * -32
}

struct RoundTripCase {
  TensorType type;
  double max_rel_rmse;  // ||y - x|| / ||x|| over N(0, 1) data
  // Largest |y - x| for any element, as a fraction of its block's max |x|.
  double max_err_vs_block_absmax;
};

// Names the case in test output instead of gtest's byte dump.
void PrintTo(const RoundTripCase& c, std::ostream* os) { *os << quant::traits(c.type).name; }

class QuantRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(QuantRoundTrip, ErrorWithinBounds) {
  const RoundTripCase c = GetParam();
  const int64_t block = quant::traits(c.type).block_elems == 1 ? 256 : quant::traits(c.type).block_elems;
  const int64_t n = 64 * 256;
  std::mt19937 rng(123);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  // A few blocks with structure that trips naive quantizers: all zero, constant, one
  // outlier, all negative, small weights (0.001 scale: the k-quant super-block scales are
  // then fp16 subnormals).
  std::fill(x.begin(), x.begin() + 256, 0.f);
  std::fill(x.begin() + 256, x.begin() + 512, 0.75f);
  x[600] = 40.f;
  for (int64_t i = 768; i < 1024; ++i) x[static_cast<size_t>(i)] = -std::fabs(x[static_cast<size_t>(i)]) - 1.f;
  for (int64_t i = 1024; i < 1280; ++i) x[static_cast<size_t>(i)] *= 1e-3f;

  std::vector<uint8_t> q(quant::row_bytes(c.type, n));
  quant::quantize_row(c.type, x.data(), q.data(), n);
  std::vector<float> y(static_cast<size_t>(n));
  quant::dequantize_row(c.type, q.data(), y.data(), n);

  double err2 = 0, x2 = 0;
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    float absmax = 0;
    for (int64_t i = b0; i < b0 + block; ++i) absmax = std::max(absmax, std::fabs(x[static_cast<size_t>(i)]));
    for (int64_t i = b0; i < b0 + block; ++i) {
      const auto k = static_cast<size_t>(i);
      const double e = std::fabs(double{y[k]} - x[k]);
      err2 += e * e;
      x2 += double{x[k]} * x[k];
      ASSERT_LE(e, c.max_err_vs_block_absmax * absmax + 1e-7) << "element " << i << ": x " << x[k] << " y " << y[k];
    }
  }
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.f) << "an all-zero block must stay exactly zero";
  EXPECT_LE(std::sqrt(err2 / x2), c.max_rel_rmse);
}

// Bounds: round-to-nearest gives at most half a step, except that symmetric formats clamp
// the side opposite the block's extreme one step short (a full step, Q4_0: absmax/8). The
// k-quants add the rounding of sub-block scales to 6 (Q4_K/Q5_K) or 8 bits (Q6_K). RMSE
// bounds are ~1.3x what these quantizers measure.
INSTANTIATE_TEST_SUITE_P(
    Types, QuantRoundTrip,
    ::testing::Values(RoundTripCase{TensorType::F32, 0.0, 0.0},
                      RoundTripCase{TensorType::F16, 0.0005, 1.0 / 1024},
                      RoundTripCase{TensorType::Q8_0, 0.007, 1.0 / 127 * 1.01},
                      RoundTripCase{TensorType::Q4_0, 0.11, 1.0 / 8 * 1.01},
                      RoundTripCase{TensorType::Q4_1, 0.10, 2.0 / 15 * 0.51},
                      RoundTripCase{TensorType::Q5_0, 0.055, 1.0 / 16 * 1.01},
                      RoundTripCase{TensorType::Q5_1, 0.05, 2.0 / 31 * 0.51},
                      RoundTripCase{TensorType::Q4_K, 0.10, 2.0 / 15 * 0.6},
                      RoundTripCase{TensorType::Q5_K, 0.05, 2.0 / 31 * 0.6},
                      RoundTripCase{TensorType::Q6_K, 0.025, 1.0 / 32 * 1.1}),
    [](const ::testing::TestParamInfo<RoundTripCase>& info) {
      return std::string(quant::traits(info.param.type).name);
    });

}  // namespace
}  // namespace infinipot
