// `infinipot serve`: the OpenAI-compatible server (server/server.h), and `infinipot chat`: a
// conversation in the terminal through the same conversation code (engine/conversation.h).
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <pthread.h>
#include <string>
#include <thread>

#include "engine/conversation.h"
#include "pot/policy_spec.h"
#include "server/server.h"
#include "runtime/device_memory.h"
#include "tools/cli_common.h"

namespace infinipot::cli {

namespace {

struct PotFlags {
  std::string model, device, device_mem, kv_type = "auto", policy = "infinipot";
  int chunk = 0, pot = 1024, keep = 0;
};

void add_pot_flags(CLI::App* sub, PotFlags* o) {
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("--device", o->device, "OpenCL device: index or name substring (default: first GPU, else CPU)");
  sub->add_option("--device-mem", o->device_mem, "Hard cap on device memory, e.g. 256M, 1.5G (default: device's global memory)")
      ->check(byte_size_validator());
  sub->add_option("--kv-type", o->kv_type, "KV store element type: auto (f16 with cl_khr_fp16, else f32), f16, f32")
      ->capture_default_str()->check(CLI::IsMember({"auto", "f16", "f32"}));
  sub->add_option("--chunk", o->chunk, "Prefill chunk in tokens (default: from platforms/)")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--pot", o->pot, "KV entries of the memory pot every conversation reads through")
      ->capture_default_str()->check(CLI::Range(16, 1 << 24));
  add_keep_option(sub, &o->keep, "Entries a distillation keeps (default: half the pot; the other half holds the "
                                 "newest turn and its answer)");
  sub->add_option("--policy", o->policy, "Pot policy, NAME or NAME:key=value:... (`infinipot policies` lists them; "
                                         "one that reads through a pot)")->capture_default_str();
}

PotChoice pot_choice(const PotFlags& o) {
  const PolicySpec spec = parse_policy_spec(o.policy, o.pot, o.keep);
  if (!spec.holds_pot())
    throw std::invalid_argument("--policy " + spec.name + " keeps no pot; serve and chat read through one: "
                                "choose a policy such as infinipot (`infinipot policies` lists them)");
  PotChoice c;
  c.pot = spec.options();
  return c;
}

// SIGINT / SIGTERM stop the server cleanly: they are blocked in every thread and one thread
// waits for them (no work in a signal handler).
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

struct ServeFlags {
  PotFlags pot;
  server::ServerOptions s;
  std::string max_body = "16M";
  std::string alias;
};

void run_serve(const ServeFlags& f) {
  sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: they all inherit it
  Engine engine(engine_options(f.pot.model, f.pot.device, f.pot.device_mem, f.pot.chunk, f.pot.kv_type));
  server::ServerOptions o = f.s;
  o.pot = pot_choice(f.pot);
  o.setting_names = setting_names();
  o.max_body = static_cast<size_t>(cl::parse_byte_size(f.max_body));
  o.model_id = !f.alias.empty() ? f.alias : std::filesystem::path(f.pot.model).stem().string();
  server::Server srv(engine, o);
  srv.bind();
  const bool loopback = o.host == "127.0.0.1" || o.host == "localhost" || o.host == "::1";
  if (!loopback && o.api_key.empty())
    std::cerr << "serve: warning: listening on " << o.host << " without --api-key: anyone who can reach it can use it\n";
  std::cerr << "serve: listening on http://" << o.host << ":" << srv.port() << " (model " << o.model_id << ", device "
            << engine.device_name() << ", pot " << o.pot.pot.capacity << " entries, policy " << o.pot.pot.policy << ")"
            << std::endl;
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    std::cerr << "serve: stopping (signal " << sig << ")" << std::endl;
    srv.stop();
  });
  srv.serve();
  // serve() also returns when the listener fails: wake the waiter so it can be joined.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
}

