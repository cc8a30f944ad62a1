// The C API's sessions (include/infinipot.h): a document fed in pieces through the pot, any
// number of asks from it, a conversation after it, forks, snapshots. Sessions of one model
// take turns on its device: the one working holds the device's pot (claim), the others wait
// parked in host memory as pot snapshots. Asks and chats go through engine/conversation.h,
// the path the server and `infinipot chat` take.
#include <chrono>
#include <string>

#include "capi/capi_internal.h"
#include "engine/answer.h"
#include "model_loader/setting_names.h"
#include "pot/policy_registry.h"
#include "pot/pot_snapshot.h"
#include "runtime/device_memory.h"

namespace infinipot::capi {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Engine& engine_of(infinipot_session* s) { return *s->model->engine; }

std::vector<ChatMessage> with_system(const infinipot_session* s, const std::string& user) {
  std::vector<ChatMessage> m;
  if (!s->system.empty()) m.push_back({"system", s->system});
  m.push_back({"user", user});
  return m;
}

// The pinned chat prefix the document is read after (the template up to the first user
// content): the prefix a Conversation over the document checks it against.
std::vector<TokenId> chat_prefix(const infinipot_session* s) {
  return chat_segments(*s->model->engine, with_system(s, "x")).prefix();
}

bool reading_on_device(infinipot_session* s) {
  return s->reading_begun && !s->closed && s->on_stream != 0 && s->on_stream == engine_of(s).stream_id();
}

// The reading on the device as a host snapshot, its held-back token (if any) apart.
std::shared_ptr<const PotSnapshot> capture_reading(infinipot_session* s, TokenId* held) {
  Engine& e = engine_of(s);
  const size_t in_pot = s->stream.size() - (e.stream_holds_token() ? 1 : 0);
  return std::make_shared<PotSnapshot>(
      e.stream_capture(std::vector<TokenId>(s->stream.begin(), s->stream.begin() + in_pot), held));
}

// s leaves the device: what its pot holds goes to host memory.
void park(infinipot_session* s) {
  Engine& e = engine_of(s);
  if (reading_on_device(s)) {
    s->reading = capture_reading(s, &s->reading_held);
    s->on_stream = 0;
  }
  if (s->chat.active(e)) s->chat.park(e);
}

// Makes the device's pot s's: the session holding it parks, and the device is prepared for
// s's plan when it was prepared for another.
void claim(infinipot_session* s) {
  infinipot_model* m = s->model;
  if (m->active && m->active != s) park(m->active);
  m->active = nullptr;  // s holds it only once prepared (a failed create must leave no pointer to s)
  if (s->plan && m->prepared != s->plan_key) {
    m->prepared.clear();  // a failed prepare leaves the device prepared for nothing
    engine_of(s).prepare(*s->plan);
    m->prepared = s->plan_key;
  }
  m->active = s;
}

void report(infinipot_session* s, long long total, int distillations, Clock::time_point t0) {
  if (!s->progress) return;
  infinipot_progress p;
  p.tokens_read = static_cast<long long>(s->stream.size());
  p.tokens_total = total;
  p.distillations = distillations;
  p.elapsed_s = since(t0);
  if (s->progress(&p, s->progress_user) != 0)
    throw Cancelled{"cancelled by the progress callback after " + std::to_string(p.tokens_read) +
                    " tokens: the session holds what it read (infinipot_stats.tokens_read); the rest of the piece "
                    "was dropped"};
}

// Puts s's reading on the device: begun here, restored from host memory, or there already.
void resume_reading(infinipot_session* s) {
  Engine& e = engine_of(s);
  claim(s);
  if (!s->reading_begun) {
    s->stream = chat_prefix(s);
    e.stream_begin(s->stream, s->plan->catalyst(), s->plan->question_rows());
    s->reading_begun = true;
  } else if (!reading_on_device(s)) {
    if (!s->reading) throw std::logic_error("C API: the reading is neither on the device nor parked");
    e.stream_restore(*s->reading, s->plan->catalyst(), s->plan->question_rows(), s->reading_held);
    s->reading.reset();
  }
  s->on_stream = e.stream_id();
}

// Reads tokens through the pot, a chunk at a time, reporting progress after each.
void read_tokens(infinipot_session* s, const std::vector<TokenId>& tokens) {
  if (tokens.empty()) return;
  Engine& e = engine_of(s);
  resume_reading(s);
  const auto t0 = Clock::now();
  const size_t step = static_cast<size_t>(std::max(1, e.chunk()));
  const long long total = static_cast<long long>(s->stream.size() + tokens.size());
  for (size_t i = 0; i < tokens.size(); i += step) {
    const std::vector<TokenId> slice(tokens.begin() + i, tokens.begin() + std::min(tokens.size(), i + step));
    const auto t = Clock::now();
    e.stream_read(slice);
    s->read_s += since(t);
    s->read_tokens += static_cast<long long>(slice.size());
    s->stream.insert(s->stream.end(), slice.begin(), slice.end());
    s->stats.tokens_read = static_cast<long long>(s->stream.size());
    s->stats.distillations = e.pot()->stats().cycles;
    report(s, total, s->stats.distillations, t0);
  }
}

// Reads `segment` (complete words, UTF-8) as the document's next text.
void read_text(infinipot_session* s, const std::string& segment) {
  if (segment.empty()) return;
  const size_t bad = bad_utf8_at(segment);
  require(bad == std::string::npos, "the document is not valid UTF-8 (byte " + std::to_string(bad) + " of the piece)");
  const Tokenizer& tok = engine_of(s).tokenizer();
  // The first piece opens the user's content as the chat template's text would; the others go on from it.
  std::vector<TokenId> tokens;
  if (!s->fed) {
    const ChatSegments segs = chat_segments(engine_of(s), with_system(s, segment));
    tokens = segs.content[segs.first_turn];
  } else {
    tokens = tok.encode_continuation(segment, false);
  }
  s->fed = true;
  read_tokens(s, tokens);
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// Ends the document: the rest of it read, its pot kept as a snapshot (the state every ask
// starts from), room made for any question's catalyst beside what the pot keeps.
void close_document(infinipot_session* s) {
  if (s->closed) return;
  if (s->pot == 0) {
    s->closed = true;
    return;
  }
  Engine& e = engine_of(s);
  read_text(s, s->pending);
  s->pending.clear();
  if (s->fed && s->reading_begun) {
    resume_reading(s);
    e.stream_flush();
    const PotOptions& pot = e.pot()->options();
    e.stream_make_room(catalyst_limit(e, pot.capacity, pot.keep));
    s->document = std::make_shared<PotSnapshot>(e.stream_capture(s->stream));
    s->stats.distillations = e.pot()->stats().cycles;
  }
  s->reading.reset();
  s->on_stream = 0;
  s->closed = true;
  s->chat = Conversation(s->document);
}

GenerateOptions generation(infinipot_session* s, int n_predict, infinipot_piece_callback on_piece, void* user,
                           bool& stop) {
  GenerateOptions go;
  go.n_predict = n_predict;
  go.sampler = s->sampler;
  go.on_text = [on_piece, user, &stop](const std::string& piece) {
    if (on_piece && !stop && on_piece(piece.data(), piece.size(), user) != 0) stop = true;
  };
  go.cancelled = [&stop] { return stop; };
  return go;
}

void record(infinipot_session* s, const GenerateResult& r, int evaluated) {
  Engine& e = engine_of(s);
  s->read_tokens += evaluated;
  s->read_s += r.prefill_s;
  s->stats.prompt_tokens = r.prompt_tokens;
  s->stats.generated_tokens = static_cast<int>(r.tokens.size());
  s->stats.ttft_s = r.ttft_s;
  s->stats.prefill_tok_s = s->read_s > 0 ? s->read_tokens / s->read_s : 0;
  s->stats.decode_tok_s = r.decode_s > 0 && r.tokens.size() > 1 ? (r.tokens.size() - 1) / r.decode_s : 0;
  const nlohmann::json mem = e.memory_report();
  s->stats.peak_device_bytes = static_cast<size_t>(mem.value("peak", uint64_t(0)));
  if (mem.contains("by_category") && mem["by_category"].contains("kv_cache"))
    s->stats.kv_cache_bytes = static_cast<size_t>(mem["by_category"]["kv_cache"].value("peak", uint64_t(0)));
}

void require_usable(const infinipot_session* s, const char* call) {
  require(s != nullptr, std::string(call) + ": session is NULL");
  require(s->broken.empty(), std::string(call) + ": the session's conversation was lost to an earlier error (" +
                                 s->broken + "): free it, or go on from a fork made before");
}

void check_text(const char* text, const char* call, const char* what) {
  require(text != nullptr && *text, std::string(call) + ": " + what + " is NULL or empty");
  require(bad_utf8_at(text) == std::string::npos, std::string(call) + ": " + what + " is not valid UTF-8");
}

// A new session on m with these options (no device work).
std::unique_ptr<infinipot_session> new_session(infinipot_model* m, const infinipot_session_options* o) {
  auto s = std::make_unique<infinipot_session>();
  s->model = m;
  s->policy = default_policy(true);
  s->sampler.temperature = 0;
  s->sampler.top_k = 0;
  s->sampler.top_p = 1;
  if (o) {
    require(o->pot >= 0, "pot", "infinipot_session_options.pot must be >= 0, got " + std::to_string(o->pot));
    require(o->keep >= 0, "keep", "infinipot_session_options.keep must be >= 0, got " + std::to_string(o->keep));
    require(o->reserve >= 0, "reserve", "infinipot_session_options.reserve must be >= 0, got " + std::to_string(o->reserve));
    s->pot = o->pot;
    s->keep = o->keep;
    if (o->policy) s->policy = o->policy;
    if (o->catalyst) s->catalyst = o->catalyst;
    if (o->system) s->system = o->system;
    if (o->reserve > 0) s->reserve = o->reserve;
    require(!o->system || bad_utf8_at(o->system) == std::string::npos, "system", "infinipot_session_options.system is not valid UTF-8");
    require(!o->catalyst || bad_utf8_at(o->catalyst) == std::string::npos, "catalyst",
            "infinipot_session_options.catalyst is not valid UTF-8");
  }
  return s;
}

std::string key_of(const PotPlan& plan) {
  return std::to_string(plan.kv_capacity()) + MemoryPot::settings_json(*plan.pot()).dump();
}

// Hands a session to the caller (the model counts it).
void hand_out(std::unique_ptr<infinipot_session> s, infinipot_session** out) {
  ++s->model->sessions;
  *out = s.release();
}

}  // namespace
}  // namespace infinipot::capi

