// `infinipot bench --gemm`: GFLOP/s of both GEMM backends (our packed kernel and CLBlast) on
// SmolLM2-135M's prefill products, timed as prefill uses them (the weight dequantized into
// the backend's layout on each product; input packing excluded, as it is shared).
#include <array>
#include <random>
#include <nlohmann/json.hpp>

#include "runtime/context.h"
#include "runtime/gemm_layer.h"
#include "runtime/ops.h"
#include "bench/bench_timing.h"

namespace infinipot::cli {

nlohmann::json bench_gemm(cl::Context& ctx, int reps, int m) {
  nlohmann::json out = nlohmann::json::array();
  // Shapes of SmolLM2-135M's prefill products: (rows, out features, in features).
  const std::vector<std::array<int, 3>> shapes = {{m, 960, 576}, {m, 3072, 576}, {m, 576, 1536}};
  for (const std::string backend : {"packed", "clblast"}) {
    for (auto [M, N, K] : shapes) {
      GemmLayer g(ctx, backend, M, K, ops::panel_floats(N, K));
      ops::DeviceWeight w;
      w.type = gguf::TensorType::F32;
      w.rows = N;
      w.cols = K;
      w.row_bytes = K * 4;
      std::vector<float> host(size_t(N) * K), a(size_t(M) * K);
      std::mt19937 rng(1);
      std::normal_distribution<float> nd;
      for (auto& x : host) x = nd(rng);
      for (auto& x : a) x = nd(rng);
      w.buf = ctx.memory().alloc(cl::MemCategory::Weights, host.size() * 4, "bench.w");
      ctx.write(w.buf, host.data(), host.size() * 4);
      cl::Buffer in = ctx.memory().alloc(cl::MemCategory::Activations, a.size() * 4, "bench.a");
      ctx.write(in, a.data(), a.size() * 4);
      cl::Buffer c = ctx.memory().alloc(cl::MemCategory::Activations, size_t(M) * N * 4, "bench.c");
      // Timed as prefill uses it: each product dequantizes the weight into the layout the
      // backend reads (input packing excluded: it is shared by the products of one input).
      g.set_input(in, M, K);
      g.multiply(w, c, N, 0, false);
      ctx.finish();
      auto t = time_runs(reps, [&] {
        for (int i = 0; i < 5; ++i) g.multiply(w, c, N, 0, false);
        ctx.finish();
      });
      const double s = median(t) / 5;
      out.push_back({{"backend", backend}, {"m", M}, {"n", N}, {"k", K}, {"seconds", s},
                     {"gflops", 2.0 * M * N * K / s / 1e9}});
    }
  }
  return out;
}

}  // namespace infinipot::cli
