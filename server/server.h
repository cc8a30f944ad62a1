// `infinipot serve`: an OpenAI-compatible HTTP server (cpp-httplib) over one engine and one
// device. Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/ID],
// POST|GET /v1/documents, GET|DELETE /v1/documents/ID, GET /health, GET /metrics (docs/serve.md).
// Requests are checked on the HTTP threads, then run one at a time on the device's worker
// (server/device_queue.h); conversations live in the memory pot (server/conversation_pool.h).
#pragma once
#include "model_loader/setting_names.h"
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/pot_plan.h"
#include "server/conversation_pool.h"

namespace infinipot::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  int port = 8080;                 // 0: any free port (port() tells which)
  std::string api_key;             // "": no key; else every request needs "Authorization: Bearer KEY"
  std::string model_id;            // the name /v1/models lists and requests must use
  size_t max_body = 16u << 20;     // bytes of a request body (413 beyond)
  int max_prompt_tokens = 131072;  // tokens of a request's messages or prompt (400 beyond)
  int max_tokens = 4096;           // the most max_tokens a request may ask (400 beyond)
  int default_max_tokens = 512;    // when a request gives none (less when the pot has less room)
  int queue = 16;                  // jobs waiting for the device (503 beyond)
  int documents = 16;              // documents held (429 beyond: delete one)
  PoolOptions pool;
  PotChoice pot;                   // the pot every conversation, document and completion reads through
  int threads = 0;                 // HTTP threads (0: queue + 8)
  // How errors name the settings lower layers name as {id} (model_loader/setting_names.h):
  // the front-end's names for the server's own settings (--pot); a request's fields
  // (max_tokens, temperature, top_p, the system message) are named by the server.
  SettingNames setting_names;
};

class Server {
 public:
  // Prepares the engine's device side (one pot of options.pot) and the routes. Throws
  // std::invalid_argument / cl::BudgetError when the pot cannot be set up.
  Server(Engine& engine, ServerOptions options);
  ~Server();
  // Binds (std::runtime_error naming the address when it cannot), then serves until stop().
  void bind();
  int port() const { return port_; }
  void serve();
  void stop();  // from any thread

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace infinipot::server
