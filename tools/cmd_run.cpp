// infinipot run: answer a prompt, or a question about a long document, on the device.
#include <cstdio>
#include <iostream>
#include <memory>

#include "runtime/engine.h"
#include "tools/cli_common.h"

namespace infinipot::cli {
namespace {

struct RunOpts {
  std::string model, prompt, file, question, system, device, device_mem, kv_type = "auto";
  int n_predict = 256;
  float temp = 0.0f;
  int top_k = 40;
  float top_p = 0.95f;
  uint64_t seed = 0;
  int ctx = 0;
  int chunk = 0;
  bool json = false;
  bool raw = false;
};

void run(const RunOpts& o, bool have_prompt, bool have_file) {
  if (have_prompt == have_file) throw std::invalid_argument("run needs exactly one of -p PROMPT or -f FILE");
  if (o.n_predict <= 0) throw std::invalid_argument("-n must be at least 1 (tokens to generate), got " + std::to_string(o.n_predict));
  std::string user = have_file ? read_text_file(o.file, "document") : o.prompt;
  require_utf8(user, have_file ? "document '" + o.file + "'" : "prompt");
  require_utf8(o.question, "question");
  if (user.find_first_not_of(" \t\r\n") == std::string::npos)
    throw std::invalid_argument(have_file ? "document '" + o.file + "' is empty" : "the prompt is empty");
  if (!o.question.empty()) user += "\n\n" + o.question;

  EngineOptions eo;
  eo.model_path = o.model;
  eo.device = o.device;
  eo.device_mem = o.device_mem.empty() ? 0 : cl::parse_byte_size(o.device_mem);
  eo.chunk = o.chunk;
  eo.kv_type = o.kv_type;
  Engine engine(eo);

  // The user's text is data: only the chat template's own markers become special tokens.
  const std::vector<TokenId> prompt =
      o.raw ? engine.tokenizer().encode(user, false, false) : engine.chat_prompt(o.system, user);
  const int needed = static_cast<int>(prompt.size()) + o.n_predict;
  int capacity = o.ctx > 0 ? o.ctx : needed;
  if (needed > capacity)
    throw std::invalid_argument("the prompt (" + std::to_string(prompt.size()) + " tokens) plus -n " +
                                std::to_string(o.n_predict) + " needs " + std::to_string(needed) +
                                " KV entries but --ctx is " + std::to_string(capacity) +
                                "; raise --ctx or shorten the input");
  if (needed > engine.config().n_ctx_train && !o.json)
    std::fprintf(stderr, "note: %d tokens exceed the model's training context (%d); a full KV cache reads "
                 "past it, quality may drop\n", needed, engine.config().n_ctx_train);
  engine.prepare(capacity);

  GenerateOptions go;
  go.n_predict = o.n_predict;
  go.sampler = {o.temp, o.top_k, o.top_p, o.seed};
  if (!o.json) go.on_text = [](const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); std::fflush(stdout); };
  GenerateResult r = engine.generate(prompt, go);

  const auto mem = engine.memory_report();
  const double prefill_tps = r.prefill_s > 0 ? r.prompt_tokens / r.prefill_s : 0;
  const double decode_tps = r.decode_s > 0 && r.tokens.size() > 1 ? (r.tokens.size() - 1) / r.decode_s : 0;
  nlohmann::json by_cat = nlohmann::json::object();
  for (auto it = mem["by_category"].begin(); it != mem["by_category"].end(); ++it) by_cat[it.key()] = it.value()["peak"];
  if (o.json) {
    nlohmann::json j = {{"text", r.text},
                        {"prompt_tokens", r.prompt_tokens},
                        {"generated_tokens", r.tokens.size()},
                        {"stop_reason", r.stop_reason},
                        {"ttft_s", r.ttft_s},
                        {"prefill_tok_s", prefill_tps},
                        {"decode_tok_s", decode_tps},
                        {"peak_device_bytes", mem["peak"]},
                        {"device_mem_budget", mem["budget"]},
                        {"device_bytes", by_cat},
                        {"kv_capacity", capacity},
                        {"kv_type", engine.kv_half() ? "f16" : "f32"},
                        {"device", engine.context().device().name}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return;
  }
  std::fprintf(stderr, "\n\n--- %d prompt tokens, %zu generated (%s) on %s\n", r.prompt_tokens, r.tokens.size(),
               r.stop_reason.c_str(), engine.context().device().name.c_str());
  std::fprintf(stderr, "--- prefill %.1f tok/s, decode %.1f tok/s, time to first token %.2f s\n", prefill_tps,
               decode_tps, r.ttft_s);
  std::fprintf(stderr, "--- peak device memory %s of budget %s (", cl::format_bytes(mem["peak"]).c_str(),
               cl::format_bytes(mem["budget"]).c_str());
  bool first = true;
  for (auto it = by_cat.begin(); it != by_cat.end(); ++it) {
    if (it.value().get<uint64_t>() == 0) continue;
    std::fprintf(stderr, "%s%s %s", first ? "" : ", ", it.key().c_str(), cl::format_bytes(it.value()).c_str());
    first = false;
  }
  std::fprintf(stderr, ")\n");
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto* sub = app.add_subcommand("run", "Generate an answer to a prompt or to a question about a document");
  auto o = std::make_shared<RunOpts>();
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  auto* p = sub->add_option("-p,--prompt", o->prompt, "Prompt text (one user turn)");
  auto* f = sub->add_option("-f,--file", o->file, "Long input document (the user turn)");
  p->excludes(f);
  sub->add_option("-q,--question", o->question, "Question asked after the document, in the same user turn");
  sub->add_option("-n,--n-predict", o->n_predict, "Most tokens to generate")->capture_default_str();
  sub->add_option("--temp", o->temp, "Sampling temperature; 0 = greedy")->capture_default_str()->check(CLI::Range(0.0f, 100.0f));
  sub->add_option("--top-k", o->top_k, "Top-k filter (0 = off)")->capture_default_str()->check(CLI::Range(0, 1 << 30));
  sub->add_option("--top-p", o->top_p, "Nucleus filter in (0, 1]")->capture_default_str()->check(CLI::Range(0.0f, 1.0f));
  sub->add_option("--seed", o->seed, "Random seed for sampling")->capture_default_str()->check(CLI::Validator(
      // CLI11 would wrap "-1" around to 2^64 - 1.
      [](std::string& s) { return s.find('-') == std::string::npos ? std::string() : "a seed is a whole number >= 0, got " + s; },
      "", "non-negative"));
  sub->add_option("--device-mem", o->device_mem, "Hard cap on device memory, e.g. 256M, 1.5G (default: device's global memory)")
      ->check(byte_size_validator());
  sub->add_option("--device", o->device, "OpenCL device: index or name substring (default: first GPU, else CPU)");
  sub->add_option("--ctx", o->ctx, "KV capacity in tokens (default: prompt + -n)")->check(CLI::Range(1, 1 << 24));
  sub->add_option("--kv-type", o->kv_type, "KV store element type: auto (f16 with cl_khr_fp16, else f32), f16, f32")
      ->capture_default_str()->check(CLI::IsMember({"auto", "f16", "f32"}));
  sub->add_option("--chunk", o->chunk, "Prefill chunk in tokens (default: from platforms/)")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--system", o->system, "System prompt (default: the model template's)");
  sub->add_flag("--raw", o->raw, "Feed the text as is, without the chat template");
  sub->add_flag("--json", o->json, "Print one JSON object with the answer and the figures");
  sub->callback([o, p, f] { run(*o, static_cast<bool>(*p), static_cast<bool>(*f)); });
}

}  // namespace infinipot::cli
