// The budgeted device allocator (runtime/device_memory.h) and device selection errors
// (runtime/device.h).
#include <stdexcept>
#include <string>
#include <gtest/gtest.h>

#include "runtime/cl_error.h"
#include "runtime/device.h"
#include "runtime/device_memory.h"
#include "tests/runtime/kernel_fixture.h"

namespace infinipot {
namespace {

using cl::BudgetError;
using cl::MemCategory;

constexpr uint64_t kMiB = 1ull << 20;

::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' is missing from: " << text;
}

// A fresh allocator with its own budget over the shared context's cl_context.
class DeviceMemoryTest : public testing_support::KernelTest {
 protected:
  cl::DeviceMemory make(uint64_t budget) { return cl::DeviceMemory(ctx().context(), budget, 0); }
};

TEST_F(DeviceMemoryTest, PlanWithinBudgetIsAccepted) {
  auto mem = make(10 * kMiB);
  cl::MemoryPlan plan;
  plan[MemCategory::Weights] = 6 * kMiB;
  plan[MemCategory::KvCache] = 4 * kMiB;
  EXPECT_NO_THROW(mem.check_plan(plan, ""));
  EXPECT_EQ(mem.used_total(), 0u) << "checking a plan allocates nothing";
}

TEST_F(DeviceMemoryTest, PlanOverBudgetListsNeedPerCategoryAndMinimum) {
  auto mem = make(10 * kMiB);
  cl::MemoryPlan plan;
  plan[MemCategory::Weights] = 6 * kMiB;
  plan[MemCategory::KvCache] = 3 * kMiB;
  plan[MemCategory::Activations] = 2 * kMiB + 1;
  try {
    mem.check_plan(plan, "a smaller --ctx-size");
    FAIL() << "a plan of 11 MiB passed a 10 MiB budget";
  } catch (const BudgetError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "weights 6.0 MiB"));
    EXPECT_TRUE(contains(msg, "kv_cache 3.0 MiB"));
    EXPECT_TRUE(contains(msg, "activations 2.0 MiB"));
    EXPECT_TRUE(contains(msg, "{device_mem} 12M")) << "11 MiB + 1 byte rounds up to 12M";
    EXPECT_TRUE(contains(msg, "a smaller --ctx-size"));
    EXPECT_EQ(e.minimum_bytes(), 11 * kMiB + 1);
  }
  EXPECT_EQ(mem.used_total(), 0u);
}

TEST_F(DeviceMemoryTest, PlanCountsWhatIsAlreadyAllocated) {
  auto mem = make(10 * kMiB);
  auto held = mem.alloc(MemCategory::Weights, 2 * kMiB, "held");
  cl::MemoryPlan plan;
  plan[MemCategory::Scratch] = 9 * kMiB;
  try {
    mem.check_plan(plan, "");
    FAIL() << "2 MiB held + 9 MiB planned passed a 10 MiB budget";
  } catch (const BudgetError& e) {
    EXPECT_TRUE(contains(std::string(e.what()), "already allocated 2.0 MiB"));
    EXPECT_EQ(e.minimum_bytes(), 11 * kMiB);
  }
}

TEST_F(DeviceMemoryTest, AllocOverBudgetIsRefusedAndAllocatesNothing) {
  auto mem = make(4 * kMiB);
  auto a = mem.alloc(MemCategory::KvCache, 3 * kMiB, "kv");
  try {
    auto b = mem.alloc(MemCategory::Gemm, 2 * kMiB, "gemm panels");
    FAIL() << "5 MiB allocated under a 4 MiB budget";
  } catch (const BudgetError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "gemm panels"));
    EXPECT_TRUE(contains(msg, "2.0 MiB of gemm"));
    EXPECT_TRUE(contains(msg, "{device_mem} 5M"));
    EXPECT_EQ(e.minimum_bytes(), 5 * kMiB);
  }
  EXPECT_EQ(mem.used_total(), 3 * kMiB);
  EXPECT_EQ(mem.used(MemCategory::Gemm), 0u);
}