using namespace infinipot;
using namespace infinipot::capi;

extern "C" {

infinipot_status infinipot_session_create(infinipot_model* model, const infinipot_session_options* options,
                                          infinipot_session** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    require(model != nullptr && out != nullptr, "infinipot_session_create: model or out is NULL");
    require(!model->freed, "infinipot_session_create: the model was freed");
    auto s = new_session(model, options);
    if (s->pot > 0) {
      Engine& e = *model->engine;
      PotChoice choice;
      choice.pot.policy = s->policy;
      choice.pot.capacity = s->pot;
      choice.pot.keep = s->keep;
      choice.catalyst = s->catalyst;
      // The {n_predict} a stream plan names is the room it keeps: the session's reserve.
      try {
        s->plan = std::make_shared<PotPlan>(PotPlan::stream(e, e.prompt_parts(s->system, "", ""), choice, s->reserve));
      } catch (const std::invalid_argument& ex) {
        SettingNames names = c_names();
        names["n_predict"] = "infinipot_session_options.reserve";
        const std::string message = worded(ex.what(), names);
        if (const auto* e = dynamic_cast<const SettingError*>(&ex))
          throw SettingError(e->setting() == "n_predict" ? "reserve" : e->setting(), e->have(), e->need(), message);
        throw std::invalid_argument(message);
      }
      s->plan_key = key_of(*s->plan);
      claim(s.get());  // the device plan checked against the cap now (BudgetError naming the minimum)
    }
    hand_out(std::move(s), out);
  });
}

