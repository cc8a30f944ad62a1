#include "runtime/sampling.h"
#include "model_loader/setting_names.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace infinipot {

Sampler::Sampler(const SamplerOptions& opts) : opts_(opts), rng_(opts.seed) {
  if (!(opts.top_p > 0.0f)) throw SettingError("top_p", std::to_string(opts.top_p), "in (0, 1]", "{top_p} must be in (0, 1], got " + std::to_string(opts.top_p));
  if (!std::isfinite(opts.temperature)) throw SettingError("temp", std::to_string(opts.temperature), "a finite number", "{temp} must be a finite number");
}

TokenId Sampler::argmax(const std::vector<float>& logits) {
  // First maximum, as llama.cpp's greedy sampler; NaN never wins.
  long best = -1;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[size_t(best)])) best = static_cast<long>(i);
  return static_cast<TokenId>(best < 0 ? 0 : best);
}

TokenId Sampler::sample(const std::vector<float>& logits) {
  if (opts_.temperature <= 0.0f) return argmax(logits);
  std::vector<TokenId> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  // top-k: keep the k largest (stable order for equal logits, so runs are reproducible)
  size_t k = ids.size();
  if (opts_.top_k > 0) k = std::min<size_t>(k, static_cast<size_t>(opts_.top_k));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](TokenId a, TokenId b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ids.resize(k);
  // softmax with temperature over the survivors
  std::vector<double> p(k);
  const double mx = logits[ids[0]];
  double sum = 0;
  for (size_t i = 0; i < k; ++i) sum += p[i] = std::exp((logits[ids[i]] - mx) / opts_.temperature);
  for (auto& v : p) v /= sum;
  // top-p: smallest prefix whose mass reaches top_p
  if (opts_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = 0;
    while (keep < k) {
      cum += p[keep++];
      if (cum >= opts_.top_p) break;
    }
    p.resize(keep);
    ids.resize(keep);
  }
  std::discrete_distribution<size_t> dist(p.begin(), p.end());
  return ids[dist(rng_)];
}

}  // namespace infinipot
