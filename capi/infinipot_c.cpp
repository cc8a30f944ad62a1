// The C API (include/infinipot.h) over the engine: handles own an Engine and a session's
// state; every entry point catches everything and maps it to a status + message.
#include "infinipot.h"

#include <chrono>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "engine/answer.h"
#include "model_loader/gguf.h"
#include "pot/policy_registry.h"
#include "runtime/cl_error.h"
#include "runtime/device_memory.h"

struct infinipot_model {
  std::unique_ptr<infinipot::Engine> engine;
  bool in_session = false;
};

struct infinipot_session {
  infinipot_model* model = nullptr;
  int pot = 0, keep = 0, reserve = 128;
  std::string policy = infinipot::default_policy(true), catalyst, system;
  std::string pending;  // fed bytes not yet read (the pot reads complete words only)
  std::string text;     // without a pot: the whole document, read by ask()
  bool asked = false;
  double read_s = 0;    // time spent reading fed pieces through the pot
  infinipot_stats stats{};
};

namespace {

thread_local std::string g_error;

struct StopRequested {};

template <typename F>
infinipot_status guarded(F&& f) {
  try {
    f();
    g_error.clear();
    return INFINIPOT_OK;
  } catch (const infinipot::cl::BudgetError& e) {
    g_error = e.what();
    return INFINIPOT_ERR_BUDGET;
  } catch (const infinipot::gguf::GgufError& e) {
    g_error = e.what();
    return INFINIPOT_ERR_MODEL;
  } catch (const infinipot::cl::ClError& e) {
    g_error = e.what();
    return INFINIPOT_ERR_DEVICE;
  } catch (const std::invalid_argument& e) {
    g_error = e.what();
    return INFINIPOT_ERR_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    g_error = "out of host memory";
    return INFINIPOT_ERR_INTERNAL;
  } catch (const std::exception& e) {
    g_error = e.what();
    return INFINIPOT_ERR_INTERNAL;
  } catch (...) {
    g_error = "unknown error";
    return INFINIPOT_ERR_INTERNAL;
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

// Offset of the first invalid UTF-8 sequence, or npos.
size_t bad_utf8_at(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    i += n;
  }
  return std::string::npos;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// Reads `segment` (complete words) through the session's pot.
void read_segment(infinipot_session* s, const std::string& segment) {
  if (segment.empty()) return;
  const size_t bad = bad_utf8_at(segment);
  require(bad == std::string::npos, "the document is not valid UTF-8 (byte " + std::to_string(bad) + " of the piece)");
  infinipot::Engine& e = *s->model->engine;
  const auto t0 = std::chrono::steady_clock::now();
  e.stream_read(e.tokenizer().encode(segment, false, false));
  s->read_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

extern "C" {

const char* infinipot_last_error(void) { return g_error.c_str(); }

const char* infinipot_status_name(infinipot_status status) {
  switch (status) {
    case INFINIPOT_OK: return "INFINIPOT_OK";
    case INFINIPOT_ERR_INVALID_ARGUMENT: return "INFINIPOT_ERR_INVALID_ARGUMENT";
    case INFINIPOT_ERR_MODEL: return "INFINIPOT_ERR_MODEL";
    case INFINIPOT_ERR_BUDGET: return "INFINIPOT_ERR_BUDGET";
    case INFINIPOT_ERR_DEVICE: return "INFINIPOT_ERR_DEVICE";
    case INFINIPOT_ERR_IO: return "INFINIPOT_ERR_IO";
    case INFINIPOT_ERR_INTERNAL: return "INFINIPOT_ERR_INTERNAL";
  }
  return "INFINIPOT_ERR_UNKNOWN";
}

void infinipot_model_options_init(infinipot_model_options* o) {
  if (!o) return;
  o->device = nullptr;
  o->device_mem = 0;
  o->kv_type = nullptr;
}

infinipot_status infinipot_model_open(const char* path, const infinipot_model_options* options,
                                      infinipot_model** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    require(path && *path, "infinipot_model_open: path is NULL or empty");
    require(out != nullptr, "infinipot_model_open: out is NULL");
    infinipot::EngineOptions eo;
    eo.model_path = path;
    if (options) {
      if (options->device) eo.device = options->device;
      eo.device_mem = options->device_mem;
      if (options->kv_type) eo.kv_type = options->kv_type;
    }
    require(eo.kv_type == "auto" || eo.kv_type == "f16" || eo.kv_type == "f32",
            "kv_type must be \"auto\", \"f16\" or \"f32\", got \"" + eo.kv_type + "\"");
    auto m = std::make_unique<infinipot_model>();
    m->engine = std::make_unique<infinipot::Engine>(eo);
    *out = m.release();
  });
}

void infinipot_model_free(infinipot_model* model) { delete model; }

void infinipot_session_options_init(infinipot_session_options* o) {
  if (!o) return;
  o->pot = 0;
  o->keep = 0;
  o->policy = nullptr;
  o->catalyst = nullptr;
  o->system = nullptr;
  o->reserve = 0;
}

infinipot_status infinipot_session_create(infinipot_model* model, const infinipot_session_options* options,
                                          infinipot_session** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    require(model != nullptr && out != nullptr, "infinipot_session_create: model or out is NULL");
    require(!model->in_session, "this model already has a session: free it first (a session holds the device's KV store)");
    auto s = std::make_unique<infinipot_session>();
    s->model = model;
    if (options) {
      require(options->pot >= 0 && options->keep >= 0 && options->reserve >= 0, "pot, keep and reserve must be >= 0");
      s->pot = options->pot;
      s->keep = options->keep;
      if (options->policy) s->policy = options->policy;
      if (options->catalyst) s->catalyst = options->catalyst;
      if (options->system) s->system = options->system;
      if (options->reserve > 0) s->reserve = options->reserve;
    }
    if (s->pot > 0) {
      infinipot::Engine& e = *model->engine;
      infinipot::PotChoice choice;
      choice.pot.policy = s->policy;
      choice.pot.capacity = s->pot;
      choice.pot.keep = s->keep;
      choice.catalyst = s->catalyst;
      const infinipot::PromptParts parts = e.prompt_parts(s->system, "", "");
      const infinipot::PotPlan plan = infinipot::PotPlan::stream(e, parts, choice, s->reserve);
      e.prepare(plan);
      e.stream_begin(parts.prefix, plan.catalyst(), plan.question_rows());
    }
    model->in_session = true;
    *out = s.release();
  });
}

infinipot_status infinipot_session_feed(infinipot_session* s, const char* text, size_t len) {
  return guarded([&] {
    require(s != nullptr, "infinipot_session_feed: session is NULL");
    require(text != nullptr || len == 0, "infinipot_session_feed: text is NULL");
    require(!s->asked, "the session has answered its question: create a new one");
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
    read_segment(s, segment);
  });
}

infinipot_status infinipot_session_ask(infinipot_session* s, const char* question, int n_predict,
                                       infinipot_piece_callback on_piece, void* user_data) {
  return guarded([&] {
    require(s != nullptr, "infinipot_session_ask: session is NULL");
    require(question != nullptr && *question, "infinipot_session_ask: the question is NULL or empty");
    require(n_predict >= 1, "infinipot_session_ask: n_predict must be at least 1");
    require(!s->asked, "the session has answered its question: create a new one");
    require(bad_utf8_at(question) == std::string::npos, "the question is not valid UTF-8");
    s->asked = true;
    infinipot::Engine& e = *s->model->engine;
    int pieces = 0;
    infinipot::GenerateOptions go;
    go.n_predict = n_predict;
    go.on_text = [&](const std::string& piece) {
      ++pieces;
      if (on_piece && on_piece(piece.data(), piece.size(), user_data) != 0) throw StopRequested{};
    };
    infinipot::GenerateResult r;
    int cycles = 0;
    try {
      if (s->pot > 0) {
        read_segment(s, s->pending);
        s->pending.clear();
        const infinipot::PromptParts parts = e.prompt_parts(s->system, "", question);
        std::vector<infinipot::TokenId> final_part = parts.question;
        final_part.insert(final_part.end(), parts.tail.begin(), parts.tail.end());
        r = e.stream_answer(final_part, go);
        cycles = e.pot()->stats().cycles;
      } else {
        require(bad_utf8_at(s->text) == std::string::npos, "the document is not valid UTF-8");
        infinipot::AnswerOptions ao;
        ao.system = s->system;
        ao.n_predict = n_predict;
        ao.pot.policy = infinipot::default_policy(false);
        ao.on_text = go.on_text;
        r = infinipot::answer(e, s->text, question, ao).result;
      }
    } catch (const StopRequested&) {
      r.tokens.resize(static_cast<size_t>(pieces));
    }
    const nlohmann::json mem = e.memory_report();
    s->stats.prompt_tokens = r.prompt_tokens;
    s->stats.generated_tokens = static_cast<int>(r.tokens.size());
    s->stats.distillations = cycles;
    s->stats.ttft_s = r.ttft_s;
    const double prefill_s = r.prefill_s + s->read_s;  // with a pot, most of it happened in feed()
    s->stats.prefill_tok_s = prefill_s > 0 ? r.prompt_tokens / prefill_s : 0;
    s->stats.decode_tok_s = r.decode_s > 0 && r.tokens.size() > 1 ? (r.tokens.size() - 1) / r.decode_s : 0;
    s->stats.peak_device_bytes = static_cast<size_t>(mem.value("peak", uint64_t(0)));
    if (mem.contains("by_category") && mem["by_category"].contains("kv_cache"))
      s->stats.kv_cache_bytes = static_cast<size_t>(mem["by_category"]["kv_cache"].value("peak", uint64_t(0)));
  });
}

infinipot_status infinipot_session_stats(const infinipot_session* s, infinipot_stats* out) {
  return guarded([&] {
    require(s != nullptr && out != nullptr, "infinipot_session_stats: session or out is NULL");
    *out = s->stats;
  });
}

void infinipot_session_free(infinipot_session* s) {
  if (!s) return;
  if (s->model) s->model->in_session = false;
  delete s;
}

}  // extern "C"