infinipot_status infinipot_session_feed(infinipot_session* s, const char* text, size_t len) {
  return guarded([&] {
    require_usable(s, "infinipot_session_feed");
    require(text != nullptr || len == 0, "infinipot_session_feed: text is NULL");
    require(!s->closed, "infinipot_session_feed: the document has ended (the session was asked, chatted or saved): "
                        "feed before the first ask, or fork the session before asking");
    if (len == 0) return;
    if (s->pot == 0) {
      s->text.append(text, len);
      return;
    }
    s->pending.append(text, len);
    // Cut at the start of the last whitespace run that follows a word: the tokenizer splits
    // there anyway, so piecewise reading tokenizes as the whole text would.
    size_t cut = std::string::npos;
    for (size_t i = s->pending.size(); i-- > 1;)
      if (is_space(s->pending[i]) && !is_space(s->pending[i - 1])) {
        cut = i;
        break;
      }
    if (cut == std::string::npos) return;
    const std::string segment = s->pending.substr(0, cut);
    s->pending.erase(0, cut);
    read_text(s, segment);
  });
}

infinipot_status infinipot_session_ask(infinipot_session* s, const char* question, int n_predict,
                                       infinipot_piece_callback on_piece, void* user_data) {
  return guarded([&] {
    require_usable(s, "infinipot_session_ask");
    check_text(question, "infinipot_session_ask", "the question");
    require(n_predict >= 1, "n_predict", "infinipot_session_ask: n_predict must be at least 1, got " + std::to_string(n_predict));
    Engine& e = engine_of(s);
    bool stop = false;
    GenerateOptions go = generation(s, n_predict, on_piece, user_data, stop);
    if (s->pot == 0) {
      // The whole text into a full KV cache, as one question.
      require(bad_utf8_at(s->text) == std::string::npos, "the document is not valid UTF-8");
      s->closed = true;
      if (s->model->active) park(s->model->active);
      s->model->active = nullptr;
      s->model->prepared.clear();
      AnswerOptions ao;
      ao.system = s->system;
      ao.n_predict = n_predict;
      ao.sampler = s->sampler;
      ao.pot.policy = default_policy(false);
      ao.on_text = go.on_text;
      ao.cancelled = go.cancelled;
      const auto t0 = Clock::now();
      ao.on_prefill = [&](const PrefillProgress& p) {
        if (!s->progress) return;
        infinipot_progress ip{p.done, p.total, 0, since(t0)};
        if (s->progress(&ip, s->progress_user) != 0)
          throw Cancelled{"cancelled by the progress callback after " + std::to_string(p.done) + " of " +
                          std::to_string(p.total) + " prompt tokens: nothing was answered"};
      };
      const GenerateResult r = answer(e, s->text, question, ao).result;
      record(s, r, r.prompt_tokens);
      s->stats.distillations = 0;
      return;
    }
    close_document(s);
    claim(s);
    if (s->chat.active(e)) s->chat.park(e);
    Conversation one(s->document);  // every ask from the document as read
    const int before = static_cast<int>(s->document ? s->document->tokens.size() : 0);
    const GenerateResult r = one.reply(e, with_system(s, question), go);
    record(s, r, r.prompt_tokens - before);
    s->stats.distillations = one.distillations();
  });
}

