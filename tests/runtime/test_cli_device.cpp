// Device-side faults through the real `infinipot` binary (issue #3): a --device-mem budget
// too small (refused before allocating, with an honest minimum), no OpenCL platform, a
// device that does not exist, and a kernel that fails to compile (the build log reaches the
// user; the kernel binary cache keeps no half-written file).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/kit/tiny_model.h"
#include "runtime/device_memory.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

namespace fs = std::filesystem;
using test::fails_cleanly;
using test::run_infinipot;
using test::succeeded;
using test::TempDir;

constexpr double kQuick = 60;       // seconds for a refusal that happens before device work
constexpr double kGenerate = 600;  // a short generation, kernels possibly compiled from cold

// ---- --device-mem: refused before allocating, and the minimum it names works ------------

// `run` with --device-mem `budget`; the other flags stay the same between calls so the
// memory plan does too.
test::ProcResult run_with_budget(const std::string& model, const std::string& budget) {
  return run_infinipot({"run", "-m", model, "-p", "Say hello.", "-n", "8", "--json", "--device-mem", budget},
                       {{}, kGenerate});
}

// A budget of `too_small` is refused (exit 3, BudgetError) naming the need per category and
// the minimum; that minimum works, its peak stays within it, and 1 MiB less is refused.
void expect_honest_minimum(const std::string& model, const std::string& too_small) {
  auto refused = run_with_budget(model, too_small);
  ASSERT_TRUE(fails_cleanly(refused, {"too small", "weights", "kv_cache", "activations", "scratch",
                                      "Minimum that works: --device-mem"},
                            3, kQuick));
  // check_plan refused it; alloc() says "exceeded allocating" when a buffer overshoots.
  EXPECT_EQ(refused.err.find("exceeded allocating"), std::string::npos) << refused.describe();
  const std::string minimum = test::device_mem_in(refused.err);
  ASSERT_FALSE(minimum.empty()) << refused.describe();
  const uint64_t minimum_bytes = cl::parse_byte_size(minimum);

  auto ok = run_with_budget(model, minimum);
  ASSERT_TRUE(succeeded(ok)) << "the minimum " << minimum << " the refusal named does not work";
  const auto j = nlohmann::json::parse(ok.out);
  EXPECT_EQ(j.at("device_mem_budget").get<uint64_t>(), minimum_bytes);
  EXPECT_LE(j.at("peak_device_bytes").get<uint64_t>(), minimum_bytes);
  EXPECT_GT(j.at("generated_tokens").get<int>(), 0);

  // The minimum is rounded up to whole MiB: one MiB less must not fit.
  const uint64_t mib = minimum_bytes >> 20;
  ASSERT_EQ(minimum_bytes, mib << 20) << minimum;
  if (mib > 1) {
    auto below = run_with_budget(model, std::to_string(mib - 1) + "M");
    EXPECT_TRUE(fails_cleanly(below, {"--device-mem " + minimum}, 3, kQuick)) << "the minimum is not tight";
  }
}

TEST(CliBudget, RealModelRefusedBeforeAllocatingAndTheMinimumWorks) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  expect_honest_minimum(model, "50M");
}

TEST(CliBudget, TinyModelRefusedBeforeAllocatingAndTheMinimumWorks) {
  TempDir dir;
  const std::string model = dir.file("tiny.gguf");
  write_tiny_llama(model, TinyLlamaOptions{});
  expect_honest_minimum(model, "64K");
}

// ---- OpenCL platform and device faults ----------------------------------------------------

// The ICD loader reads its vendor list from OCL_ICD_VENDORS (a directory of .icd files):
// pointing it at nothing leaves no platform.
const test::ProcOptions kNoIcd{{{"OCL_ICD_VENDORS", "/nonexistent-dir"}, {"OCL_ICD_FILENAMES", std::nullopt}}, 120};

