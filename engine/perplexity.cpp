// Perplexity, computed as llama.cpp's llama-perplexity does so the numbers compare directly.
#include <chrono>
#include <cmath>
#include <stdexcept>

#include "model_loader/setting_names.h"
#include "engine/engine.h"

namespace infinipot {

PerplexityResult perplexity(Engine& engine, const std::vector<TokenId>& tokens, int n_ctx,
                            const std::function<void(int, int, double)>& progress) {
  if (n_ctx < 16) throw SettingError("ctx", std::to_string(n_ctx), ">= 16", "{ctx} must be at least 16, got " + std::to_string(n_ctx));
  const int n_tokens = static_cast<int>(tokens.size());
  const int windows = n_tokens / n_ctx;
  if (windows < 1)
    throw SettingError("ctx", std::to_string(n_ctx), "<= " + std::to_string(n_tokens),
                       "the text has " + std::to_string(n_tokens) + " tokens, fewer than one window of {ctx} " +
                           std::to_string(n_ctx) + "; use a longer file or a smaller {ctx}");
  const auto t0 = std::chrono::steady_clock::now();
  const int first = n_ctx / 2;  // only the second half of each window is scored
  const int chunk = engine.chunk();
  // A model that asks for BOS (add_bos_token) sees one at the start of every window, in place
  // of the window's first token, as llama-perplexity feeds it (that token is never scored).
  const Tokenizer& tok = engine.tokenizer();
  const TokenId bos = tok.add_bos_default() ? tok.bos() : -1;
  double nll_sum = 0, nll2_sum = 0;
  int count = 0;
  for (int w = 0; w < windows; ++w) {
    const int start = w * n_ctx;
    engine.kv().reset();
    for (int c0 = 0; c0 < n_ctx; c0 += chunk) {
      const int n = std::min(chunk, n_ctx - c0);
      std::vector<TokenId> part(tokens.begin() + start + c0, tokens.begin() + start + c0 + n);
      if (c0 == 0 && bos >= 0) part[0] = bos;
      engine.forward().eval(part);
      // Row j (window position c0 + j) predicts the token at window position c0 + j + 1.
      std::vector<TokenId> targets(n, -1);
      bool any = false;
      for (int j = 0; j < n; ++j) {
        const int p = c0 + j;
        if (p >= first && p < n_ctx - 1) {
          targets[j] = tokens[start + p + 1];
          any = true;
        }
      }
      if (!any) continue;
      std::vector<float> nll = engine.forward().token_nll(targets);
      for (int j = 0; j < n; ++j) {
        if (targets[j] < 0) continue;
        nll_sum += nll[j];
        nll2_sum += double(nll[j]) * nll[j];
        ++count;
      }
    }
    if (progress) progress(w + 1, windows, std::exp(nll_sum / count));
  }
  PerplexityResult r;
  r.windows = windows;
  r.scored_tokens = count;
  r.n_tokens = n_tokens;
  const double mean = nll_sum / count;
  r.perplexity = std::exp(mean);
  // Standard error of the mean NLL propagated to PPL (llama.cpp reports the same estimate).
  const double var = nll2_sum / count - mean * mean;
  r.stderr_ppl = count > 1 ? r.perplexity * std::sqrt(std::max(0.0, var) / (count - 1)) : 0.0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace infinipot
