#include "engine/conversation.h"
#include "model_loader/setting_names.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace infinipot {

namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n\r") - b + 1);
}

void append(std::vector<TokenId>& to, const std::vector<TokenId>& from) { to.insert(to.end(), from.begin(), from.end()); }

// A sentinel for message i's content: no whitespace (templates that trim keep it whole), no
// character a template escapes.
std::string sentinel(size_t i) { return "\x01infinipot-message-" + std::to_string(i) + "\x01"; }

// The template's markup between an assistant's content and the next user's content (end of the
// assistant turn, user header): the catalyst's opening, as if the question came next.
std::vector<TokenId> user_turn_markup(const Engine& engine) {
  const std::vector<ChatMessage> probe = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  return chat_segments(engine, probe).markup[2];
}

}  // namespace

std::vector<TokenId> ChatSegments::prefix() const {
  std::vector<TokenId> out;
  for (size_t i = 0; i < first_turn; ++i) {
    append(out, markup[i]);
    append(out, content[i]);
  }
  append(out, markup[first_turn]);
  return out;
}

void check_chat_messages(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw std::invalid_argument("messages is empty: a chat needs at least one user message");
  bool seen_turn = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (role != "system" && role != "user" && role != "assistant")
      throw std::invalid_argument(at + ".role must be \"system\", \"user\" or \"assistant\", got \"" + role + "\"");
    if (role == "system" && seen_turn)
      throw std::invalid_argument(at + " is a system message after the conversation began: system messages come first");
    if (role != "system") seen_turn = true;
  }
  if (messages.back().role != "user")
    throw std::invalid_argument("the last message must be the user's (messages[" + std::to_string(messages.size() - 1) +
                                "] is \"" + messages.back().role + "\")");
}

ChatSegments chat_segments(const Engine& engine, const std::vector<ChatMessage>& messages, bool after_document,
                           size_t from) {
  const Tokenizer& tok = engine.tokenizer();
  const ChatTemplate& tpl = engine.chat_template();
  if (tpl.completion())
    throw std::invalid_argument("this model has no chat template (a base model): use completions, not chat");
  std::vector<ChatMessage> probe = messages;
  for (size_t i = 0; i < probe.size(); ++i) probe[i].content = sentinel(i);
  const std::string rendered = tpl.render(probe, /*add_generation_prompt=*/true);
  ChatSegments s;
  s.first_turn = messages.size();
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role != "system") {
      s.first_turn = i;
      break;
    }
  size_t at = 0;
  bool first_markup = true, after_special = true, document_pending = after_document;
  for (size_t i = 0; i <= messages.size(); ++i) {
    const size_t next = i < messages.size() ? rendered.find(sentinel(i), at) : rendered.size();
    if (next == std::string::npos) throw std::logic_error("chat template dropped message " + std::to_string(i));
    const std::string markup = rendered.substr(at, next - at);
    // The first piece opens the prompt (BOS as the vocabulary asks, unless the template wrote
    // it); the others go on from the text before them.
    const bool wanted = i >= from;  // pieces before `from` are held already: not tokenized
    std::vector<TokenId> m;
    if (wanted) m = first_markup ? tok.encode(markup, false, true) : tok.encode_continuation(markup, true);
    if (first_markup && wanted) {
      const TokenId bos = tok.bos();
      if (tok.add_bos_default() && bos >= 0 && (m.empty() || m.front() != bos)) m.insert(m.begin(), bos);
      after_special = tok.ends_with_special_token(markup);
    } else if (!markup.empty()) {
      after_special = tok.ends_with_special_token(markup);
    }
    first_markup = false;
    s.markup.push_back(std::move(m));
    if (i == messages.size()) break;
    std::string text = tpl.trims_content() ? trimmed(messages[i].content) : messages[i].content;
    if (document_pending && messages[i].role == "user") {
      text = "\n\n" + text;  // the question after the document, as prompt_parts writes it
      after_special = false;
      document_pending = false;
    }
    if (wanted) s.content.push_back(after_special ? tok.encode(text, false, false) : tok.encode_continuation(text, false));
    else s.content.emplace_back();
    if (!text.empty()) after_special = false;
    at = next + sentinel(i).size();
  }
  return s;
}

size_t history_prefix(const std::vector<ChatMessage>& held, const std::vector<ChatMessage>& messages) {
  if (held.empty() || messages.size() <= held.size()) return 0;
  for (size_t i = 0; i < held.size(); ++i)
    if (held[i].role != messages[i].role || trimmed(held[i].content) != trimmed(messages[i].content)) return 0;
  return held.size();
}

size_t Conversation::holds(const std::vector<ChatMessage>& messages) const { return history_prefix(held_, messages); }

