// dequant.cl (weights as row-major floats and as the GEMM's panels) against
// ref::dequantize_rows and ref::to_panels in tests/support/cpu_ref.h, for every weight type the
// device supports.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/dequant.h"
#include "runtime/ops/matvec.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/runtime/weight_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::dot_bounds;
using testing_support::kDequantTol;
using testing_support::random_floats;
using testing_support::test_cols;
using testing_support::type_name;
using testing_support::weight_kernel_types;
using testing_support::weight_type_param_name;
using testing_support::WeightKernel;

TEST_P(WeightKernel, DequantRowsMatchesReference) {
  const TensorType t = GetParam();
  auto W = make_weight(t, 21, test_cols(t), 12);
  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, W.dequant.size() * 4, "dequant out");
  ops::dequant_rows(ctx(), W.dev, out);
  EXPECT_TRUE(all_close(std::string("dequant_rows ") + type_name(t), download_all(out), W.dequant, kDequantTol));
}

// The block scales are halves that the kernels convert with bit operations of their own
// (quant_formats.cl half_bits_to_float, not vload_half): every kind of half a scale can be
// (zeros, subnormals of both signs, the extremes of the normal range) must decode exactly in
// dequant_rows, and the decode product must match the reference over them.
TEST_P(WeightKernel, SpecialHalfScalesDecodeExactly) {
  const TensorType t = GetParam();
  if (t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16) GTEST_SKIP() << "no block scales";
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x7bff, 0xfbff,
                               0x3c00, 0xb555, 0x0200, 0x1234};
  const int rows = 9, cols = test_cols(t);
  auto W = make_weight(t, rows, cols, 31);
  const auto& tr = quant::traits(t);
  // Offsets of the halves in a block: d (and the second scale: m, or dmin) where they sit.
  std::vector<size_t> at = {0};
  if (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K || t == TensorType::Q5_K) at.push_back(2);
  if (t == TensorType::Q6_K) at = {208};
  const size_t n_blocks = W.blocks.size() / tr.block_bytes;
  size_t next = 0;
  for (size_t b = 0; b < n_blocks; ++b)
    for (size_t off : at) {
      const uint16_t h = specials[next++ % std::size(specials)];
      W.blocks[b * tr.block_bytes + off] = uint8_t(h & 0xff);
      W.blocks[b * tr.block_bytes + off + 1] = uint8_t(h >> 8);
    }
  ASSERT_GE(next, std::size(specials)) << "too few blocks to place every special half";
  W.dequant = ref::dequantize_rows(t, W.blocks.data(), rows, cols);
  testing_support::write_weight(ctx(), W);

  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, W.dequant.size() * 4, "dequant out");
  ops::dequant_rows(ctx(), W.dev, out);
  EXPECT_TRUE(all_close(std::string("dequant_rows, special scales, ") + type_name(t), download_all(out), W.dequant,
                        kDequantTol));

  const std::vector<float> x = random_floats(size_t(cols), 33);
  auto d_x = upload(x);
  auto d_y = ctx().memory().alloc(cl::MemCategory::Scratch, size_t(rows) * 4, "matvec out");
  ops::matvec(ctx(), W.dev, d_x, 1, d_y, rows, false);
  std::vector<float> expect(rows, 0.0f);
  ref::matvec(W.dequant.data(), rows, cols, x.data(), 1, expect.data(), rows, false);
  const std::vector<double> bound = dot_bounds(1, rows, cols, x, cols, W.dequant, cols, expect, rows, false);
  EXPECT_TRUE(all_close(std::string("matvec, special scales, ") + type_name(t), download_all(d_y), expect,
                        [&](size_t i) { return bound[i]; }));
}

TEST_P(WeightKernel, DequantToPanelsMatchesReference) {
  const TensorType t = GetParam();
  const int rows = 37, cols = test_cols(t);  // 37: the last panel is padded with 11 zero rows
  auto W = make_weight(t, rows, cols, 13);
  const size_t offset = 24;  // panels written from a float offset; what is before must survive
  const size_t n = offset + ops::panel_floats(rows, cols) + 8;
  std::vector<float> expect = random_floats(n, 14);
  auto Bp = upload(expect);
  ops::dequant_to_panels(ctx(), W.dev, Bp, offset);
  const std::vector<float> panels = ref::to_panels(W.dequant.data(), rows, cols);
  std::copy(panels.begin(), panels.end(), expect.begin() + offset);
  EXPECT_TRUE(all_close(std::string("dequant_to_panels ") + type_name(t), download_all(Bp), expect, kDequantTol));
}

// A slice of rows on its own (the LM head is dequantized one vocabulary tile at a time).
TEST_P(WeightKernel, DequantRowSliceToPanelsMatchesReference) {
  const TensorType t = GetParam();
  const int rows = 45, cols = test_cols(t);
  auto W = make_weight(t, rows, cols, 19);
  for (auto [row0, n] : {std::pair{0, 16}, std::pair{16, 29}, std::pair{7, 10}}) {  // aligned, tail, unaligned
    auto Bp = upload(random_floats(ops::panel_floats(n, cols), 20 + row0));  // padding must be written as zeros
    ops::dequant_rows_to_panels(ctx(), W.dev, row0, n, Bp);
    EXPECT_TRUE(all_close(std::string("dequant_rows_to_panels ") + type_name(t) + " rows " + std::to_string(row0) +
                              ".." + std::to_string(row0 + n),
                          download_all(Bp), ref::to_panels(W.dequant.data() + size_t(row0) * cols, n, cols),
                          kDequantTol));
  }
  auto Bp = ctx().memory().alloc(cl::MemCategory::Gemm, ops::panel_floats(10, cols) * 4, "Bp");
  EXPECT_THROW(ops::dequant_rows_to_panels(ctx(), W.dev, 40, 10, Bp), cl::ClError) << "rows past the matrix";
}

INSTANTIATE_TEST_SUITE_P(AllDeviceTypes, WeightKernel, ::testing::ValuesIn(weight_kernel_types()),
                         weight_type_param_name);

}  // namespace
}  // namespace infinipot
