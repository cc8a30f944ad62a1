// Token sampling on the host from one row of logits: greedy, or temperature with top-k and
// top-p (nucleus) filtering, seeded so the same flags give the same tokens.
#pragma once
#include <cstdint>
#include <random>
#include <vector>
#include "model_loader/tokenizer.h"

namespace infinipot {

struct SamplerOptions {
  float temperature = 0.0f;  // <= 0: greedy (argmax)
  int top_k = 40;            // <= 0: no top-k filter
  float top_p = 0.95f;       // >= 1: no nucleus filter
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& opts);
  TokenId sample(const std::vector<float>& logits);
  bool greedy() const { return opts_.temperature <= 0.0f; }
  // The first index of the largest value; NaN never wins, and a row of nothing but NaN gives
  // 0 (the reference of the device's argmax_row, cl_kernels/argmax.cl).
  static TokenId argmax(const std::vector<float>& logits);

 private:
  SamplerOptions opts_;
  std::mt19937_64 rng_;
};

}  // namespace infinipot
