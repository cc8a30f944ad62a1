// Prompt prefill in chunks, then token-by-token decode with streaming.
#include <chrono>

#include "runtime/cl_error.h"
#include "runtime/engine.h"

namespace infinipot {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Length of the longest prefix of s that ends on a complete UTF-8 sequence, so streamed
// output never splits a character across two writes.
size_t complete_utf8_prefix(const std::string& s) {
  size_t i = s.size();
  size_t back = 0;
  while (i > 0 && back < 4) {
    unsigned char c = static_cast<unsigned char>(s[i - 1]);
    if ((c & 0xC0) != 0x80) {  // lead byte or ASCII
      size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      return back + 1 >= need ? s.size() : i - 1;
    }
    --i;
    ++back;
  }
  return s.size();
}

}  // namespace

GenerateResult Engine::generate(const std::vector<TokenId>& prompt, const GenerateOptions& opts) {
  if (!forward_) throw cl::ClError("generate: prepare() was not called");
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty: give text with -p or -f");
  if (opts.n_predict < 0) throw std::invalid_argument("-n must be >= 0");
  if (static_cast<int>(prompt.size()) + opts.n_predict > kv_->capacity())
    throw std::invalid_argument("prompt (" + std::to_string(prompt.size()) + " tokens) plus -n " +
                                std::to_string(opts.n_predict) + " exceeds the KV capacity " +
                                std::to_string(kv_->capacity()));
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.size());
  Sampler sampler(opts.sampler);
  const auto t0 = Clock::now();
  kv_->reset();
  for (size_t i = 0; i < prompt.size(); i += chunk_) {
    std::vector<TokenId> part(prompt.begin() + i, prompt.begin() + std::min(prompt.size(), i + chunk_));
    forward_->eval(part);
  }
  r.prefill_s = seconds_since(t0);
  if (opts.n_predict == 0) {
    r.stop_reason = "length";
    return r;
  }
  std::vector<float> logits = forward_->last_logits();
  const auto t_decode = Clock::now();
  std::string pending;  // bytes not yet streamed (incomplete UTF-8)
  r.stop_reason = "length";
  for (int i = 0; i < opts.n_predict; ++i) {
    const TokenId tok = sampler.sample(logits);
    if (i == 0) r.ttft_s = seconds_since(t0);
    if (tokenizer_->is_end_of_generation(tok)) {
      r.stop_reason = "eos";
      break;
    }
    r.tokens.push_back(tok);
    const std::string piece = tokenizer_->decode_token(tok);
    r.text += piece;
    pending += piece;
    const size_t ready = complete_utf8_prefix(pending);
    if (opts.on_text && ready) opts.on_text(pending.substr(0, ready));
    pending.erase(0, ready);
    if (i + 1 == opts.n_predict) break;
    forward_->eval({tok});
    logits = forward_->last_logits();
  }
  if (opts.on_text && !pending.empty()) opts.on_text(pending);
  r.decode_s = seconds_since(t_decode);
  return r;
}

}  // namespace infinipot