TEST(CliOpenCl, NoPlatformSaysToInstallAnIcd) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  auto r = run_infinipot({"run", "-m", model, "-p", "hi", "-n", "1"}, kNoIcd);
  // It also says why: the vendor folder the loader reads does not exist (the ICD check).
  EXPECT_TRUE(fails_cleanly(r, {"no OpenCL", "ICD", "apt-get install pocl-opencl-icd",
                                "OCL_ICD_VENDORS=/nonexistent-dir", "/nonexistent-dir, which does not exist"},
                            1, kQuick));
  TempDir dir;
  const std::string text = dir.file("t.txt");
  std::ofstream(text) << "Some text to score.\n";
  EXPECT_TRUE(fails_cleanly(run_infinipot({"perplexity", "-m", model, "-f", text, "-c", "16"}, kNoIcd), {"ICD"}, 1,
                            kQuick));
  // Listing devices is not an error: it says there are none and how to get one.
  auto list = run_infinipot({"devices"}, kNoIcd);
  ASSERT_TRUE(succeeded(list));
  EXPECT_NE(list.out.find("no OpenCL devices found"), std::string::npos) << list.describe();
  EXPECT_NE(list.out.find("pocl-opencl-icd"), std::string::npos) << list.describe();
  EXPECT_NE(list.out.find("which does not exist"), std::string::npos) << list.describe();
  auto json = run_infinipot({"devices", "--json"}, kNoIcd);
  ASSERT_TRUE(succeeded(json));
  EXPECT_TRUE(nlohmann::json::parse(json.out).at("devices").empty()) << json.out;
  // What needs no device still works.
  EXPECT_TRUE(succeeded(run_infinipot({"tokenize", "-m", model, "-p", "hi"}, kNoIcd)));
  EXPECT_TRUE(succeeded(run_infinipot({"inspect", "-m", model}, kNoIcd)));
}

TEST(CliOpenCl, UnknownDeviceIndexOrNameListsTheDevices) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  auto by_index = run_infinipot({"run", "-m", model, "-p", "hi", "-n", "1", "--device", "99"});
  EXPECT_TRUE(fails_cleanly(by_index, {"--device 99", "no device with that index", "\n  0: "}, 1, kQuick));
  auto by_name = run_infinipot({"run", "-m", model, "-p", "hi", "-n", "1", "--device", "nosuchname"});
  EXPECT_TRUE(fails_cleanly(by_name, {"--device nosuchname", "no device name or platform matches", "\n  0: "}, 1,
                            kQuick));
  auto huge = run_infinipot({"run", "-m", model, "-p", "hi", "-n", "1", "--device", "99999999999999999999"});
  EXPECT_TRUE(fails_cleanly(huge, {"no device with that index"}, 1, kQuick));
}

// ---- Driver failures in the middle of a run ---------------------------------------------

// The driver refusing an allocation (weights half uploaded) or a launch (the answer half
// streamed): a clear error naming the call, the buffer or kernel and the OpenCL status, exit 1,
// no signal, and (under the sanitizer job) nothing leaked. The faults are injected through
// runtime/fault_injection.h.
TEST(CliOpenCl, AllocationFailureMidUploadIsAClearError) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  test::ProcOptions opts;
  opts.env["INFINIPOT_FAULT_ALLOC_AT"] = "50";  // during the weight upload
  auto r = run_infinipot({"run", "-m", model, "-p", "hi", "-n", "4"}, opts);
  EXPECT_TRUE(fails_cleanly(r, {"clCreateBuffer(", "CL_MEM_OBJECT_ALLOCATION_FAILURE"}, 1));
}

TEST(CliOpenCl, OutOfResourcesMidGenerationIsAClearError) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  test::ProcOptions opts;
  opts.env["INFINIPOT_FAULT_LAUNCH_AT"] = "700";  // after the prompt, while decoding
  auto r = run_infinipot({"run", "-m", model, "-p", "hi", "-n", "16"}, opts);
  EXPECT_TRUE(fails_cleanly(r, {"clEnqueueNDRangeKernel(", "CL_OUT_OF_RESOURCES"}, 1));
  // Perplexity, whose windows run through the GEMM and cross-entropy kernels.
  opts.env["INFINIPOT_FAULT_LAUNCH_AT"] = "40";
  auto p = run_infinipot({"perplexity", "-m", model, "-f",
                          std::string(INFINIPOT_TEST_SOURCE_DIR) + "/data/perplexity.txt", "-c", "64", "--chunks", "2"},
                         opts);
  EXPECT_TRUE(fails_cleanly(p, {"clEnqueueNDRangeKernel(", "CL_OUT_OF_RESOURCES"}, 1));
}

