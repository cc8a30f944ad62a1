// `infinipot bench --attention`: GFLOP/s of the prefill attention variants on this device, at
// the shapes long prefill runs: a chunk of query rows against a cache of `n_past` earlier
// entries (through the pot: up to pot + chunk keys; with a full cache: the whole document so
// far), K and V in fp32. Each variant runs in a context whose tuning selects it, so the
// figures say which variant `platforms/tuning.json` should name for this device.
#include <random>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "runtime/context.h"
#include "runtime/ops.h"
#include "bench/bench_timing.h"

namespace infinipot::cli {
namespace {
std::vector<float> normal_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// Multiply-adds of causal attention for rows [n_past, n_past + n): q.k and p.v per visible key.
double attention_flops(int n_heads, int head_dim, int n_past, int n) {
  const double keys = double(n) * n_past + double(n) * (n + 1) / 2;  // keys seen, summed over rows
  return 2.0 * 2.0 * keys * n_heads * head_dim;
}

// Variants by their tuning values (the inside of a JSON object, as platforms/tuning.json
// writes them).
const std::vector<std::pair<std::string, std::string>> kAttentionVariants = {
    {"vec16 rows 4", "\"attention_vec16\": true, \"attention_vec16_rows\": 4"},
    {"vec16 rows 8", "\"attention_vec16\": true, \"attention_vec16_rows\": 8"},
    {"vec16 rows 16", "\"attention_vec16\": true, \"attention_vec16_rows\": 16"},
    {"tiled 16x32", "\"attention_vec16\": false, \"attention_tile_rows\": 16, \"attention_key_tile\": 32"},
    {"untiled", "\"attention_vec16\": false, \"attention_tile_rows\": 1"},
};
}  // namespace

nlohmann::json bench_attention(const std::string& device, int reps, int n_heads, int n_kv_heads, int head_dim,
                               int chunk, const std::vector<int>& pasts) {
  nlohmann::json out = nlohmann::json::array();
  const int ldq = (n_heads + 2 * n_kv_heads) * head_dim, ldo = n_heads * head_dim;
  for (const auto& [name, values] : kAttentionVariants) {
    cl::ContextOptions co;
    co.device = device;
    co.tuning_overrides = nlohmann::json::parse("{" + values + "}");
    cl::Context ctx(co);
    for (int n_past : pasts) {
      const int cap = n_past + chunk;
      const ops::AttentionShape s{n_heads, n_kv_heads, head_dim, cap};
      const std::vector<float> q = normal_floats(size_t(chunk) * ldq, 1);
      const std::vector<float> kv = normal_floats(size_t(n_kv_heads) * cap * head_dim, 2);
      auto upload = [&](const std::vector<float>& h, cl::MemCategory cat, const char* tag) {
        cl::Buffer b = ctx.memory().alloc(cat, h.size() * 4, tag);
        ctx.write(b, h.data(), h.size() * 4);
        return b;
      };
      cl::Buffer d_q = upload(q, cl::MemCategory::Activations, "bench.q");
      cl::Buffer d_k = upload(kv, cl::MemCategory::KvCache, "bench.k");
      cl::Buffer d_v = upload(kv, cl::MemCategory::KvCache, "bench.v");
      cl::Buffer d_out = ctx.memory().alloc(cl::MemCategory::Activations, size_t(chunk) * ldo * 4, "bench.out");
      cl::Buffer d_lse = ctx.memory().alloc(cl::MemCategory::Scratch, size_t(chunk) * n_heads * 4, "bench.lse");
      auto run = [&] {
        ops::attention(ctx, s, d_q, ldq, d_k, d_v, n_past, chunk, d_out, ldo, d_lse);
        ctx.finish();
      };
      const double sec = median(time_runs(reps, run));
      out.push_back({{"variant", name}, {"device", ctx.device().name}, {"tuning", nlohmann::json::parse("{" + values + "}")},
                     {"n_heads", n_heads}, {"n_kv_heads", n_kv_heads}, {"head_dim", head_dim},
                     {"rows", chunk}, {"n_past", n_past}, {"seconds", sec},
                     {"gflops", attention_flops(n_heads, head_dim, n_past, chunk) / sec / 1e9}});
    }
  }
  return out;
}

}  // namespace infinipot::cli
