// Streaming a document through the pot as it arrives (Engine::stream_*): the pot reads each
// piece at once, so the device never holds more than the pot, and the host keeps nothing of
// the text but one held-back token.
#include <chrono>

#include "engine/engine.h"
#include "runtime/cl_error.h"

namespace infinipot {

void Engine::stream_begin(const std::vector<TokenId>& prefix, const std::vector<TokenId>& catalyst, int question_rows) {
  if (!pot_) throw cl::ClError("stream_begin: prepare_pot() was not called");
  pot_->begin(prefix, catalyst, question_rows);
  ++stream_id_;
  stream_held_ = -1;
  stream_read_ = static_cast<int>(prefix.size());
}

void Engine::stream_read(const std::vector<TokenId>& tokens) {
  if (!pot_) throw cl::ClError("stream_read: stream_begin() was not called");
  if (tokens.empty()) return;
  std::vector<TokenId> part;
  part.reserve(tokens.size());
  if (stream_held_ >= 0) part.push_back(stream_held_);
  // All but the last token (an index loop: GCC 12's -Warray-bounds misreads the range insert).
  for (size_t i = 0; i + 1 < tokens.size(); ++i) part.push_back(tokens[i]);
  stream_held_ = tokens.back();
  // Room for the catalyst is always kept: how much more will come is unknown.
  if (!part.empty()) pot_->read(part, stream_held_, pot_->options().capacity);
  stream_read_ += static_cast<int>(tokens.size());
}

GenerateResult Engine::stream_answer(const std::vector<TokenId>& final_part, const GenerateOptions& opts, int room_after) {
  if (!pot_) throw cl::ClError("stream_answer: stream_begin() was not called");
  if (final_part.empty()) throw std::invalid_argument("the question is empty");
  if (opts.n_predict < 0) throw std::invalid_argument("n_predict must be >= 0");
  GenerateResult r;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TokenId> rest;
  if (stream_held_ >= 0) {
    pot_->read({stream_held_}, final_part.front(), static_cast<int>(final_part.size()) + opts.n_predict + room_after);
    stream_held_ = -1;
  }
  pot_->finish(final_part, static_cast<int>(final_part.size()) + opts.n_predict + room_after);
  r.prompt_tokens = stream_read_ + static_cast<int>(final_part.size());
  r.prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  decode(opts, t0, r);
  return r;
}

void Engine::stream_catalyst(const std::vector<TokenId>& catalyst, int question_rows) {
  if (!pot_) throw cl::ClError("stream_catalyst: stream_begin() was not called");
  pot_->set_catalyst(catalyst, question_rows);
}

void Engine::stream_make_room(int n) {
  if (!pot_) throw cl::ClError("stream_make_room: stream_begin() was not called");
  // The held token goes in first, then n more, beside the catalyst's rows.
  const int need = n + (stream_held_ >= 0 ? 1 : 0) + static_cast<int>(pot_->catalyst().size());
  if (kv_->free_slots() < need) pot_->distill();
}

void Engine::stream_flush() {
  if (!pot_) throw cl::ClError("stream_flush: stream_begin() was not called");
  if (stream_held_ < 0) return;
  pot_->read({stream_held_}, -1, pot_->options().capacity);
  stream_held_ = -1;
}

PotSnapshot Engine::stream_capture(const std::vector<TokenId>& tokens, TokenId* held) {
  if (!pot_) throw cl::ClError("stream_capture: stream_begin() was not called");
  if (held) *held = stream_held_;
  else if (stream_held_ >= 0) throw std::logic_error("stream_capture with a token held back: answer first");
  return pot_->capture(tokens, model_id());
}

void Engine::stream_restore(const PotSnapshot& snap, const std::vector<TokenId>& catalyst, int question_rows,
                            TokenId held) {
  if (!pot_) throw cl::ClError("stream_restore: prepare_pot() was not called");
  pot_->restore(snap, catalyst, question_rows);
  ++stream_id_;
  stream_held_ = held;
  stream_read_ = snap.stream_pos + (held >= 0 ? 1 : 0);
}

}  // namespace infinipot