// A host-to-device write that fails (INFINIPOT_FAULT_WRITE_AT): the first weight upload, and
// a token upload of a decode step (the non-blocking writes of eval). SmolLM2's load makes 272
// writes where weights are copied: 61 norm vectors and 211 matrix parts (q|k|v and gate|up
// fused from 3 and 2 parts); where the device shares the host's memory (PoCL) each of the 121
// matrices is filled through one mapping instead, 182 in all. Then the prompt's chunk takes 2
// and each decode step 2 (its token id and RoPE table; a prompt whose answer runs past 16
// tokens, so no EOS cuts it short): the write 23 after the load is the eleventh step's.
TEST(CliOpenCl, AFailedUploadIsAClearError) {
  const std::string model = test::real_model_path();
  ASSERT_FALSE(model.empty());
  const std::vector<std::string> args{"run", "-m", model, "-p", "Write a long story about a cat.", "-n", "16"};
  auto clean = run_infinipot(args);
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  const bool in_place = clean.err.find("(unified)") != std::string::npos;
  const int load_writes = in_place ? 182 : 272;
  test::ProcOptions opts;
  opts.env["INFINIPOT_FAULT_WRITE_AT"] = "1";
  auto load = run_infinipot(args, opts);
  EXPECT_TRUE(fails_cleanly(load, {in_place ? "clEnqueueMapBuffer(write)" : "clEnqueueWriteBuffer(blocking)",
                                   "CL_OUT_OF_RESOURCES"}, 1));
  opts.env["INFINIPOT_FAULT_WRITE_AT"] = std::to_string(load_writes + 23);
  auto decode = run_infinipot(args, opts);
  EXPECT_TRUE(fails_cleanly(decode, {"clEnqueueWriteBuffer(non-blocking)", "CL_OUT_OF_RESOURCES"}, 1));
  EXPECT_NE(decode.out.size(), 0u) << "the fault should come after the answer began";
  // One write before the decode's: still inside the load, nothing written to stdout.
  opts.env["INFINIPOT_FAULT_WRITE_AT"] = std::to_string(load_writes);
  auto last_load = run_infinipot(args, opts);
  EXPECT_TRUE(fails_cleanly(last_load, {"CL_OUT_OF_RESOURCES"}, 1));
  EXPECT_EQ(last_load.out.size(), 0u) << "the load's last write fails before any answer";
}

// ---- A kernel that fails to compile ----------------------------------------------------

// Files under `dir` whose name marks them as partial (the cache writes NAME.tmpPID and
// renames), or that are empty.
std::vector<std::string> partial_files(const fs::path& dir) {
  std::vector<std::string> bad;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return bad;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos || e.file_size() == 0) bad.push_back(e.path().string());
  }
  return bad;
}

class CliKernelBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::real_model_path();
    ASSERT_FALSE(model_.empty());
    kernels_ = dir_.file("cl_kernels");
    fs::copy(fs::path(INFINIPOT_TEST_SOURCE_DIR) / "cl_kernels", kernels_, fs::copy_options::recursive);
  }
  // Runs a short generation in developer mode (kernels read from kernels_) with the kernel
  // cache (ours and PoCL's) under a fresh directory `cache`.
  test::ProcResult run(const std::string& cache) {
    return run_infinipot({"run", "-m", model_, "-p", "hi", "-n", "2"},
                         {{{"INFINIPOT_KERNEL_DIR", kernels_}, {"XDG_CACHE_HOME", cache}}, kGenerate});
  }
  std::string model_, kernels_;
  TempDir dir_;
};

TEST_F(CliKernelBuild, SyntaxErrorShowsTheBuildLogAndLeavesNoPartialCacheFiles) {
  // norm.cl builds after embedding.cl (the first kernel a forward pass runs), so the
  // failure comes with a kernel already queued and a binary already cached.
  const std::string broken = kernels_ + "/norm.cl";
  std::string source;
  {
    std::ifstream in(broken);
    source.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_FALSE(source.empty());
  std::ofstream(broken, std::ios::trunc) << "infinipot_syntax_error_here x = ;\n" << source;

  // Several runs: a process ending while a driver thread still compiles used to crash.
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const std::string cache = dir_.file("cache" + std::to_string(i));
    auto r = run(cache);
    EXPECT_TRUE(fails_cleanly(r, {"norm.cl", "failed to build", "--- build log ---", "infinipot_syntax_error_here"}, 1,
                              kGenerate));
    // Our cache only (PoCL keeps its own under cache/pocl, with temp files of its own).
    const fs::path ours = fs::path(cache) / "infinipot" / "kernels";
    EXPECT_EQ(partial_files(ours), std::vector<std::string>{}) << r.describe();
    EXPECT_TRUE(fs::exists(ours)) << "no kernel cache under " << ours << ": the check above proves nothing";
  }
}

TEST_F(CliKernelBuild, MissingKernelDirectoryIsNamed) {
  fs::remove(kernels_ + "/norm.cl");
  auto r = run(dir_.file("cache"));
  EXPECT_TRUE(fails_cleanly(r, {"norm.cl", "INFINIPOT_KERNEL_DIR"}, 1, kGenerate));
}

}  // namespace
}  // namespace infinipot