TEST_F(DeviceMemoryTest, FreeingReturnsBytesAndPeaksRemain) {
  auto mem = make(8 * kMiB);
  {
    auto w = mem.alloc(MemCategory::Weights, 3 * kMiB, "w");
    auto s = mem.alloc(MemCategory::Scratch, 2 * kMiB, "s");
    EXPECT_EQ(mem.used_total(), 5 * kMiB);
    EXPECT_EQ(mem.used(MemCategory::Weights), 3 * kMiB);
    EXPECT_EQ(mem.used(MemCategory::Scratch), 2 * kMiB);
    EXPECT_THROW(mem.alloc(MemCategory::Scratch, 4 * kMiB, "too much"), BudgetError);
    s = mem.alloc(MemCategory::Scratch, 1 * kMiB, "smaller");  // move-assignment frees the old buffer
    EXPECT_EQ(mem.used(MemCategory::Scratch), 1 * kMiB);
    EXPECT_EQ(mem.peak(MemCategory::Scratch), 3 * kMiB) << "2 MiB + 1 MiB were briefly held together";
  }
  EXPECT_EQ(mem.used_total(), 0u);
  EXPECT_EQ(mem.used(MemCategory::Weights), 0u);
  EXPECT_EQ(mem.peak_total(), 6 * kMiB);
  EXPECT_EQ(mem.peak(MemCategory::Weights), 3 * kMiB);
  EXPECT_NO_THROW(mem.alloc(MemCategory::Scratch, 8 * kMiB, "all of it")) << "freed bytes are available again";

  const auto report = mem.report();
  EXPECT_EQ(report["budget"].get<uint64_t>(), 8 * kMiB);
  EXPECT_EQ(report["peak"].get<uint64_t>(), 8 * kMiB);
  EXPECT_EQ(report["by_category"]["weights"]["peak"].get<uint64_t>(), 3 * kMiB);
}

TEST(ParseByteSize, AcceptsNumbersWithUnits) {
  EXPECT_EQ(cl::parse_byte_size("256M"), 256 * kMiB);
  EXPECT_EQ(cl::parse_byte_size("1.5G"), 1536 * kMiB);
  EXPECT_EQ(cl::parse_byte_size("512K"), 512u * 1024);
  EXPECT_EQ(cl::parse_byte_size("1048576"), kMiB);
  EXPECT_EQ(cl::parse_byte_size("2GiB"), 2048 * kMiB);
}

TEST(ParseByteSize, RejectsMalformedSizesNamingThem) {
  for (const char* bad : {"12Q", "", "-1", "1e400", "M"}) {
    try {
      cl::parse_byte_size(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(contains(std::string(e.what()), "'" + std::string(bad) + "'"));
    }
  }
}

TEST(SelectDevice, UnknownIndexListsTheDevices) {
  const auto devices = cl::list_devices();
  ASSERT_FALSE(devices.empty()) << "the runtime tests need an OpenCL device";
  try {
    cl::select_device("99");
    FAIL() << "device 99 was selected";
  } catch (const cl::DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "99"));
    for (const auto& d : devices) EXPECT_TRUE(contains(msg, d.name));
  }
}

TEST(SelectDevice, NameMatchingNothingListsTheDevices) {
  const auto devices = cl::list_devices();
  ASSERT_FALSE(devices.empty()) << "the runtime tests need an OpenCL device";
  try {
    cl::select_device("no-such-device-xyzzy");
    FAIL() << "a device matched 'no-such-device-xyzzy'";
  } catch (const cl::DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "no-such-device-xyzzy"));
    for (const auto& d : devices) EXPECT_TRUE(contains(msg, d.name));
  }
  EXPECT_EQ(cl::select_device(devices.front().name).id, devices.front().id) << "an exact name matches";
}

}  // namespace
}  // namespace infinipot
