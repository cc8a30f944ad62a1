// The HTTP side of `infinipot serve`: routes, checks, and answers (JSON or server-sent events).
#include "server/server.h"

#include <chrono>
#include <stdexcept>

#include "engine/conversation.h"
#include "server/client_socket.h"
#include "server/server_impl.h"

namespace infinipot::server {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

long long unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, e.body()); }

// Waits for a job's last event (Done or Failed: every job sends one) and answers with it. A
// client gone meanwhile, in the queue or mid-job, cancels the job, which then ends soon.
void answer_when_done(Channel& ch, const httplib::Request& req, httplib::Response& res) {
  const ClientSocket client(req.remote_addr, req.remote_port, req.local_port);
  for (;;) {
    std::optional<Event> e = ch.next(200);
    if (!e) {
      if (!ch.cancelled() && client.gone()) ch.cancel();
      continue;
    }
    if (e->kind == Event::Piece) continue;
    send_json(res, e->kind == Event::Done ? 200 : e->status, e->result);
    return;
  }
}

// The endpoint a path counts under in /metrics.
std::string endpoint_of(const std::string& path) {
  for (const char* known : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/documents", "/health", "/metrics"})
    if (path.rfind(known, 0) == 0) return known;
  return "other";
}

// PotPlan::stream refuses a policy that must see the whole input first.
PotPlan server_plan(Engine& engine, const ServerOptions& o) {
  const bool raw = engine.chat_template().completion();
  return conversation_plan(engine, engine.prompt_parts("", "", "", raw), o.pot);
}

Engine& prepared(Engine& engine, const PotPlan& plan) {
  engine.prepare(plan);
  return engine;
}

}  // namespace

Server::Impl::Impl(Engine& e, ServerOptions o)
    : engine(e),
      opt(std::move(o)),
      plan(server_plan(e, opt)),
      pool(prepared(e, plan), opt.pool),
      started(unix_now()),
      queue(opt.queue) {
  const PotOptions& pot = *plan.pot();
  // The rooms the worker holds answers to, so that a request is refused here, before queuing.
  if (!engine.chat_template().completion()) chat_room = answer_room(engine);
  completion_room = std::max(0, pot.capacity - pot.keep - 1);
  routes();
}

void Server::Impl::check_model(const std::string& model) const {
  if (model != opt.model_id)
    throw ApiError(404, "invalid_request_error", "model_not_found",
                   "The model '" + model + "' does not exist: this server serves '" + opt.model_id + "'", "model");
}

std::string words(const ServerOptions& opt, const std::string& message) {
  SettingNames names = opt.setting_names;
  names["n_predict"] = "max_tokens";
  names["temp"] = "temperature";
  names["top_p"] = "top_p";
  names["system"] = "the system message";
  return worded(message, names);
}

std::string request_field(const std::string& setting) {
  if (setting == "n_predict") return "max_tokens";
  if (setting == "temp") return "temperature";
  if (setting == "top_p") return "top_p";
  if (setting == "system") return "messages";
  return "";  // one of the server's own settings, not the request's
}

int Server::Impl::answer_tokens(const Sampling& s, int room) const {
  if (room < 1) throw bad_request(words("the pot leaves no room for an answer: start the server with a larger {pot}"), "max_tokens");
  if (s.max_tokens == 0) return std::min({opt.default_max_tokens, opt.max_tokens, room});
  if (s.max_tokens > opt.max_tokens)
    throw bad_request("max_tokens " + std::to_string(s.max_tokens) + " is above this server's limit of " +
                          std::to_string(opt.max_tokens),
                      "max_tokens", "max_tokens_exceeded");
  if (s.max_tokens > room)
    throw bad_request("max_tokens " + std::to_string(s.max_tokens) + " does not fit: after a distillation the pot has room for " +
                          std::to_string(room) + " answer tokens beside the newest turn; ask for at most " + std::to_string(room),
                      "max_tokens", "context_length_exceeded");
  return s.max_tokens;
}

std::shared_ptr<Document> Server::Impl::document(const std::string& id) {
  std::lock_guard<std::mutex> lock(documents_m);
  auto it = documents.find(id);
  if (it == documents.end())
    throw ApiError(404, "invalid_request_error", "document_not_found", "no document '" + id + "': POST /v1/documents first",
                   "document");
  return it->second;
}

void Server::Impl::submit(std::function<void()> job) {
  if (!queue.submit(std::move(job)))
    throw ApiError(503, "server_error", "queue_full",
                   "the server is busy: " + std::to_string(opt.queue) + " requests wait for the device already; retry later");
}

Metrics::Gauges Server::Impl::gauges() {
  Metrics::Gauges g;
  g.queue_depth = queue.waiting();
  g.busy = queue.busy();
  g.conversations_in_memory = pool.in_memory();
  g.conversations_on_disk = pool.on_disk();
  std::lock_guard<std::mutex> lock(documents_m);
  g.documents = static_cast<int>(documents.size());
  return g;
}