namespace {

// What one turn reads: the messages not held yet as units (markup before a content + the
// content), and the final part (the newest user turn and the assistant header).
struct TurnPlan {
  std::vector<std::vector<TokenId>> units;
  std::vector<TokenId> final_markup, final_content, closing;  // markup[n-1], content[n-1], markup[n]
  std::vector<TokenId> catalyst;
  int question_rows = 0;
};

int question_limit(int capacity, int keep) { return std::max(1, std::min(kCatalystQuestionTokens, (capacity - keep) / 4)); }

TurnPlan plan_turn(const Engine& engine, const ChatSegments& segs, size_t from, int keep, int capacity) {
  TurnPlan t;
  const size_t n = segs.content.size();
  for (size_t i = from; i + 1 < n; ++i) {
    std::vector<TokenId> unit = segs.markup[i];
    append(unit, segs.content[i]);
    t.units.push_back(std::move(unit));
  }
  t.final_markup = segs.markup[n - 1];
  t.final_content = segs.content[n - 1];
  t.closing = segs.markup[n];
  // The catalyst: the newest user turn as it will be read (its last content tokens).
  const std::vector<TokenId> opening = user_turn_markup(engine);
  const int fixed = static_cast<int>(opening.size() + t.closing.size());
  int question = std::min<int>(question_limit(capacity, keep), static_cast<int>(t.final_content.size()));
  question = std::max(0, std::min(question, engine.chunk() - fixed));  // one chunk (sliding-window models)
  t.catalyst = opening;
  t.catalyst.insert(t.catalyst.end(), t.final_content.end() - question, t.final_content.end());
  t.question_rows = static_cast<int>(t.catalyst.size());
  append(t.catalyst, t.closing);
  return t;
}

}  // namespace

int catalyst_limit(const Engine& engine, int capacity, int keep) {
  const ChatSegments probe = chat_segments(engine, {{"user", "a"}});
  return static_cast<int>(user_turn_markup(engine).size() + probe.markup.back().size()) + question_limit(capacity, keep);
}

namespace {

// The longest answer after a distillation, room for the next catalyst kept: a turn too long
// to go in whole with it is read through the pot up to its closing markup (the assistant
// header, the same for every turn).
int room_for(const Engine& engine, int capacity, int keep) {
  const ChatSegments probe = chat_segments(engine, {{"user", "a"}});
  const int free_after = capacity - keep - catalyst_limit(engine, capacity, keep);
  return std::max(0, free_after - static_cast<int>(probe.markup.back().size()));
}

}  // namespace

int answer_room(Engine& engine) {
  const MemoryPot* pot = engine.pot();
  return pot ? room_for(engine, pot->options().capacity, pot->options().keep) : 0;
}

PotPlan conversation_plan(const Engine& engine, const PromptParts& prefix, const PotChoice& choice) {
  const PotOptions& p = choice.pot;
  return PotPlan::stream(engine, prefix, choice, p.keep > 0 ? p.capacity - p.keep : p.capacity / 2);
}

void Conversation::begin(Engine& engine, const std::vector<TokenId>& prefix, const std::vector<TokenId>& catalyst,
                         int rows) {
  if (document_) {
    // The document was read after this same prefix: the snapshot's stream must open with it.
    const std::vector<int>& read = document_->tokens;
    if (read.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), read.begin()))
      throw std::invalid_argument("the messages' system prompt is not the one the document was read with: "
                                  "send the same system message (or none, for the default)");
    engine.stream_restore(*document_, catalyst, rows);
    stream_.assign(read.begin(), read.end());
  } else {
    MemoryPot* pot = engine.pot();
    if (!pot) throw std::logic_error("Conversation: the engine has no pot");
    const int pinned = MemoryPot::pinned_of(pot->options(), static_cast<int>(prefix.size()));
    if (pinned >= pot->options().keep)
      throw std::invalid_argument("the system prompt (" + std::to_string(prefix.size()) +
                                  " tokens with the template) leaves the pot no room for the conversation: "
                                  "shorten it, or start the server with a larger pot");
    engine.stream_begin(prefix, catalyst, rows);
    stream_ = prefix;
  }
  begun_ = true;
  on_stream_ = engine.stream_id();
}

