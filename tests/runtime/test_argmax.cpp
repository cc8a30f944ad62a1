// argmax.cl (the greedy token on the device) against Sampler::argmax (runtime/sampling.h).
#include <cmath>
#include <string>
#include <utility>
#include <vector>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/ops/argmax.h"
#include "runtime/sampling.h"
#include "tests/runtime/kernel_fixture.h"

namespace infinipot {
namespace {

using testing_support::random_floats;

class LayerKernel : public testing_support::KernelTest {};

// The device's greedy token against Sampler::argmax (its reference), exactly: the first index
// of the largest value, NaN never winning. Rows shorter and longer than the 64 items of the
// work-group, sizes off the 16-lane loads, ties inside one item's chunk and across items.
TEST_F(LayerKernel, ArgmaxRowMatchesHostArgmax) {
  auto out = ctx().memory().alloc(cl::MemCategory::Scratch, sizeof(int), "argmax out");
  auto device_argmax = [&](const std::vector<float>& row) {
    auto d = upload(row);
    ops::argmax_row(ctx(), d, static_cast<int>(row.size()), out);
    int got = -1;
    ctx().read(out, &got, sizeof(got));
    return got;
  };
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<std::pair<std::string, std::vector<float>>> rows;
  for (int n : {1, 15, 16, 17, 63, 64, 65, 1000, 49159}) {
    rows.push_back({"random n=" + std::to_string(n), random_floats(size_t(n), 700 + n, -30.0f, 30.0f)});
    std::vector<float> last = random_floats(size_t(n), 800 + n);
    last.back() = 5.0f;  // the maximum in the last slot (a tail past the 16-lane loads)
    rows.push_back({"max last n=" + std::to_string(n), last});
  }
  std::vector<float> ties = random_floats(49159, 900);
  for (int i : {40000, 777, 778, 31000}) ties[size_t(i)] = 2.0f;  // first at 777: one chunk holds 777 and 778
  rows.push_back({"ties across and inside chunks", ties});
  std::vector<float> nans = random_floats(5000, 901);
  nans[10] = 9.0f;
  for (int i : {0, 3, 4999, 2500}) nans[size_t(i)] = nan;
  rows.push_back({"NaN sprinkled", nans});
  rows.push_back({"NaN first, then the maximum", {nan, 1.0f, 3.0f, 3.0f, nan}});
  rows.push_back({"all NaN", std::vector<float>(300, nan)});
  rows.push_back({"all -inf", std::vector<float>(300, -inf)});
  rows.push_back({"-inf after NaN", {nan, nan, -inf, -inf}});
  rows.push_back({"signed zeros", {-1.0f, -0.0f, 0.0f, -0.0f}});
  rows.push_back({"+inf", {1.0f, inf, nan, inf}});
  std::vector<float> chunk_nan(4096, nan);  // whole items' chunks of NaN, a value in another
  chunk_nan[3000] = -7.0f;
  rows.push_back({"NaN chunks", chunk_nan});
  for (const auto& [name, row] : rows) EXPECT_EQ(device_argmax(row), Sampler::argmax(row)) << name;
  // The reference's own rules, so both cannot drift together.
  EXPECT_EQ(Sampler::argmax(ties), 777);
  EXPECT_EQ(Sampler::argmax({nan, 1.0f, 3.0f, 3.0f, nan}), 2);
  EXPECT_EQ(Sampler::argmax(std::vector<float>(300, nan)), 0);
  EXPECT_EQ(Sampler::argmax({nan, nan, -inf, -inf}), 2);
  EXPECT_EQ(Sampler::argmax({-1.0f, -0.0f, 0.0f, -0.0f}), 1);
  EXPECT_THROW(ops::argmax_row(ctx(), out, 0, out), cl::ClError);
  EXPECT_THROW(ops::argmax_row(ctx(), out, 2, out), cl::ClError);  // a 4-byte buffer holds no 2 floats
}

}  // namespace
}  // namespace infinipot