AnswerJob Server::Impl::new_job(const Sampling& s, long long prompt_tokens, const std::string& field, int room,
                                const std::string& id_prefix) {
  if (prompt_tokens > opt.max_prompt_tokens)
    throw bad_request("'" + field + "' holds " + std::to_string(prompt_tokens) + " tokens, above this server's limit of " +
                          std::to_string(opt.max_prompt_tokens),
                      field, "context_length_exceeded");
  AnswerJob job;
  job.max_tokens = answer_tokens(s, room);
  job.channel = std::make_shared<Channel>();
  job.stream = s.stream;
  job.include_usage = s.include_usage;
  job.sampling = s;
  job.id = id_prefix + std::to_string(next_id++);
  job.created = unix_now();
  return job;
}

void Server::Impl::chat(const httplib::Request& req, httplib::Response& res) {
  ChatRequest r = parse_chat_request(parse_json_body(req.body));
  check_model(r.model);
  if (engine.chat_template().completion())
    throw bad_request("this model has no chat template (a base model): use POST /v1/completions", "messages");
  try {
    check_chat_messages(r.messages);
  } catch (const std::invalid_argument& e) {
    throw bad_request(words(e.what()), "messages");
  }
  long long tokens = 0;  // the contents alone: the template's markup is small beside a limit
  for (const ChatMessage& m : r.messages) tokens += engine.tokenizer().encode(m.content, false, false).size();
  const AnswerJob job = new_job(r.sampling, tokens, "messages", chat_room, "chatcmpl-");
  std::shared_ptr<Document> doc = r.document.empty() ? nullptr : document(r.document);
  submit([this, job, r = std::move(r), doc] { run_chat(job, r, doc); });
  respond(job, req, res, /*chat=*/true);
}

void Server::Impl::completion(const httplib::Request& req, httplib::Response& res) {
  CompletionRequest r = parse_completion_request(parse_json_body(req.body));
  check_model(r.model);
  const long long tokens = static_cast<long long>(engine.tokenizer().encode(r.prompt, false, false).size());
  const AnswerJob job = new_job(r.sampling, tokens, "prompt", completion_room, "cmpl-");
  submit([this, job, r = std::move(r)] { run_completion(job, r); });
  respond(job, req, res, /*chat=*/false);
}

void Server::Impl::respond(const AnswerJob& job, const httplib::Request& req, httplib::Response& res, bool chat) {
  const std::shared_ptr<Channel> ch = job.channel;
  if (!job.stream) return answer_when_done(*ch, req, res);
  const std::string id = job.id, model = opt.model_id;
  const long long created = job.created;
  const bool include_usage = job.include_usage;
  auto chunk = [=](const json& choice) {
    return json{{"id", id},
                {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", json::array({choice})}};
  };
  auto delta = [=](const std::string& text) {
    return chat ? json{{"index", 0}, {"delta", {{"content", text}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}}
                : json{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) {
          const std::string line = "data: " + data + "\n\n";
          if (!sink.write(line.data(), line.size())) {
            ch->cancel();
            return false;
          }
          return true;
        };
        if (chat) {
          json first = chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                              {"finish_reason", nullptr}});
          if (!send(dump(first))) return false;
        }
        for (;;) {
          std::optional<Event> e = ch->next(500);
          if (!e) {  // a comment line: clients skip it; a client gone makes the write fail
            static const char ping[] = ": ping\n\n";
            if (!sink.write(ping, sizeof(ping) - 1)) {
              ch->cancel();
              return false;
            }
            continue;
          }
          if (e->kind == Event::Piece) {
            if (!send(dump(chunk(delta(e->text))))) return false;
            continue;
          }
          if (e->kind == Event::Failed) {
            send(dump(e->result));
          } else {
            const json& choice = e->result["choices"][0];
            json last = chat ? json{{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr},
                                    {"finish_reason", choice["finish_reason"]}}
                             : json{{"index", 0}, {"text", ""}, {"logprobs", nullptr}, {"finish_reason", choice["finish_reason"]}};
            if (!send(dump(chunk(last)))) return false;
            if (include_usage) {
              json u = chunk(last);
              u["choices"] = json::array();
              u["usage"] = e->result["usage"];
              if (!send(dump(u))) return false;
            }
          }
          send("[DONE]");
          sink.done();
          return true;
        }
      },
      [ch](bool success) {
        if (!success) ch->cancel();
      });
}

void Server::Impl::post_document(const httplib::Request& req, httplib::Response& res) {
  const DocumentRequest d = parse_document_request(req.body, req.get_header_value("Content-Type"));
  {
    std::lock_guard<std::mutex> lock(documents_m);
    if (static_cast<int>(documents.size()) >= opt.documents)
      throw ApiError(429, "rate_limit_exceeded", "too_many_documents",
                     "the server holds " + std::to_string(opt.documents) + " documents: DELETE /v1/documents/ID one first");
  }
  auto ch = std::make_shared<Channel>();
  submit([this, ch, d] { run_document(ch, d); });
  answer_when_done(*ch, req, res);
}

