// Shared by the pot's device tests (test_memory_pot.cpp, test_pot_measures.cpp,
// test_sliding_window.cpp): a tiny generated llama, engines over it, documents, the pot
// options and catalyst a policy gets, and one whole run through a pot (of any model: the pot
// holds the global layers; a gemma3's sliding-window store is reported beside it).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/kit/tiny_model.h"
#include "pot/policy_registry.h"
#include "runtime/device_memory.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {


const std::string& tiny_model() {
  static test::TempDir dir;
  static const std::string path = [] {
    const std::string p = dir.file("tiny.gguf");
    TinyLlamaOptions o;  // 2 layers, 2 KV heads of 16 dims, n_rot 16
    o.tied_embeddings = false;
    write_tiny_llama(p, o);
    return p;
  }();
  return path;
}

// The same tiny model with Llama 3 style RoPE frequency factors (rope_freqs.weight): the
// slower half of the 8 pairs turn 8 times slower.
const std::string& tiny_model_with_rope_factors() {
  static test::TempDir dir;
  static const std::string path = [] {
    const std::string p = dir.file("tiny-rope-factors.gguf");
    TinyLlamaOptions o;
    o.tied_embeddings = false;
    gguf::GgufWriter w = tiny_llama_writer(o);
    w.add_tensor_f32("rope_freqs.weight", gguf::TensorType::F32, {8}, {1, 1, 1, 1, 2, 4, 8, 8});
    w.write(p);
    return p;
  }();
  return path;
}

std::unique_ptr<Engine> make_engine(const std::string& model, const std::string& kv_type = "f32",
                                    uint64_t device_mem = 0) {
  EngineOptions o;
  o.model_path = model, o.kv_type = kv_type, o.device_mem = device_mem;
  return std::make_unique<Engine>(o);
}

// A document of n sentences, each slightly different (numbers, names), so no two stretches
// of it tokenize alike.
std::string document(int n) {
  static const char* names[] = {"Anna", "Boris", "Clara", "Dmitri", "Elena", "Farid", "Greta"};
  static const char* things[] = {"a red boat", "the old mill", "seven lanterns", "a blue kite", "the river gate"};
  std::string s;
  for (int i = 0; i < n; ++i)
    s += std::string(names[i % 7]) + " saw " + things[(i * 3) % 5] + " on day " + std::to_string(17 + i * 13) + ". ";
  return s;
}

const char* kQuestion = "Who saw the river gate?";

// The pot policies of the registry (every policy but full).
std::vector<std::string> pot_policy_names() {
  std::vector<std::string> out;
  for (const auto& info : policies())
    if (info.accepts(Setting::Pot)) out.push_back(info.name);
  return out;
}

// Shared heads and layers are the default; per_head: each (layer, KV head) chooses its own
// (the paper's choice), which exercises the per-head gather.
PotOptions pot_options(int capacity, int keep, const std::string& policy, bool cr_rope = true, float nuc_ratio = 0.5f,
                       bool per_head = false) {
  PotOptions o;
  o.capacity = capacity, o.keep = keep, o.policy = policy;
  o.positions = cr_rope ? PositionRule::Reset : PositionRule::Stream;
  o.params.nuc_ratio = nuc_ratio;
  o.params.per_head = o.params.per_layer = per_head;
  // The CCD policies' default recent window (32 entries) would fill every free place of the
  // small pots here, leaving nothing to the scores; 4 leaves most places to them.
  if (policy != "h2o" && find_policy(policy).accepts(Setting::Recent)) o.params.recent = 4;
  return o;
}

// The catalyst prompt a policy gets (empty for policies that measure none), and its rows.
struct Catalyst {
  std::vector<TokenId> tokens;
  int question_rows = 0;
};
Catalyst catalyst_for(const Engine& e, const PromptParts& parts, const PotOptions& po) {
  Catalyst c;
  if (MemoryPot::needs_of(po).catalyst) c.tokens = e.catalyst_prompt(parts, kQuestion, &c.question_rows);
  return c;
}

struct PotRun {
  GenerateResult result;
  PotStats stats;                         // stats.cycles: distillations
  int kv_size = 0;                        // entries in the pot (the global layers' store)
  std::vector<std::vector<int>> sources;  // [pot layer * n_kv_heads + head]
  uint64_t peak = 0;                      // peak device bytes of the run
  int window_size = 0, window_capacity = 0;  // the sliding-window store (0 without one)
};

