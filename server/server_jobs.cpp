// The jobs the device's worker runs: a chat turn through a conversation's pot, a completion
// through a fresh pot, a document read into a pot kept for its questions.
#include <chrono>

#include "engine/conversation.h"
#include "model_loader/chat_template.h"
#include "runtime/cl_error.h"
#include "runtime/device_memory.h"
#include "server/server_impl.h"
#include "server/stop_text.h"

namespace infinipot::server {

using nlohmann::json;

namespace {

// Runs a job's body; every error ends the request with its status and OpenAI's error shape.
template <typename F>
void guarded(const ServerOptions& opt, Metrics& metrics, Channel& ch, F&& body) {
  auto fail = [&](const ApiError& e) {
    if (e.status == 499) metrics.cancelled();
    ch.send({Event::Failed, "", e.body(), e.status});
  };
  try {
    body();
  } catch (const ApiError& e) {
    fail(e);
  } catch (const ReadCancelled& e) {
    fail(ApiError(499, "invalid_request_error", "client_closed", std::string("the client went away: ") + e.what()));
  } catch (const SettingError& e) {
    fail(bad_request(words(opt, e.what()), request_field(e.setting())));
  } catch (const std::invalid_argument& e) {
    fail(bad_request(words(opt, e.what())));
  } catch (const ChatTemplateError& e) {
    fail(bad_request(words(opt, e.what())));
  } catch (const cl::BudgetError& e) {
    fail(ApiError(503, "server_error", "device_memory", words(opt, std::string("the device's memory cannot hold this: ") + e.what())));
  } catch (const std::exception& e) {
    fail(ApiError(500, "server_error", "internal_error", words(opt, e.what())));
  }
}

GenerateOptions generation(const AnswerJob& job, StopText& stop) {
  GenerateOptions go;
  go.n_predict = job.max_tokens;
  go.sampler = job.sampling.sampler;
  const std::shared_ptr<Channel> ch = job.channel;
  const bool stream = job.stream;
  go.on_text = [ch, stream, &stop](const std::string& piece) {
    const std::string shown = stop.add(piece);
    if (stream && !shown.empty()) ch->send({Event::Piece, shown});
  };
  go.cancelled = [ch, &stop] { return ch->cancelled() || stop.stopped(); };
  return go;
}

std::string finish_reason(const GenerateResult& r, const StopText& stop) {
  if (stop.stopped() || r.stop_reason == "eos") return "stop";
  if (r.stop_reason == "length") return "length";
  return "stop";  // cancelled: the client is gone and reads nothing
}

// The text as a client reads it from our JSON (invalid UTF-8 replaced as dump() replaces it):
// what its next request's history will hold.
std::string as_client_sees(const std::string& text) {
  return json::parse(dump(json(text))).get<std::string>();
}

json usage(int prompt_tokens, int completion_tokens, int cached) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

}  // namespace

void Server::Impl::run_chat(const AnswerJob& job, const ChatRequest& r, std::shared_ptr<Document> doc) {
  Channel& ch = *job.channel;
  guarded(opt, metrics, ch, [&] {
    if (ch.cancelled()) throw ApiError(499, "invalid_request_error", "client_closed", "the client went away");
    ConversationPool::Match m = pool.find(r.messages, r.document, doc ? doc->pot : nullptr);
    if (!m.conversation->active(engine)) pool.park_active();
    const int cached = m.held ? static_cast<int>(m.conversation->tokens_read()) : doc ? doc->pot->stream_pos : 0;
    const int cycles_before = m.conversation->distillations();
    StopText stop(job.sampling.stop);
    GenerateResult g;
    try {
      g = m.conversation->reply(engine, r.messages, generation(job, stop));
    } catch (...) {
      pool.forget(m.conversation);  // its pot may be half read: never answer from it again
      throw;
    }
    const std::string tail = stop.flush();
    if (job.stream && !tail.empty()) ch.send({Event::Piece, tail});
    if (ch.cancelled()) metrics.cancelled();
    const std::string content = as_client_sees(stop.shown());
    m.conversation->set_reply_text(content);
    pool.touched(m.conversation);
    const int distilled = m.conversation->distillations() - cycles_before;
    metrics.job(g.prompt_tokens - cached, static_cast<long long>(g.tokens.size()), g.prefill_s, g.decode_s, distilled);
    metrics.memory(engine.memory_report());
    json body = {{"id", job.id},
                 {"object", "chat.completion"},
                 {"created", job.created},
                 {"model", opt.model_id},
                 {"choices", json::array({{{"index", 0},
                                           {"message", {{"role", "assistant"}, {"content", content}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", finish_reason(g, stop)}}})},
                 {"usage", usage(g.prompt_tokens, static_cast<int>(g.tokens.size()), cached)},
                 {"infinipot",
                  {{"conversation", m.held ? "held" : "new"},
                   {"held_messages", m.held},
                   {"distillations", distilled},
                   {"pot_distillations", m.conversation->distillations()},
                   {"ttft_s", g.ttft_s},
                   {"prefill_s", g.prefill_s},
                   {"decode_s", g.decode_s}}}};
    ch.send({Event::Done, "", std::move(body)});
  });
}

void Server::Impl::run_completion(const AnswerJob& job, const CompletionRequest& r) {
  Channel& ch = *job.channel;
  guarded(opt, metrics, ch, [&] {
    if (ch.cancelled()) throw ApiError(499, "invalid_request_error", "client_closed", "the client went away");
    pool.park_active();
    // The prompt as it is (no chat template), read through a fresh pot; its last token opens
    // the answer (appended whole after at most one distillation).
    const PromptParts parts = engine.prompt_parts("", r.prompt, "", /*raw=*/true);
    if (parts.body.empty()) throw bad_request("'prompt' has no tokens", "prompt");
    int rows = 0;
    std::vector<TokenId> catalyst;
    if (!plan.catalyst().empty()) catalyst = engine.catalyst_prompt(parts, kGeneralCatalyst, &rows);
    engine.stream_begin(parts.prefix, catalyst, rows);
    const int cycles_before = engine.pot()->stats().cycles;
    const auto t0 = std::chrono::steady_clock::now();
    engine.stream_read(std::vector<TokenId>(parts.body.begin(), parts.body.end() - 1));
    const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    StopText stop(job.sampling.stop);
    GenerateResult g = engine.stream_answer({parts.body.back()}, generation(job, stop));
    g.prefill_s += read_s;
    const std::string tail = stop.flush();
    if (job.stream && !tail.empty()) ch.send({Event::Piece, tail});
    if (ch.cancelled()) metrics.cancelled();
    const int distilled = engine.pot()->stats().cycles - cycles_before;
    metrics.job(g.prompt_tokens, static_cast<long long>(g.tokens.size()), g.prefill_s, g.decode_s, distilled);
    metrics.memory(engine.memory_report());
    json body = {{"id", job.id},
                 {"object", "text_completion"},
                 {"created", job.created},
                 {"model", opt.model_id},
                 {"choices", json::array({{{"index", 0},
                                           {"text", stop.shown()},
                                           {"logprobs", nullptr},
                                           {"finish_reason", finish_reason(g, stop)}}})},
                 {"usage", usage(g.prompt_tokens, static_cast<int>(g.tokens.size()), 0)},
                 {"infinipot", {{"distillations", distilled}, {"ttft_s", g.ttft_s}}}};
    ch.send({Event::Done, "", std::move(body)});
  });
}

void Server::Impl::run_document(const std::shared_ptr<Channel>& ch, const DocumentRequest& d) {
  guarded(opt, metrics, *ch, [&] {
    if (ch->cancelled()) throw ApiError(499, "invalid_request_error", "client_closed", "the client went away");
    pool.park_active();
    const auto t0 = std::chrono::steady_clock::now();
    int doc_tokens = 0;
    auto doc = std::make_shared<Document>();
    doc->pot = std::make_shared<PotSnapshot>(
        read_document(engine, plan.catalyst(), plan.question_rows(), d.system, d.text, &doc_tokens,
                      [&ch] { return ch->cancelled(); }));
    const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    doc->id = "doc-" + std::to_string(next_id++);
    doc->tokens = doc_tokens;
    doc->distillations = doc->pot->cycles;
    doc->created = unix_now();
    metrics.job(doc_tokens, 0, read_s, 0, doc->distillations);
    metrics.memory(engine.memory_report());
    {
      std::lock_guard<std::mutex> lock(documents_m);
      if (static_cast<int>(documents.size()) >= opt.documents)
        throw ApiError(429, "rate_limit_exceeded", "too_many_documents",
                       "the server holds " + std::to_string(opt.documents) + " documents: DELETE /v1/documents/ID one first");
      documents[doc->id] = doc;
    }
    json body = {{"id", doc->id},       {"object", "document"},
                 {"tokens", doc->tokens}, {"distillations", doc->distillations},
                 {"created", doc->created}, {"read_s", read_s}};
    ch->send({Event::Done, "", std::move(body)});
  });
}

}  // namespace infinipot::server