infinipot_status infinipot_session_chat(infinipot_session* s, const char* message, int n_predict,
                                        infinipot_piece_callback on_piece, void* user_data) {
  return guarded([&] {
    require_usable(s, "infinipot_session_chat");
    check_text(message, "infinipot_session_chat", "the message");
    require(n_predict >= 1, "n_predict", "infinipot_session_chat: n_predict must be at least 1, got " + std::to_string(n_predict));
    require(s->pot > 0, "pot", "infinipot_session_chat needs a pot: set infinipot_session_options.pot (e.g. 1024)");
    Engine& e = engine_of(s);
    close_document(s);
    claim(s);
    std::vector<ChatMessage> messages = s->chat.turns() > 0 ? s->chat.messages() : with_system(s, message);
    if (s->chat.turns() > 0) messages.push_back({"user", message});
    bool stop = false;
    const size_t before = s->chat.turns() > 0 ? s->chat.tokens_read() : (s->document ? s->document->tokens.size() : 0);
    GenerateResult r;
    try {
      r = s->chat.reply(e, messages, generation(s, n_predict, on_piece, user_data, stop));
    } catch (const std::invalid_argument&) {
      throw;  // refused before the conversation changed (a turn too long for the pot)
    } catch (const std::exception& ex) {
      s->broken = ex.what();
      throw;
    }
    record(s, r, r.prompt_tokens - static_cast<int>(before));
    s->stats.distillations = s->chat.distillations();
    s->stats.turns = s->chat.turns();
    s->stats.tokens_read = static_cast<long long>(s->chat.tokens_read());
  });
}

