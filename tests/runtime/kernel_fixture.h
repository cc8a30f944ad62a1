// Shared set-up of the kernel tests: one OpenCL context per test process, host <-> device
// copies, random inputs and quantized test weights. Header-only because the support library
// does not link the OpenCL runtime.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model_loader/quant.h"
#include "runtime/context.h"
#include "runtime/ops.h"
#include "runtime/weight_layout.h"
#include "tests/support/cpu_ref.h"

namespace infinipot::testing_support {

// The context a user gets without --device (PoCL on the CPU in CI), but with the decode
// products on the portable float path even where the CPU's own 8-bit dot would take them
// (tuning matvec_native_dot; test_native_dot.cpp tests that path against its own
// integer reference). Created once per process: PoCL compiles each kernel variant the first
// time it is asked for.
// Released when the test program's run ends (a gtest Environment's TearDown), not by a
// static's destructor at exit: by then an OpenCL implementation may have torn down its own
// state (Oclgrind's heap is corrupted by a context released after its statics; PoCL does not
// mind).
inline std::unique_ptr<cl::Context>& shared_context_slot() {
  static std::unique_ptr<cl::Context> ctx;
  return ctx;
}
class ReleaseSharedContext : public ::testing::Environment {
 public:
  void TearDown() override { shared_context_slot().reset(); }
};
inline cl::Context& shared_context() {
  std::unique_ptr<cl::Context>& ctx = shared_context_slot();
  if (!ctx) {
    static const bool registered = (::testing::AddGlobalTestEnvironment(new ReleaseSharedContext), true);
    (void)registered;
    cl::ContextOptions co;
    co.tuning_overrides = {{"matvec_native_dot", nlohmann::json::array()}};
    ctx = std::make_unique<cl::Context>(co);
  }
  return *ctx;
}

// A second context whose tuning asks for work-groups of `local` items in matvec and rms_norm
// (the GPU settings in platforms/tuning.json), so those code paths run on a CPU device too.
inline std::unique_ptr<cl::Context> context_with_tuning(const std::string& default_values);
inline std::unique_ptr<cl::Context> context_with_work_groups(int local) {
  return context_with_tuning("\"matvec_local\": " + std::to_string(local) + ", \"norm_local\": " +
                             std::to_string(local));
}

// A context whose tuning takes these values over platforms/tuning.json's (e.g. attention
// tiling): `"attention_tile_rows": 1, ...`, the inside of a JSON object. The decode products
// stay on the float path (as in shared_context) unless the values name matvec_native_dot.
inline std::unique_ptr<cl::Context> context_with_tuning(const std::string& values) {
  cl::ContextOptions co;
  co.tuning_overrides = {{"matvec_native_dot", nlohmann::json::array()}};
  co.tuning_overrides.update(nlohmann::json::parse("{" + values + "}"));
  return std::make_unique<cl::Context>(co);
}

// INFINIPOT_TEST_SMALL=1 (scripts/test-oclgrind.sh sets it): the kernel tests' large shapes
// and long random loops cut down for a simulator that runs a kernel thousands of times slower
// than PoCL. Every kernel and every path still runs; only the sizes that test scale (a 16K
// cache, a 64K-slot row, hundreds of random cases) shrink.
inline bool small_shapes() {
  static const bool small = [] {
    const char* e = std::getenv("INFINIPOT_TEST_SMALL");
    return e != nullptr && *e != '\0' && std::string(e) != "0";
  }();
  return small;
}
// `full`, or `small` under INFINIPOT_TEST_SMALL.
inline int full_or_small(int full, int small) { return small_shapes() ? small : full; }

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Input rows for the 8- and 16-bit quantized products: random, but the first 32-element block
// all zeros (scale 0) and, where k >= 64, a block whose elements span 1e-6 to 300.
inline std::vector<float> quantization_test_input(int n_rows, int k, uint32_t seed) {
  std::vector<float> x = random_floats(size_t(n_rows) * k, seed);
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;
  if (k >= 64) {
    for (int j = 32; j < 64; ++j) x[j] *= 1e-6f;
    x[40] = 300.0f;
  }
  return x;
}

// A weight matrix quantized from random data: the raw ggml blocks, their reference
// dequantization and the device copy.
struct TestWeight {
  std::vector<uint8_t> blocks;   // [rows][row_bytes]
  std::vector<float> dequant;    // [rows][cols], ref::dequantize_rows of blocks
  ops::DeviceWeight dev;
};

template <typename T>
cl::Buffer upload(cl::Context& c, const std::vector<T>& v) {
  cl::Buffer b = c.memory().alloc(cl::MemCategory::Scratch, v.size() * sizeof(T), "test data");
  c.write(b, v.data(), v.size() * sizeof(T));
  return b;
}

inline std::vector<float> download(cl::Context& c, const cl::Buffer& b, size_t n, size_t offset_floats = 0) {
  std::vector<float> v(n);
  c.read(b, v.data(), n * sizeof(float), offset_floats * sizeof(float));
  return v;
}

// (Re)writes w.blocks (GGUF order) to the device in the order the kernels read
// (runtime/weight_layout.h), as the model loader does.
inline void write_weight(cl::Context& c, TestWeight& w) {
  std::vector<uint8_t> dev = w.blocks;
  cl::to_device_layout(w.dev.type, dev.data(), size_t(w.dev.rows), size_t(w.dev.row_bytes));
  c.write(w.dev.buf, dev.data(), dev.size());
}

inline TestWeight make_weight(cl::Context& c, quant::TensorType t, int rows, int cols, uint32_t seed) {
  TestWeight w;
  const size_t rb = quant::row_bytes(t, cols);
  const std::vector<float> src = random_floats(size_t(rows) * cols, seed);
  w.blocks.resize(rb * rows);
  for (int r = 0; r < rows; ++r) quant::quantize_row(t, src.data() + size_t(r) * cols, w.blocks.data() + r * rb, cols);
  w.dequant = ref::dequantize_rows(t, w.blocks.data(), rows, cols);
  w.dev.buf = c.memory().alloc(cl::MemCategory::Scratch, w.blocks.size(), "test weight");
  w.dev.type = t;
  w.dev.rows = rows;
  w.dev.cols = cols;
  w.dev.row_bytes = static_cast<int>(rb);
  write_weight(c, w);
  return w;
}

// Fails the test (never skips) when no OpenCL device exists: a missing driver must not pass CI.
class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      ctx_ = &shared_context();
    } catch (const std::exception& e) {
      FAIL() << "cannot create the default OpenCL context; the kernel tests need a device: " << e.what();
    }
  }

  cl::Context& ctx() { return *ctx_; }

  template <typename T>
  cl::Buffer upload(const std::vector<T>& v) { return testing_support::upload(ctx(), v); }
  std::vector<float> download(const cl::Buffer& b, size_t n, size_t offset_floats = 0) {
    return testing_support::download(ctx(), b, n, offset_floats);
  }
  std::vector<float> download_all(const cl::Buffer& b) { return download(b, b.bytes() / sizeof(float)); }
  TestWeight make_weight(quant::TensorType t, int rows, int cols, uint32_t seed) {
    return testing_support::make_weight(ctx(), t, rows, cols, seed);
  }

 private:
  cl::Context* ctx_ = nullptr;
};

