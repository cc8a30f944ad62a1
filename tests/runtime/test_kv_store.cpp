// The KV store's pot operations on the real model: re-rotating cached keys by a position
// delta is what CR-RoPE relies on, and attention only sees relative positions, so moving
// every cached key and the next token by the same delta must leave the logits unchanged;
// compacting to a subset must equal having fed only that subset (when every layer and head
// keeps the same tokens and positions are re-assigned 0..n-1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "engine/engine.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

// One engine per KV element type: every test runs on the fp32 and the fp16 store.
Engine& engine(const std::string& kv_type) {
  // Never destroyed, so the engines stay reachable for LeakSanitizer at exit (a static map
  // would be torn down first and orphan them), and no OpenCL teardown runs during exit.
  static auto* engines = new std::map<std::string, Engine*>;
  auto& e = (*engines)[kv_type];
  if (!e) {
    EngineOptions o;
    o.model_path = test::real_model_path();
    o.kv_type = kv_type;
    // The float decode path: these tests bound what re-rotation moves (fp32 rounding), which an
    // 8-bit input to the products (the native dot) would amplify into whole quantization steps.
    o.tuning_overrides = {{"matvec_native_dot", nlohmann::json::array()}};
    e = new Engine(o);
    e->prepare(256);
  }
  return *e;
}

class KvStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  Engine& engine() { return infinipot::engine(GetParam()); }
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

// fp32 RoPE of a rotated key by -d vs. computing it at p - d directly: a few ulp per
// rotation, amplified through 30 layers; measured 2.4e-5 on logits of magnitude ~20-30,
// so 1e-3 leaves 40x room for other drivers' cos/sin.
constexpr double kShiftTol = 1e-3;
constexpr double kShiftTolF16 = 2e-2;

// The logits of the prompt's last token evaluated once more after the prompt.
std::vector<float> logits_after(Engine& e, const std::vector<TokenId>& tokens) {
  e.kv().reset();
  e.forward().eval(tokens);
  e.forward().eval({tokens.back()});
  return e.forward().last_logits();
}

// A rerotate() delta list moving the first n entries of every head by d.
std::vector<int> uniform_delta(Engine& e, int n, int d) {
  std::vector<int> delta(size_t(e.config().n_head_kv) * e.kv().capacity(), 0);
  for (int h = 0; h < e.config().n_head_kv; ++h)
    for (int s = 0; s < n; ++s) delta[size_t(h) * e.kv().capacity() + s] = d;
  return delta;
}

TEST_P(KvStoreTest, ShiftingAllPositionsLeavesLogitsUnchanged) {
  Engine& e = engine();
  const auto tokens = e.chat_prompt("", "Name three colours of the rainbow.");
  const auto reference = logits_after(e, tokens);

  e.kv().reset();
  e.forward().eval(tokens);
  const int n = e.kv().size();
  const int shift = 37;  // every cached key moves from p to p + 37, and so does the next token
  const std::vector<int> delta = uniform_delta(e, n, shift);
  for (int l = 0; l < e.config().n_layer; ++l) e.kv().rerotate(l, delta);
  e.kv().set_size(n, e.kv().next_position() + shift);
  e.forward().eval({tokens.back()});
  const auto shifted = e.forward().last_logits();
  const double diff = max_abs_diff(reference, shifted);
  std::printf("shift by %d: max |logit diff| %.2e\n", shift, diff);
  // fp16 keys round again after re-rotation (11-bit mantissa): measured 3.5e-3.
  EXPECT_LE(diff, GetParam() == "f16" ? kShiftTolF16 : kShiftTol);
}

// rerotate() computes the angles of a delta list once and reuses them while the next layer
// brings the same list: a list that changes from one call to the next must get its own
// angles. Every layer is moved by +37 and straight back by -37 (a new list each call), so the
// cache must end where it started, up to two fp32 rotations per key; reusing stale angles
// would leave every key 74 positions off.
TEST_P(KvStoreTest, AlternatingDeltasGetTheirOwnAngles) {
  Engine& e = engine();
  const auto tokens = e.chat_prompt("", "Name three colours of the rainbow.");
  const auto reference = logits_after(e, tokens);

  e.kv().reset();
  e.forward().eval(tokens);
  const int n = e.kv().size();
  const std::vector<int> there = uniform_delta(e, n, 37), back = uniform_delta(e, n, -37);
  for (int l = 0; l < e.config().n_layer; ++l) {
    e.kv().rerotate(l, there);
    e.kv().rerotate(l, back);
  }
  e.forward().eval({tokens.back()});
  const double diff = max_abs_diff(reference, e.forward().last_logits());
  std::printf("+37 then -37 per layer: max |logit diff| %.2e\n", diff);
  EXPECT_LE(diff, GetParam() == "f16" ? kShiftTolF16 : kShiftTol);
}

// Compaction moves each head's entries on its own. Permuting every head differently and
// then applying the inverse permutations must restore the cache bit for bit, and a cache
// permuted differently per head must still give the same logits up to summation order
// (attention is a sum over entries, so entry order does not matter).
TEST_P(KvStoreTest, PerHeadCompactionIsExactAndOrderFree) {
  Engine& e = engine();
  const auto tokens = e.chat_prompt("", "The quick brown fox jumps over the lazy dog.");
  const auto& cfg = e.config();
  const int n = int(tokens.size());
  e.kv().reset();
  e.forward().eval(tokens);
  e.forward().eval({tokens.back()});
  const auto plain = e.forward().last_logits();

  // Head h keeps its entries rotated left by 3h+1 slots: a different order per head.
  std::vector<int> perm, inverse(size_t(cfg.n_head_kv) * n);
  for (int h = 0; h < cfg.n_head_kv; ++h)
    for (int j = 0; j < n; ++j) {
      const int src = (j + 3 * h + 1) % n;
      perm.push_back(src);
      inverse[size_t(h) * n + src] = j;
    }
  e.kv().reset();
  e.forward().eval(tokens);
  for (int l = 0; l < cfg.n_layer; ++l) e.kv().compact(l, perm, n);
  // Causality is by slot, so evaluate the next token only: every cached entry is in its past.
  e.forward().eval({tokens.back()});
  const auto permuted = e.forward().last_logits();
  std::printf("per-head permuted cache: max |logit diff| %.2e\n", max_abs_diff(permuted, plain));
  EXPECT_LE(max_abs_diff(permuted, plain), 1e-3);  // fp32 re-association only

  e.kv().reset();
  e.forward().eval(tokens);
  for (int l = 0; l < cfg.n_layer; ++l) {
    e.kv().compact(l, perm, n);
    e.kv().compact(l, inverse, n);
  }
  e.forward().eval({tokens.back()});
  EXPECT_EQ(max_abs_diff(e.forward().last_logits(), plain), 0.0);  // copies change no bits
}

INSTANTIATE_TEST_SUITE_P(KvTypes, KvStoreTest, ::testing::Values("f32", "f16"));

}  // namespace
}  // namespace infinipot
