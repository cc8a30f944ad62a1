// Prompt prefill in chunks, then token-by-token decode with streaming.
#include <chrono>
#include <stdexcept>

#include "runtime/cl_error.h"
#include "model_loader/setting_names.h"
#include "engine/engine.h"
#include "runtime/trace.h"

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
  if (pot_) throw std::logic_error("generate: the engine was prepared with a pot; pass the prompt in parts");
  if (prompt.empty()) throw std::invalid_argument("the prompt is empty: give it some text");
  if (opts.n_predict < 0) throw SettingError("n_predict", std::to_string(opts.n_predict), ">= 0", "{n_predict} must be >= 0");
  if (static_cast<int>(prompt.size()) + opts.n_predict > kv_->capacity())
    throw SettingError("n_predict", std::to_string(opts.n_predict), "<= " + std::to_string(kv_->capacity() - static_cast<int>(prompt.size())),
                       "prompt (" + std::to_string(prompt.size()) + " tokens) plus {n_predict} " +
                                std::to_string(opts.n_predict) + " exceeds the KV capacity " +
                                std::to_string(kv_->capacity()));
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.size());
  const auto t0 = Clock::now();
  kv_->reset();
  for (size_t i = 0; i < prompt.size(); i += chunk_) {
    std::vector<TokenId> part(prompt.begin() + i, prompt.begin() + std::min(prompt.size(), i + chunk_));
    trace::Span span("prefill", "prefill chunk", {{"tokens", part.size()}, {"kv_entries", i}});
    forward_->eval(part);
    trace::sync(ctx_->queue());
    if (opts.on_prefill)
      opts.on_prefill({static_cast<int>(i + part.size()), r.prompt_tokens, seconds_since(t0), 0});
  }
  r.prefill_s = seconds_since(t0);
  decode(opts, t0, r);
  return r;
}

namespace {
// The question and the template's tail are appended whole after the document. With neither
// (raw text), the last document token plays that part, so the first answer token is always
// sampled from a row of the prompt and never from the catalyst prompt.
void split_final(const PromptParts& prompt, std::vector<TokenId>& body, std::vector<TokenId>& final_part) {
  body = prompt.body;
  final_part = prompt.question;
  final_part.insert(final_part.end(), prompt.tail.begin(), prompt.tail.end());
  if (final_part.empty() && !body.empty()) {
    final_part.push_back(body.back());
    body.pop_back();
  }
}

// A resumed read must continue the very stream the snapshot read: the chat prefix and the
// first `skip` document tokens, with document left to read (a mismatch is a caller's bug).
void resume_check(const PotSnapshot& snap, const std::vector<TokenId>& prefix, const std::vector<TokenId>& body,
                  int skip) {
  const size_t n = prefix.size() + static_cast<size_t>(skip);
  bool same = skip >= 0 && skip < static_cast<int>(body.size()) && snap.tokens.size() == n;
  for (size_t i = 0; same && i < n; ++i)
    same = snap.tokens[i] == (i < prefix.size() ? prefix[i] : body[i - prefix.size()]);
  if (!same)
    throw std::logic_error("generate: the snapshot to resume from did not read this prompt's first " +
                           std::to_string(n) + " tokens");
}
}  // namespace

PotLayout Engine::pot_layout(const PromptParts& prompt, const std::vector<TokenId>& catalyst, int n_predict) {
  std::vector<TokenId> body, final_part;
  split_final(prompt, body, final_part);
  return {static_cast<int>(prompt.prefix.size()), static_cast<int>(catalyst.size()), static_cast<int>(body.size()),
          static_cast<int>(final_part.size()) + n_predict, n_predict};
}