void run_chat(const PotFlags& f, const std::string& system, int n_predict, const SamplerOptions& sampler) {
  Engine engine(engine_options(f.model, f.device, f.device_mem, f.chunk, f.kv_type));
  if (engine.chat_template().completion())
    throw std::invalid_argument("this model has no chat template (a base model): chat needs an instruction-tuned model");
  const PromptParts parts = engine.prompt_parts(system, "", "");
  const PotChoice choice = pot_choice(f);
  engine.prepare(conversation_plan(engine, parts, choice));
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  auto conversation = std::make_unique<Conversation>();
  std::cerr << "chat: pot " << choice.pot.capacity << " entries; /reset starts over, /exit or end of input ends\n";
  std::string line;
  while (std::cerr << "> " << std::flush, std::getline(std::cin, line)) {
    if (line == "/exit") break;
    if (line == "/reset") {
      messages.resize(system.empty() ? 0 : 1);
      conversation = std::make_unique<Conversation>();
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    messages.push_back({"user", line});
    GenerateOptions go;
    go.sampler = sampler;
    go.n_predict = std::min(n_predict, answer_room(engine));
    go.on_text = [](const std::string& piece) { std::cout << piece << std::flush; };
    const GenerateResult r = conversation->reply(engine, messages, go);
    std::cout << "\n";
    std::cerr << "[" << r.tokens.size() << " tokens, " << conversation->tokens_read() << " read in all, "
              << conversation->distillations() << " distillations]\n";
    messages.push_back({"assistant", r.text});
  }
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server: chat, completions and documents through the memory pot");
  add_pot_flags(sub, &f->pot);
  sub->add_option("--host", f->s.host, "Address to listen on (loopback unless told otherwise)")->capture_default_str();
  sub->add_option("--port", f->s.port, "Port (0: any free one, printed at start)")->capture_default_str()->check(CLI::Range(0, 65535));
  sub->add_option("--api-key", f->s.api_key, "Require 'Authorization: Bearer KEY' on every request");
  sub->add_option("--alias", f->alias, "The model's name in the API (default: the file's name without .gguf)");
  sub->add_option("--sessions", f->s.pool.sessions, "Conversations held in memory (one on the device, the others parked "
                                                    "as pot snapshots); beyond, the least recently used go to --cache-dir")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  sub->add_option("--cache-dir", f->s.pool.cache_dir, "Where conversations beyond --sessions are saved as pot snapshots "
                                                      "(default: none, they are forgotten)");
  sub->add_option("--queue", f->s.queue, "Requests that may wait for the device (503 beyond)")->capture_default_str()->check(CLI::Range(1, 4096));
  sub->add_option("--max-body", f->max_body, "Largest request body (413 beyond), e.g. 16M")->capture_default_str()->check(byte_size_validator());
  sub->add_option("--max-prompt-tokens", f->s.max_prompt_tokens, "Most tokens in a request's messages or prompt")
      ->capture_default_str()->check(CLI::Range(1, 1 << 30));
  sub->add_option("--max-tokens", f->s.max_tokens, "Most tokens a request may ask to generate")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  sub->add_option("--default-max-tokens", f->s.default_max_tokens, "Tokens generated when a request gives no max_tokens")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  sub->add_option("--documents", f->s.documents, "Documents held at once (429 beyond)")->capture_default_str()->check(CLI::Range(1, 4096));
  sub->callback([f] { run_serve(*f); });
}

void add_chat_command(CLI::App& app) {
  auto f = std::make_shared<PotFlags>();
  auto system = std::make_shared<std::string>();
  auto n = std::make_shared<int>(512);
  auto sampler = std::make_shared<SamplerOptions>();
  CLI::App* sub = app.add_subcommand("chat", "A conversation in the terminal that never outgrows the memory pot");
  add_pot_flags(sub, f.get());
  sub->add_option("--system", *system, "System prompt (default: the model template's)");
  sub->add_option("-n,--n-predict", *n, "Most tokens an answer takes")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  sub->add_option("--temp", sampler->temperature, "Sampling temperature; 0 = greedy")->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
  sub->add_option("--seed", sampler->seed, "Random seed for sampling")->capture_default_str();
  sub->callback([f, system, n, sampler] { run_chat(*f, *system, *n, *sampler); });
}

}  // namespace infinipot::cli
