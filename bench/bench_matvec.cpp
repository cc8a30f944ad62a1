// `infinipot bench --matvec`: the model's decode products, one input row, timed kernel by
// kernel on its real weights. A timed run launches one product in every layer in turn (the
// LM head: 3 times), so the weights stream from memory as in decode rather than from a cache
// that one matrix repeated would stay in. Paths: "float" (`matvec`, each weight converted to
// float), "fused" (the forms decode runs under matvec_fusion: RMSNorm in the input read,
// gate|up with its activation), "int8" (`quantize_q8` + `matvec_q8`, for the types that have
// it). Each row: microseconds per product and weight bytes read per second; "one token" adds
// a path's products over the layers and the head once (a product the path lacks counts at
// its float time): the products' part of a decode step, without the other kernels. A product
// is timed over the layers that hold it: where a file's layers differ in encoding (Q4_K_M),
// the loader fuses q|k|v or gate|up only where the parts match, so a layer has either.
#include <functional>
#include <random>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "model_loader/quant.h"
#include "runtime/ops.h"
#include "bench/bench_timing.h"

namespace infinipot::cli {
namespace {

struct Product {
  std::string name;
  ops::DeviceWeight DeviceLayer::*weight;  // null: the LM head
};

constexpr int kHeadLaunches = 3;  // LM head products per timed run

}  // namespace

nlohmann::json bench_matvec(Engine& engine, int reps) {
  cl::Context& ctx = engine.context();
  const DeviceModel& m = engine.forward().model();
  const LlamaConfig& cfg = m.cfg;
  // The layers holding weight `w` (a fused matrix, or its parts), in order.
  auto holders = [&](ops::DeviceWeight DeviceLayer::*w) {
    std::vector<const DeviceLayer*> out;
    for (const DeviceLayer& L : m.layers)
      if ((L.*w).buf) out.push_back(&L);
    return out;
  };
  std::vector<Product> products;
  for (const Product& p : std::initializer_list<Product>{{"q|k|v", &DeviceLayer::wqkv}, {"q", &DeviceLayer::wq},
                                                         {"k", &DeviceLayer::wk}, {"v", &DeviceLayer::wv},
                                                         {"o", &DeviceLayer::wo}, {"gate|up", &DeviceLayer::w_gate_up},
                                                         {"gate", &DeviceLayer::w_gate}, {"up", &DeviceLayer::w_up},
                                                         {"down", &DeviceLayer::w_down}})
    if (!holders(p.weight).empty()) products.push_back(p);
  products.push_back({"lm_head", nullptr});

  const int widest = std::max({cfg.n_embd, cfg.n_ff, cfg.n_head * cfg.head_dim});
  const int tallest = std::max({m.lm_head().rows, 2 * cfg.n_ff, (cfg.n_head + 2 * cfg.n_head_kv) * cfg.head_dim});
  std::vector<float> host(widest);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : host) v = nd(rng);
  cl::Buffer x = ctx.memory().alloc(cl::MemCategory::Activations, host.size() * 4, "bench.x");
  ctx.write(x, host.data(), host.size() * 4);
  cl::Buffer xq = ctx.memory().alloc(cl::MemCategory::Activations, (widest / 32) * 40 + 64, "bench.xq");
  cl::Buffer y = ctx.memory().alloc(cl::MemCategory::Activations, size_t(tallest) * 4, "bench.y");