GenerateResult Conversation::reply(Engine& engine, const std::vector<ChatMessage>& messages, const GenerateOptions& go) {
  check_chat_messages(messages);
  MemoryPot* pot = engine.pot();
  if (!pot) throw std::logic_error("Conversation::reply: the engine has no pot");
  const size_t held = holds(messages);
  if (begun_ && held == 0) throw std::logic_error("Conversation::reply: these messages are not this conversation's");
  ChatSegments segs = chat_segments(engine, messages, document_ != nullptr, begun_ ? held : 0);
  std::vector<TokenId> prefix;  // a new conversation's pinned prefix, its last markup included
  if (!begun_) {
    prefix = segs.prefix();
    segs.markup[segs.first_turn].clear();
  }
  const int capacity = pot->options().capacity, keep = pot->options().keep;
  TurnPlan t = plan_turn(engine, segs, begun_ ? held : segs.first_turn, keep, capacity);
  if (go.n_predict < 1) throw SettingError("n_predict", std::to_string(go.n_predict), ">= 1", "{n_predict} must be at least 1");
  const int room = room_for(engine, capacity, keep);
  const int spare = catalyst_limit(engine, capacity, keep);
  if (go.n_predict > room)
    throw SettingError("n_predict", std::to_string(go.n_predict), "<= " + std::to_string(room), "{n_predict} " + std::to_string(go.n_predict) + " does not fit: after a distillation the pot (" +
                                std::to_string(capacity) + " entries, " + std::to_string(keep) +
                                " kept) has room for the newest turn and at most " + std::to_string(room) +
                                " answer tokens; ask for fewer");

  // Onto the device: begun here, restored from its parked state, or still there.
  if (!begun_) {
    begin(engine, prefix, t.catalyst, t.question_rows);
  } else if (!active(engine)) {
    if (!parked_) throw std::logic_error("Conversation::reply: neither on the device nor parked");
    engine.stream_restore(*parked_, t.catalyst, t.question_rows);
    on_stream_ = engine.stream_id();
  } else {
    engine.stream_catalyst(t.catalyst, t.question_rows);
  }
  parked_.reset();

  // Earlier messages, each after a distillation if it would not fit whole beside the catalyst.
  // The reply tokens the pot has not read yet open the first unit.
  if (!unread_.empty()) {
    if (t.units.empty()) t.units.emplace_back();
    t.units.front().insert(t.units.front().begin(), unread_.begin(), unread_.end());
  }
  auto read = [&](const std::vector<TokenId>& part) {
    if (part.empty()) return;
    engine.stream_make_room(static_cast<int>(part.size()));
    engine.stream_read(part);
    append(stream_, part);
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::vector<TokenId>& unit : t.units) read(unit);
  unread_.clear();

  // The newest turn whole when it fits with the answer; else its text through the pot and
  // the closing markup whole.
  std::vector<TokenId> final_part = t.final_markup;
  append(final_part, t.final_content);
  append(final_part, t.closing);
  const int free_after = capacity - keep - spare;
  if (static_cast<int>(final_part.size()) + go.n_predict > free_after) {
    read(t.final_markup);
    read(t.final_content);
    final_part = t.closing;
  }
  const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  GenerateResult r = engine.stream_answer(final_part, go, spare);
  r.prefill_s += read_s;  // the earlier messages' share of reading the prompt
  r.ttft_s += read_s;
  append(stream_, final_part);
  r.prompt_tokens = static_cast<int>(stream_.size());  // the whole conversation, as if read afresh
  stream_.insert(stream_.end(), r.tokens.begin(), r.tokens.begin() + r.evaluated);
  unread_.assign(r.tokens.begin() + r.evaluated, r.tokens.end());
  held_ = messages;
  held_.push_back({"assistant", r.text});
  ++turns_;
  distillations_ = pot->stats().cycles;
  return r;
}

PotSnapshot read_document(Engine& engine, const std::vector<TokenId>& catalyst, int question_rows,
                          const std::string& system, const std::string& text, int* document_tokens,
                          const std::function<bool()>& cancelled) {
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", text});
  const ChatSegments segs = chat_segments(engine, messages);
  std::vector<TokenId> stream = segs.prefix();
  const std::vector<TokenId>& body = segs.content[segs.first_turn];
  if (body.empty()) throw std::invalid_argument("the document is empty");
  if (document_tokens) *document_tokens = static_cast<int>(body.size());
  engine.stream_begin(stream, catalyst, question_rows);
  // A chunk at a time, as the engine reads anyway (the pot sees the same calls either way).
  const size_t step = static_cast<size_t>(std::max(1, engine.chunk()));
  for (size_t i = 0; i < body.size(); i += step) {
    if (cancelled && cancelled())
      throw ReadCancelled("the reading was cancelled after " + std::to_string(i) + " of " +
                          std::to_string(body.size()) + " tokens");
    engine.stream_read(std::vector<TokenId>(body.begin() + i, body.begin() + std::min(body.size(), i + step)));
  }
  engine.stream_flush();
  // Room for any question's catalyst beside what it keeps (a distillation now if need be).
  const PotOptions& pot = engine.pot()->options();
  engine.stream_make_room(catalyst_limit(engine, pot.capacity, pot.keep));
  append(stream, body);
  return engine.stream_capture(stream);
}

void Conversation::set_reply_text(const std::string& text) {
  if (held_.empty() || held_.back().role != "assistant") throw std::logic_error("set_reply_text before a reply");
  held_.back().content = text;
}

void Conversation::park(Engine& engine) {
  if (!active(engine)) throw std::logic_error("Conversation::park: not on the device");
  parked_ = std::make_shared<PotSnapshot>(engine.stream_capture(stream_));
  on_stream_ = 0;
}

Conversation Conversation::fork(Engine& engine) const {
  Conversation copy = *this;
  if (active(engine)) copy.parked_ = std::make_shared<PotSnapshot>(engine.stream_capture(stream_));
  copy.on_stream_ = 0;
  return copy;
}

void Conversation::adopt(std::shared_ptr<PotSnapshot> state, std::vector<ChatMessage> held, std::vector<TokenId> unread) {
  parked_ = std::move(state);
  stream_.assign(parked_->tokens.begin(), parked_->tokens.end());
  held_ = std::move(held);
  unread_ = std::move(unread);
  begun_ = true;
  on_stream_ = 0;
  distillations_ = parked_->cycles;
}

}  // namespace infinipot
