// embedding.cl (token rows of a GGUF-encoded table) against ref::embed in tests/support/cpu_ref.h,
// for every weight type the device supports.
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/ops/embedding.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/runtime/weight_fixture.h"
#include "tests/support/compare.h"
#include "tests/support/cpu_ref.h"

namespace infinipot {
namespace {

using quant::TensorType;
using testing_support::all_close;
using testing_support::kDequantTol;
using testing_support::random_floats;
using testing_support::test_cols;
using testing_support::type_name;
using testing_support::weight_kernel_types;
using testing_support::weight_type_param_name;
using testing_support::WeightKernel;

TEST_P(WeightKernel, EmbedMatchesReference) {
  const TensorType t = GetParam();
  const int vocab = 37, cols = test_cols(t);
  auto table = make_weight(t, vocab, cols, 11);
  const std::vector<int> ids = {0, 36, 5, 5, 17, 1, 36};  // first, last and repeated rows
  auto d_ids = upload(ids);
  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, ids.size() * cols * 4, "embed out");
  ops::embed(ctx(), table.dev, d_ids, int(ids.size()), out);
  EXPECT_TRUE(all_close(std::string("embed ") + type_name(t), download_all(out),
                        ref::embed(t, table.blocks.data(), cols, ids), kDequantTol));
}

INSTANTIATE_TEST_SUITE_P(AllDeviceTypes, WeightKernel, ::testing::ValuesIn(weight_kernel_types()),
                         weight_type_param_name);

}  // namespace
}  // namespace infinipot