  nlohmann::json out = nlohmann::json::array();
  // launch(W, L): one product of layer L's weight W (L null: the LM head).
  using Launch = std::function<void(const ops::DeviceWeight&, const DeviceLayer*)>;
  // Times `launch` over the layers holding p's weight (the LM head: kHeadLaunches times) that
  // `takes` accepts; nothing when none does. Bytes per product: their mean.
  using Takes = std::function<bool(const ops::DeviceWeight&)>;
  auto time_product = [&](const std::string& path, const Product& p, const Launch& launch,
                          const Takes& takes = [](const ops::DeviceWeight&) { return true; }) {
    std::vector<const DeviceLayer*> layers;
    if (p.weight)
      for (const DeviceLayer* L : holders(p.weight))
        if (takes(L->*p.weight)) layers.push_back(L);
    if (p.weight ? layers.empty() : !takes(m.lm_head())) return;
    const ops::DeviceWeight& W0 = p.weight ? layers.front()->*p.weight : m.lm_head();
    const int launches = p.weight ? static_cast<int>(layers.size()) : kHeadLaunches;
    double bytes = 0;
    for (int i = 0; i < launches; ++i) {
      const ops::DeviceWeight& W = p.weight ? layers[i]->*p.weight : W0;
      bytes += double(W.rows) * W.row_bytes / launches;
    }
    auto t = time_runs(reps, [&] {
      for (int i = 0; i < launches; ++i) {
        if (p.weight) launch(layers[i]->*p.weight, layers[i]);
        else launch(W0, nullptr);
      }
      ctx.finish();
    });
    std::sort(t.begin(), t.end());
    const double med = median(t) / launches, best = t.front() / launches;
    out.push_back({{"path", path}, {"product", p.name}, {"type", quant::traits(W0.type).name}, {"rows", W0.rows},
                   {"cols", W0.cols}, {"bytes", bytes}, {"seconds", med}, {"seconds_min", best},
                   {"gbps", bytes / med / 1e9}, {"device", ctx.device().name}});
  };

  for (const auto& p : products) {
    time_product("float", p, [&](const ops::DeviceWeight& W, const DeviceLayer*) {
      ops::matvec(ctx, W, x, 1, y, W.rows, false);
    });
  }
  // Fused forms, in place of the plain products they stand for in decode.
  const ops::Glu act = cfg.ffn_act == FfnActivation::GeluTanh ? ops::Glu::GeluTanh : ops::Glu::Silu;
  for (const auto& p : products) {
    const bool qkv = p.name == "q|k|v", gate_up = p.name == "gate|up", head = !p.weight;
    if (!qkv && !gate_up && !head) continue;
    time_product("fused", p, [&](const ops::DeviceWeight& W, const DeviceLayer* L) {
      const ops::RowNorm norm{L ? (gate_up ? &L->ffn_norm : &L->attn_norm) : &m.output_norm, cfg.rms_eps};
      if (gate_up) ops::matvec_glu(ctx, W, W, cfg.n_ff, cfg.n_ff, act, x, norm, 1, y);
      else ops::matvec_norm(ctx, W, x, norm, 1, y, W.rows);
    });
  }
  for (const auto& p : products)
    time_product(
        "int8", p,
        [&](const ops::DeviceWeight& W, const DeviceLayer*) {
          ops::quantize_q8(ctx, x, 1, W.cols, xq);
          ops::matvec_q8(ctx, W, xq, 1, y, W.rows, false);
        },
        [](const ops::DeviceWeight& W) { return ops::matvec_q8_supports(W.type); });

  auto row_of = [&](const std::string& product, const std::string& path) -> const nlohmann::json* {
    for (const auto& r : out)
      if (r["product"] == product && r["path"] == path) return &r;
    return nullptr;
  };
  for (const std::string path : {"float", "fused", "int8"}) {
    bool any = false;
    double s = 0, bytes = 0;
    for (const auto& p : products) {
      const nlohmann::json* r = row_of(p.name, path);
      any = any || r;
      if (!r) r = row_of(p.name, "float");
      const double times = p.weight ? double(holders(p.weight).size()) : 1.0;
      s += times * (*r)["seconds"].get<double>();
      bytes += times * (*r)["bytes"].get<double>();
    }
    if (any)
      out.push_back({{"path", path}, {"product", "one token"}, {"type", ""}, {"rows", 0}, {"cols", 0},
                     {"bytes", bytes}, {"seconds", s}, {"seconds_min", s}, {"gbps", bytes / s / 1e9},
                     {"device", ctx.device().name}});
  }
  return out;
}

}  // namespace infinipot::cli
