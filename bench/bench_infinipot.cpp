// Throughput benchmark: prefill (pp) and decode (tg) tokens/s of the real model, GEMM GFLOP/s
// of both GEMM backends and matvec GB/s, printed as a table and as JSON. With --llama-cpp it
// also runs bench/llama_cpp_bench.sh --quick (llama-bench on the AMX-off build, and the AMX build
// when it has been built; same GGUF, same thread count) in the same
// run and puts its figures next to ours. Figures come from repeated runs after a warm-up
// (median reported); the OpenCL programs are compiled before timing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <CLI/CLI.hpp>

#include "engine/engine.h"
#include "runtime/gemm_layer.h"
#include "runtime/ops.h"

using namespace infinipot;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

template <typename F>
std::vector<double> time_runs(int reps, F&& f) {
  f();  // warm-up: kernel compilation, first-touch of buffers
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return t;
}

std::vector<TokenId> random_tokens(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TokenId> t(n);
  for (auto& x : t) x = static_cast<TokenId>(rng() % vocab);
  return t;
}

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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"infinipot benchmark: prefill/decode tok/s, GEMM GFLOP/s (JSON + table)"};
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf", device, json_out;
  int pp = 512, tg = 128, reps = 3;
  bool llama = false, gemm = true;
  app.add_option("-m,--model", model, "GGUF model")->capture_default_str();
  app.add_option("--device", device, "OpenCL device");
  app.add_option("-p,--prompt-tokens", pp, "Prefill length (pp)")->capture_default_str();
  app.add_option("-n,--gen-tokens", tg, "Decode length (tg)")->capture_default_str();
  app.add_option("-r,--reps", reps, "Timed repetitions (median reported)")->capture_default_str();
  app.add_flag("--llama-cpp", llama, "Also run bench/llama_cpp_bench.sh --quick (llama-bench) and report its figures");
  app.add_flag("!--no-gemm", gemm, "Skip the GEMM backend comparison");
  app.add_option("--json-out", json_out, "Also write the JSON to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    EngineOptions eo;
    eo.model_path = model;
    eo.device = device;
    Engine engine(eo);
    engine.prepare(pp + tg);
    auto& ctx = engine.context();
    const int vocab = engine.config().n_vocab;
    nlohmann::json j;
    j["device"] = ctx.device().to_json();
    j["tuning"] = ctx.tuning().to_json();
    j["model"] = model;

    const auto prompt = random_tokens(pp, vocab, 1);
    auto t_pp = time_runs(reps, [&] {
      engine.kv().reset();
      for (int i = 0; i < pp; i += engine.chunk())
        engine.forward().eval(std::vector<TokenId>(prompt.begin() + i, prompt.begin() + std::min(pp, i + engine.chunk())));
    });
    const auto gen = random_tokens(tg, vocab, 2);
    auto t_tg = time_runs(reps, [&] {
      engine.kv().reset();
      for (int i = 0; i < tg; ++i) {
        engine.forward().eval({gen[i]});
        (void)engine.forward().last_logits();  // the logits readback is part of every decode step
      }
    });
    j["pp"] = {{"tokens", pp}, {"seconds", median(t_pp)}, {"tok_s", pp / median(t_pp)}};
    j["tg"] = {{"tokens", tg}, {"seconds", median(t_tg)}, {"tok_s", tg / median(t_tg)}};
    if (gemm) j["gemm"] = bench_gemm(ctx, reps, std::min(pp, 512));
    j["peak_device_bytes"] = ctx.memory().peak_total();

    if (llama) {
      std::string cmd = std::string(INFINIPOT_SOURCE_DIR) + "/bench/llama_cpp_bench.sh --quick";
      FILE* p = popen(cmd.c_str(), "r");
      std::string text;
      char buf[4096];
      size_t n;
      while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
      const int rc = p ? pclose(p) : -1;
      try {
        j["llama_cpp"] = nlohmann::json::parse(text);
      } catch (const std::exception&) {
        j["llama_cpp"] = {{"error", "bench/llama_cpp_bench.sh failed (exit " + std::to_string(rc) +
                                        "); build it with scripts/reference/build-llama-cpp.sh"}};
      }
    }

    std::printf("\n%-34s %12s\n", "infinipot on", ctx.device().name.c_str());
    std::printf("%-34s %12.1f tok/s\n", ("prefill pp" + std::to_string(pp)).c_str(), j["pp"]["tok_s"].get<double>());
    std::printf("%-34s %12.1f tok/s\n", ("decode tg" + std::to_string(tg)).c_str(), j["tg"]["tok_s"].get<double>());
    if (gemm)
      for (auto& g : j["gemm"])
        std::printf("gemm %-8s %5d x %4d x %4d     %12.1f GFLOP/s\n", g["backend"].get<std::string>().c_str(),
                    g["m"].get<int>(), g["n"].get<int>(), g["k"].get<int>(), g["gflops"].get<double>());
    if (j.contains("llama_cpp") && j["llama_cpp"].is_array())
      for (auto& r : j["llama_cpp"]) {
        const bool is_pp = r.value("n_prompt", 0) > 0;
        std::printf("llama.cpp %-6s %-18s %12.1f tok/s (t=%d)\n", r.value("variant", "?").c_str(),
                    is_pp ? ("pp" + std::to_string(r.value("n_prompt", 0))).c_str()
                          : ("tg" + std::to_string(r.value("n_gen", 0))).c_str(),
                    r.value("avg_ts", 0.0), r.value("n_threads", 0));
      }
    const std::string dump = j.dump(2);
    std::cout << dump << std::endl;
    if (!json_out.empty()) {
      FILE* f = std::fopen(json_out.c_str(), "w");
      if (f) {
        std::fputs(dump.c_str(), f);
        std::fclose(f);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