infinipot_status infinipot_session_set_sampling(infinipot_session* s, const infinipot_sampling* sampling) {
  return guarded([&] {
    require(s != nullptr && sampling != nullptr, "infinipot_session_set_sampling: session or sampling is NULL");
    require(sampling->temperature >= 0 && sampling->temperature < 1e6f, "temp",
            "infinipot_sampling.temperature must be a finite number >= 0 (0: greedy), got " +
                std::to_string(sampling->temperature));
    require(sampling->top_p > 0 && sampling->top_p <= 1, "top_p",
            "infinipot_sampling.top_p must lie in (0, 1] (1: off), got " + std::to_string(sampling->top_p));
    require(sampling->top_k >= 0, "top_k", "infinipot_sampling.top_k must be >= 0 (0: off), got " + std::to_string(sampling->top_k));
    s->sampler.temperature = sampling->temperature;
    s->sampler.top_p = sampling->top_p;
    s->sampler.top_k = sampling->top_k;
    s->sampler.seed = sampling->seed;
  });
}

infinipot_status infinipot_session_set_progress(infinipot_session* s, infinipot_progress_callback callback,
                                                void* user_data) {
  return guarded([&] {
    require(s != nullptr, "infinipot_session_set_progress: session is NULL");
    s->progress = callback;
    s->progress_user = user_data;
  });
}

infinipot_status infinipot_session_fork(infinipot_session* s, infinipot_session** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    require_usable(s, "infinipot_session_fork");
    require(out != nullptr, "infinipot_session_fork: out is NULL");
    require(s->pot > 0, "infinipot_session_fork needs a pot (infinipot_session_options.pot): without one, create a "
                        "session and feed it the same text");
    Engine& e = engine_of(s);
    auto t = std::make_unique<infinipot_session>(*s);  // settings, figures, document, conversation (fixed below)
    if (!s->closed && reading_on_device(s)) t->reading = capture_reading(s, &t->reading_held);
    t->on_stream = 0;
    t->chat = s->chat.fork(e);
    hand_out(std::move(t), out);
  });
}

infinipot_status infinipot_session_save(infinipot_session* s, const char* path) {
  return guarded([&] {
    require_usable(s, "infinipot_session_save");
    require(path != nullptr && *path, "infinipot_session_save: path is NULL or empty");
    require(s->pot > 0, "infinipot_session_save saves a memory pot: set infinipot_session_options.pot");
    close_document(s);
    require(s->document != nullptr, "infinipot_session_save: no document was fed: nothing to save");
    try {
      write_pot_snapshot(path, *s->document);
    } catch (const std::exception& ex) {
      throw IoError(ex.what());
    }
  });
}

infinipot_status infinipot_session_load(infinipot_model* model, const char* path,
                                        const infinipot_session_options* options, infinipot_session** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    require(model != nullptr && out != nullptr, "infinipot_session_load: model or out is NULL");
    require(!model->freed, "infinipot_session_load: the model was freed");
    require(path != nullptr && *path, "infinipot_session_load: path is NULL or empty");
    auto s = new_session(model, options);
    Engine& e = *model->engine;
    std::shared_ptr<PotSnapshot> snap;
    try {
      snap = std::make_shared<PotSnapshot>(read_pot_snapshot(path));
    } catch (const std::exception& ex) {
      throw IoError(ex.what());
    }
    if (snap->model_id != e.model_id())
      throw std::invalid_argument("infinipot_session_load: '" + std::string(path) + "' was saved with another model (" +
                                  snap->model_id + ", this one is " + e.model_id() + ")");
    PotChoice choice;
    choice.pot = MemoryPot::options_from_settings(snap->settings);
    const std::vector<TokenId> prefix = chat_prefix(s.get());
    if (snap->tokens.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), snap->tokens.begin()))
      throw std::invalid_argument("infinipot_session_load: '" + std::string(path) +
                                  "' was read after another chat prefix: give the {system} it was saved with");
    s->pot = choice.pot.capacity;
    s->keep = choice.pot.keep;
    s->policy = choice.pot.policy;
    s->plan = std::make_shared<PotPlan>(PotPlan::restored(e, e.prompt_parts(s->system, "", ""), "", choice));
    s->plan_key = key_of(*s->plan);
    s->document = snap;
    s->stream = snap->tokens;
    s->fed = s->reading_begun = s->closed = true;
    s->chat = Conversation(s->document);
    s->stats.tokens_read = static_cast<long long>(snap->tokens.size());
    s->stats.distillations = snap->cycles;
    claim(s.get());
    hand_out(std::move(s), out);
  });
}

void infinipot_session_free(infinipot_session* s) {
  if (!s) return;
  infinipot_model* m = s->model;
  if (m) {
    if (m->active == s) m->active = nullptr;
    if (--m->sessions == 0 && m->freed) delete m;
  }
  delete s;
}

}  // extern "C"