namespace {
json document_json(const Document& d) {
  return {{"id", d.id}, {"object", "document"}, {"tokens", d.tokens}, {"distillations", d.distillations},
          {"created", d.created}};
}
}  // namespace

void Server::Impl::list_documents(httplib::Response& res) {
  json data = json::array();
  std::lock_guard<std::mutex> lock(documents_m);
  for (const auto& [id, d] : documents) data.push_back(document_json(*d));
  send_json(res, 200, {{"object", "list"}, {"data", data}});
}

void Server::Impl::get_document(const std::string& id, httplib::Response& res) {
  send_json(res, 200, document_json(*document(id)));
}

void Server::Impl::delete_document(const std::string& id, httplib::Response& res) {
  {
    std::lock_guard<std::mutex> lock(documents_m);
    if (!documents.erase(id))
      throw ApiError(404, "invalid_request_error", "document_not_found", "no document '" + id + "'", "document");
  }
  // Its conversations go too (on the worker, which owns them; skipped when the queue is full:
  // they can never match again and age out).
  queue.submit([this, id] { pool.forget_document(id); });
  send_json(res, 200, {{"id", id}, {"object", "document"}, {"deleted", true}});
}

void Server::Impl::models(httplib::Response& res, const std::string& id) {
  const json model = {{"id", opt.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "infinipot"}};
  if (id.empty()) return send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
  check_model(id);
  send_json(res, 200, model);
}

void Server::Impl::routes() {
  // Each handler's ApiError is its answer; anything else escaping is a 500 in the same shape.
  auto handle = [this](auto&& f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        f(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, "server_error", "internal_error", words(e.what())));
      }
    };
  };
  http.Post("/v1/chat/completions", handle([this](const auto& req, auto& res) { chat(req, res); }));
  http.Post("/v1/completions", handle([this](const auto& req, auto& res) { completion(req, res); }));
  http.Get("/v1/models", handle([this](const auto&, auto& res) { models(res, ""); }));
  http.Get(R"(/v1/models/(.+))", handle([this](const auto& req, auto& res) { models(res, req.matches[1]); }));
  http.Post("/v1/documents", handle([this](const auto& req, auto& res) { post_document(req, res); }));
  http.Get("/v1/documents", handle([this](const auto&, auto& res) { list_documents(res); }));
  http.Get(R"(/v1/documents/([^/]+))", handle([this](const auto& req, auto& res) { get_document(req.matches[1], res); }));
  http.Delete(R"(/v1/documents/([^/]+))",
              handle([this](const auto& req, auto& res) { delete_document(req.matches[1], res); }));
  http.Get("/health", handle([this](const auto&, auto& res) {
    send_json(res, 200, {{"status", "ok"}, {"queue_depth", queue.waiting()}, {"busy", queue.busy()}});
  }));
  http.Get("/metrics", handle([this](const auto&, auto& res) {
    res.set_content(metrics.text(gauges()), "text/plain; version=0.0.4");
  }));

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string want = "Bearer " + opt.api_key, got = req.get_header_value("Authorization");
    // Compared in time independent of where they differ.
    unsigned diff = got.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned>(i < got.size() ? got[i] ^ want[i] : 1);
    if (diff == 0) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "invalid_request_error", "invalid_api_key",
                             got.empty() ? "no API key given: send 'Authorization: Bearer KEY'" : "the API key is not valid"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (no route, a body over the limit, a malformed request) get
  // OpenAI's error shape too.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404)
      send_error(res, ApiError(404, "invalid_request_error", "not_found", "no route " + req.method + " " + req.path));
    else if (res.status == 413)
      send_error(res, ApiError(413, "invalid_request_error", "request_too_large",
                               "the request body is larger than this server's limit of " + std::to_string(opt.max_body) + " bytes"));
    else
      send_error(res, ApiError(res.status, "invalid_request_error", "bad_request", "the HTTP request was refused (" +
                                                                                       std::to_string(res.status) + ")"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = words(e.what());
    } catch (...) {
    }
    send_error(res, ApiError(500, "server_error", "internal_error", what));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.request(endpoint_of(req.path), res.status);
  });
  http.set_payload_max_length(opt.max_body);
  http.set_keep_alive_timeout(2);
  http.set_read_timeout(30);
  http.set_write_timeout(30);
  const int threads = opt.threads > 0 ? opt.threads : opt.queue + 8;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
}

Server::Server(Engine& engine, ServerOptions options) : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

Server::~Server() { stop(); }

void Server::bind() {
  const ServerOptions& o = impl_->opt;
  port_ = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port_ < 0) {
    port_ = 0;
    throw std::runtime_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                             " (in use, or not an address of this machine)");
  }
}

void Server::serve() { impl_->http.listen_after_bind(); }

void Server::stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  impl_->http.stop();
  impl_->queue.stop();  // the jobs already queued run to their end; then the worker is gone
  impl_->pool.save_all();  // so the pool is this thread's now
}

}  // namespace infinipot::server
