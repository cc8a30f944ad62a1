// The server's state, shared by its HTTP handlers (server.cpp) and the jobs they queue for the
// device (server_jobs.cpp). Handlers check a request fully before queuing it; jobs run on the
// device's worker thread, one at a time, and end every request with one Done or Failed event.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <httplib.h>

#include "server/api_types.h"
#include "server/device_queue.h"
#include "server/metrics.h"
#include "server/server.h"

namespace infinipot::server {

struct Document {
  std::string id;
  std::shared_ptr<const PotSnapshot> pot;  // the stream after the chat prefix and the document
  int tokens = 0;                          // the document's tokens
  int distillations = 0;
  long long created = 0;
};

// What the job of a chat or completion request needs, checked by its handler.
struct AnswerJob {
  std::shared_ptr<Channel> channel;
  bool stream = false, include_usage = false;
  int max_tokens = 0;
  Sampling sampling;
  std::string id;        // "chatcmpl-N" / "cmpl-N"
  long long created = 0;
};

// An error's message in this server's words (its settings, the request's fields).
std::string words(const ServerOptions& opt, const std::string& message);
// The request field (OpenAI's error `param`) a setting id is given by, "" for the server's own.
std::string request_field(const std::string& setting);

struct Server::Impl {
  Impl(Engine& engine, ServerOptions options);

  Engine& engine;
  ServerOptions opt;
  PotPlan plan;
  std::string words(const std::string& message) const { return server::words(opt, message); }
  int chat_room = 0;        // the most answer tokens a chat turn has room for
  int completion_room = 0;  // the same for a completion
  httplib::Server http;
  Metrics metrics;
  ConversationPool pool;    // the worker's only
  std::mutex documents_m;
  std::map<std::string, std::shared_ptr<Document>> documents;
  std::atomic<unsigned long long> next_id{1};
  long long started = 0;
  std::atomic<bool> stopped{false};
  DeviceQueue queue;        // last: its worker stops first

  void routes();
  // Handlers (HTTP threads).
  void chat(const httplib::Request& req, httplib::Response& res);
  void completion(const httplib::Request& req, httplib::Response& res);
  void post_document(const httplib::Request& req, httplib::Response& res);
  void list_documents(httplib::Response& res);
  void get_document(const std::string& id, httplib::Response& res);
  void delete_document(const std::string& id, httplib::Response& res);
  void models(httplib::Response& res, const std::string& id);
  // The job's events as the HTTP answer: one JSON body, or server-sent events while it runs.
  // chunk(text, finish_reason) makes one streamed chunk; the Done event's result is the body.
  void respond(const AnswerJob& job, const httplib::Request& req, httplib::Response& res, bool chat);
  // A checked request's job: its prompt within the limit (400 naming `field`), max_tokens within room.
  AnswerJob new_job(const Sampling& s, long long prompt_tokens, const std::string& field, int room,
                    const std::string& id_prefix);
  void submit(std::function<void()> job);  // ApiError 503 when the queue is full
  int answer_tokens(const Sampling& s, int room) const;  // max_tokens checked, or the default
  void check_model(const std::string& model) const;
  std::shared_ptr<Document> document(const std::string& id);
  Metrics::Gauges gauges();

  // Jobs (the device's worker; server_jobs.cpp).
  void run_chat(const AnswerJob& job, const ChatRequest& r, std::shared_ptr<Document> doc);
  void run_completion(const AnswerJob& job, const CompletionRequest& r);
  void run_document(const std::shared_ptr<Channel>& ch, const DocumentRequest& d);
};

// The JSON of an error event or answer body.
std::string dump(const nlohmann::json& j);
long long unix_now();

}  // namespace infinipot::server