// resolve + prepare_pot + generate (greedy), then what the pot holds.
// prepare = false: generate again on the pot already prepared. ignore_eos: answer n_predict
// tokens whatever they are.
PotRun run_pot(Engine& e, const PromptParts& parts, const Catalyst& catalyst, PotOptions po, int n_predict,
               bool prepare = true, bool whole_input = false, bool ignore_eos = false) {
  po = MemoryPot::resolve(po, Engine::pot_layout(parts, catalyst.tokens, n_predict));
  if (prepare) e.prepare_pot(po);
  GenerateOptions g;
  g.n_predict = n_predict;
  g.ignore_eos = ignore_eos;
  PotRun run;
  run.result = e.generate(parts, catalyst.tokens, g, catalyst.question_rows,
                          whole_input ? reading_whole_input() : reading_through_pot());
  run.stats = e.pot()->stats();
  run.kv_size = e.kv().size();
  for (int l = 0; l < e.kv().n_layers(); ++l)
    for (int h = 0; h < e.config().n_head_kv; ++h) run.sources.push_back(e.pot()->sources(l, h));
  run.peak = e.context().memory().peak_total();
  if (const KvStore* w = e.forward().window_store()) run.window_size = w->size(), run.window_capacity = w->capacity();
  return run;
}

// Infinity when the sizes differ.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// The first `pinned` stream indices, then the latest size - pinned of `read` tokens.
std::vector<int> pinned_and_latest(int pinned, int read, int size) {
  std::vector<int> s;
  for (int j = 0; j < pinned; ++j) s.push_back(j);
  for (int i = read - (size - pinned); i < read; ++i) s.push_back(i);
  return s;
}

// ---- Reading the KV store back, and what one distillation must have done to it ----------

float half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const float f = exp == 0 ? std::ldexp(float(man), -24)                  // zero, subnormal
                  : exp == 31 ? (man ? NAN : INFINITY)
                              : std::ldexp(float(man | 0x400), exp - 25);
  return (h & 0x8000) ? -f : f;
}

// One layer's K or V as floats: [n_kv_heads][capacity][head_dim].
std::vector<float> read_kv(Engine& e, cl::Buffer& buf) {
  const size_t n = buf.bytes() / (e.kv_half() ? 2 : 4);
  std::vector<float> out(n);
  if (!e.kv_half()) {
    e.context().read(buf, out.data(), buf.bytes());
  } else {
    std::vector<uint16_t> h(n);
    e.context().read(buf, h.data(), buf.bytes());
    for (size_t i = 0; i < n; ++i) out[i] = half_to_float(h[i]);
  }
  return out;
}

// Its filled slots 0 .. size-1 of every head: [n_kv_heads][size][head_dim] (compaction leaves
// whatever the spare buffer held in the slots after them).
std::vector<float> read_filled(Engine& e, cl::Buffer& buf, int size) {
  const std::vector<float> all = read_kv(e, buf);
  const size_t D = e.config().head_dim, cap = e.kv().capacity();
  std::vector<float> out;
  for (size_t h = 0; h < size_t(e.config().n_head_kv); ++h)
    out.insert(out.end(), all.begin() + h * cap * D, all.begin() + (h * cap + size) * D);
  return out;
}

struct KvSnapshot {
  std::vector<std::vector<float>> k, v;               // per layer
  std::vector<std::vector<int>> sources;               // [layer * n_kv_heads + head]
};
KvSnapshot snapshot(Engine& e) {
  KvSnapshot s;
  for (int l = 0; l < e.config().n_layer; ++l) {
    s.k.push_back(read_kv(e, e.kv().keys(l)));
    s.v.push_back(read_kv(e, e.kv().values(l)));
    for (int h = 0; h < e.config().n_head_kv; ++h) s.sources.push_back(e.pot()->sources(l, h));
  }
  return s;
}

