// The device order of weight rows (runtime/weight_layout.h): Q4_0 and Q4_1 rows with their
// block scales first, every other type as in the file. The kernels' side of it (that they
// read this order right) is every WeightKernel / MatvecQ8 test against the CPU reference.
#include "runtime/weight_layout.h"

#include <numeric>
#include <stdexcept>
#include <vector>
#include <gtest/gtest.h>

namespace infinipot {
namespace {

using gguf::TensorType;

// Rows of `blocks` blocks whose byte i is i (mod 256): each byte says where it came from.
std::vector<uint8_t> numbered(size_t bytes) {
  std::vector<uint8_t> v(bytes);
  std::iota(v.begin(), v.end(), uint8_t(0));
  return v;
}

TEST(WeightLayout, Q41RowsPutEveryBlocksScalesFirst) {
  const size_t block = 20, nb = 3, row = nb * block, rows = 2;
  std::vector<uint8_t> data = numbered(rows * row);
  const std::vector<uint8_t> file = data;
  cl::to_device_layout(TensorType::Q4_1, data.data(), rows, row);
  for (size_t r = 0; r < rows; ++r)
    for (size_t b = 0; b < nb; ++b) {
      for (size_t i = 0; i < 4; ++i)  // d, m of block b at 4b
        EXPECT_EQ(data[r * row + 4 * b + i], file[r * row + b * block + i]) << "row " << r << " block " << b;
      for (size_t i = 0; i < 16; ++i)  // its quants after all the scales
        EXPECT_EQ(data[r * row + 4 * nb + 16 * b + i], file[r * row + b * block + 4 + i]) << "row " << r << " block " << b;
    }
}

TEST(WeightLayout, Q40RowsPutEveryBlocksScaleFirst) {
  const size_t block = 18, nb = 5, row = nb * block;
  std::vector<uint8_t> data = numbered(row);
  const std::vector<uint8_t> file = data;
  cl::to_device_layout(TensorType::Q4_0, data.data(), 1, row);
  for (size_t b = 0; b < nb; ++b) {
    EXPECT_EQ(data[2 * b], file[b * block]);
    EXPECT_EQ(data[2 * b + 1], file[b * block + 1]);
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(data[2 * nb + 16 * b + i], file[b * block + 2 + i]);
  }
}

TEST(WeightLayout, OtherTypesKeepTheFilesOrder) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q5_1, TensorType::Q4_K,
                       TensorType::Q6_K}) {
    EXPECT_FALSE(cl::scales_first_on_device(t));
    std::vector<uint8_t> data = numbered(2 * 840);
    const std::vector<uint8_t> file = data;
    cl::to_device_layout(t, data.data(), 2, 840);
    EXPECT_EQ(data, file);
  }
  EXPECT_TRUE(cl::scales_first_on_device(TensorType::Q4_0));
  EXPECT_TRUE(cl::scales_first_on_device(TensorType::Q4_1));
}

TEST(WeightLayout, RowsOfPartBlocksAreRefused) {
  std::vector<uint8_t> data(50);
  EXPECT_THROW(cl::to_device_layout(TensorType::Q4_1, data.data(), 1, 50), std::invalid_argument);
}

}  // namespace
}  // namespace infinipot