GenerateResult Engine::generate(const PromptParts& prompt, const std::vector<TokenId>& catalyst,
                                const GenerateOptions& opts, int question_rows, const Reading& reading) {
  if (!pot_) throw cl::ClError("generate: prepare_pot() was not called");
  if (prompt.body.empty()) throw std::invalid_argument("the document is empty: give it some text");
  if (opts.n_predict < 0) throw SettingError("n_predict", std::to_string(opts.n_predict), ">= 0", "{n_predict} must be >= 0");
  std::vector<TokenId> body, final_part;
  split_final(prompt, body, final_part);
  MemoryPot::resolve(pot_->options(), pot_layout(prompt, catalyst, opts.n_predict));  // throws when it does not fit
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.prefix.size() + body.size() + final_part.size());
  const auto t0 = Clock::now();
  const int prefix = static_cast<int>(prompt.prefix.size());
  const int skip = opts.resume ? opts.resume_body : 0;
  if (opts.on_prefill || opts.after_chunk)
    pot_->set_on_chunk([&](int piece_done) {
      const int body_done = skip + piece_done;
      if (opts.on_prefill)
        opts.on_prefill({prefix + body_done, r.prompt_tokens, seconds_since(t0), pot_->stats().cycles});
      if (opts.after_chunk) opts.after_chunk(body_done);
    });
  if (opts.resume) {
    resume_check(*opts.resume, prompt.prefix, body, skip);
    if (opts.resume->settings != MemoryPot::settings_json(pot_->options()))
      throw std::logic_error("generate: the snapshot to resume from was taken with other pot settings");
    pot_->restore(*opts.resume, catalyst, question_rows);
    ++stream_id_;
  } else {
    pot_->begin(prompt.prefix, catalyst, question_rows);
    ++stream_id_;
  }
  pot_->read(std::vector<TokenId>(body.begin() + skip, body.end()), final_part.front(),
             static_cast<int>(final_part.size()) + opts.n_predict);
  pot_->set_on_chunk({});
  if (opts.after_body) opts.after_body();
  reading.after_document(*pot_);  // SnapKV: one selection over the whole input
  if (opts.after_read) {
    std::vector<TokenId> stream = prompt.prefix;
    stream.insert(stream.end(), body.begin(), body.end());
    opts.after_read(stream);
  }
  pot_->finish(final_part, static_cast<int>(final_part.size()) + opts.n_predict);
  r.prefill_s = seconds_since(t0);
  decode(opts, t0, r);
  return r;
}

GenerateResult Engine::generate(const PromptParts& prompt, const PotPlan& plan, const GenerateOptions& opts) {
  if (!plan.pot()) return generate(prompt.all(), opts);
  return generate(prompt, plan.catalyst(), opts, plan.question_rows(), plan.reading());
}

GenerateResult Engine::generate_restored(const PromptParts& prompt, const PotSnapshot& snap,
                                        const std::vector<TokenId>& catalyst, const GenerateOptions& opts,
                                        int question_rows) {
  if (!pot_) throw cl::ClError("generate_restored: prepare_pot() was not called");
  if (opts.n_predict < 0) throw SettingError("n_predict", std::to_string(opts.n_predict), ">= 0", "{n_predict} must be >= 0");
  std::vector<TokenId> final_part = prompt.question;
  final_part.insert(final_part.end(), prompt.tail.begin(), prompt.tail.end());
  if (final_part.empty()) throw SettingError("question", "", "a question", "answering from a saved pot needs a question: give {question}");
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(final_part.size());
  const auto t0 = Clock::now();
  pot_->restore(snap, catalyst, question_rows);
  ++stream_id_;
  pot_->finish(final_part, static_cast<int>(final_part.size()) + opts.n_predict);
  r.prefill_s = seconds_since(t0);
  decode(opts, t0, r);
  return r;
}

void Engine::decode(const GenerateOptions& opts, Clock::time_point t0, GenerateResult& r) {
  r.stop_reason = "length";
  if (opts.n_predict == 0) return;
  Sampler sampler(opts.sampler);
  // Greedy decoding picks the token on the device and reads back one int a step; sampling
  // reads the logits row.
  auto next_token = [&] {
    return sampler.greedy() ? forward_->last_greedy_token() : sampler.sample(forward_->last_logits());
  };
  const auto t_decode = Clock::now();
  std::string pending;  // bytes not yet streamed (incomplete UTF-8)
  for (int i = 0; i < opts.n_predict; ++i) {
    if (opts.cancelled && opts.cancelled()) {
      r.stop_reason = "cancelled";
      break;
    }
    const TokenId tok = next_token();
    if (i == 0) r.ttft_s = seconds_since(t0);
    if (!opts.ignore_eos && tokenizer_->is_end_of_generation(tok)) {
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
    ++r.evaluated;
    if (pot_) pot_->append(tok);  // the pot records the answer's slots and positions too
    else {
      trace::Span span("decode", "decode token");
      forward_->eval(&tok, 1);
      trace::sync(ctx_->queue());
    }
  }
  if (opts.on_text && !pending.empty()) opts.on_text(pending);
  r.decode_s = seconds_since(t_decode);
}

}  // namespace infinipot