// Llama's "normal" RoPE pairing as tests/support/cpu_ref.h and cl_kernels/rope.cl use it:
// pair i is (x[2i], x[2i+1]), angle = delta * theta^(-2i/n_rot) / factors[i] (Llama 3's
// rope_freqs; none when empty). In double.
std::vector<double> rotate(const float* x, int head_dim, int n_rot, int delta, double theta,
                           const std::vector<float>& factors = {}) {
  std::vector<double> y(x, x + head_dim);
  for (int i = 0; 2 * i < n_rot; ++i) {
    const double a = delta * std::pow(theta, -2.0 * i / n_rot) / (factors.empty() ? 1.0 : double(factors[size_t(i)]));
    y[2 * i] = x[2 * i] * std::cos(a) - x[2 * i + 1] * std::sin(a);
    y[2 * i + 1] = x[2 * i] * std::sin(a) + x[2 * i + 1] * std::cos(a);
  }
  return y;
}

// After one distillation from `before` to `after`: each survivor j of (layer, head) came from
// the slot whose stream index it carries (so no catalyst entry, which has none, survived);
// its value is that slot's, bit for bit; its key is that slot's rotated by (j - old position),
// or unchanged without CR-RoPE. old_position(l, h, slot) gives the position the key had
// before. rerun_last: the last entry before the distillation was computed again in its slot
// (TOVA measures the last token's attention that way): its value may differ by rounding
// (a one-token pass instead of the chunk that read it), within 1e-6. Returns the number of
// rows checked.
template <class OldPosition>
int expect_moved(Engine& e, const KvSnapshot& before, const KvSnapshot& after, int keep, bool cr_rope,
                 OldPosition old_position, bool rerun_last = false) {
  const auto& c = e.config();
  const int cap = e.kv().capacity(), D = c.head_dim;
  // f32: the device rotates in f32 with f32 cos/sin of angles up to ~cap radians (~1e-6
  // relative), so 1e-4 of the row's largest component (measured 4e-7). f16: the rotated key
  // is rounded to half again, at most half an ulp = 2^-11 = 4.9e-4 of its magnitude (measured
  // 4.5e-4), so 1e-3.
  const double tol = e.kv_half() ? 1e-3 : 1e-4;
  int rows = 0, bad = 0;
  double worst = 0;  // largest error relative to the row's scale
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head_kv; ++h) {
      const auto& src_before = before.sources[size_t(l) * c.n_head_kv + h];
      const auto& src_after = after.sources[size_t(l) * c.n_head_kv + h];
      EXPECT_EQ(int(src_after.size()), keep);
      for (int j = 0; j < keep; ++j) {
        const auto it = std::find(src_before.begin(), src_before.end(), src_after[j]);
        EXPECT_NE(it, src_before.end()) << "survivor " << src_after[j] << " was not in the pot";
        if (it == src_before.end()) return rows;
        const int slot = int(it - src_before.begin());
        const size_t o = (size_t(h) * cap + slot) * D, n = (size_t(h) * cap + j) * D;
        const bool rerun = rerun_last && slot + 1 == int(src_before.size());
        if (rerun) {
          for (int d = 0; d < D; ++d)
            EXPECT_NEAR(before.v[l][o + d], after.v[l][n + d], 1e-6) << "re-run value of layer " << l << " head " << h;
        } else {
          EXPECT_EQ(std::memcmp(&before.v[l][o], &after.v[l][n], D * sizeof(float)), 0)
              << "value of layer " << l << " head " << h << " slot " << slot << " -> " << j;
        }
        const int delta = cr_rope ? j - old_position(l, h, slot) : 0;
        const auto want = rotate(&before.k[l][o], D, c.n_rot, delta, c.rope_theta, c.rope_freq_factors);
        double scale = 1e-6;
        for (double w : want) scale = std::max(scale, std::fabs(w));
        for (int d = 0; d < D; ++d) {
          const double err = std::fabs(after.k[l][n + d] - want[d]) / scale;
          worst = std::max(worst, err);
          if (!(err <= tol) && ++bad <= 5)  // the first few mismatches, not thousands
            ADD_FAILURE() << "key of layer " << l << " head " << h << " slot " << slot << " -> " << j << " (delta "
                          << delta << ") dim " << d << ": " << after.k[l][n + d] << ", want " << want[d];
        }
        if (delta == 0 && !rerun)  // the kernel leaves unmoved keys alone: bit-identical copies
          EXPECT_EQ(std::memcmp(&before.k[l][o], &after.k[l][n], D * sizeof(float)), 0);
        ++rows;
      }
    }
  EXPECT_EQ(bad, 0) << "keys off by more than " << tol << " of their row's scale";
  std::printf("%d rows moved, largest key error %.2e of the row's scale\n", rows, worst);
  return rows;
}

}  // namespace
}  // namespace infinipot