// Fixture of the tests of the CPU's own 8-bit dot (native_dot.cl), parameters (weight type,
// ContextOptions::native_dot_form: -1 the device's own, 2 AVX2): its own context with every
// form and native type listed, plus extra_tuning(). Where the device has no such dot (PoCL on
// an x86 CPU with AVX2 has one) the path does not exist: asserted, then the test skips.
class NativeDotTest : public ::testing::TestWithParam<std::tuple<quant::TensorType, int>> {
 protected:
  virtual nlohmann::json extra_tuning() const { return nlohmann::json::object(); }
  void SetUp() override {
    try {
      cl::ContextOptions co;
      co.tuning_overrides = {{"matvec_native_dot", {"avx512_vnni", "avx2"}},
                             {"matvec_native_types", {"Q4_0", "Q4_1", "Q8_0"}}};
      co.tuning_overrides.update(extra_tuning());
      co.native_dot_form = std::get<1>(GetParam());
      ctx_ = std::make_unique<cl::Context>(co);
    } catch (const std::exception& e) {
      FAIL() << "cannot create an OpenCL context; the kernel tests need a device: " << e.what();
    }
    if (ctx_->device().native_dot == 0) {
      auto W = make_weight(*ctx_, type(), 4, 64, 1);
      ASSERT_FALSE(ops::matvec_native(*ctx_, W.dev)) << "no native dot on this device, yet the products would take it";
      GTEST_SKIP() << ctx_->device().name << " has no 8-bit dot instruction that PoCL kernels may use "
                   << "(AVX-512 VNNI or AVX2 under PoCL on x86): the decode products stay on the float path here";
    }
  }
  cl::Context& ctx() { return *ctx_; }
  quant::TensorType type() const { return std::get<0>(GetParam()); }
  template <typename T>
  cl::Buffer upload(const std::vector<T>& v) { return testing_support::upload(ctx(), v); }
  std::vector<float> download(const cl::Buffer& b, size_t n) { return testing_support::download(ctx(), b, n); }

  std::unique_ptr<cl::Context> ctx_;
};

}  // namespace infinipot::testing_support
