// infinipot run: answer a prompt, or a question about a long document, on the device.
#include <cstdio>
#include <iostream>
#include <memory>

#include "pot/memory_pot.h"
#include "engine/engine.h"
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
  // Memory pot (InfiniPot): off unless --pot is given.
  int pot = 0;
  int keep = 0;
  float nuc_ratio = 0.5f;
  std::string catalyst;
  bool catalyst_given = false;
  std::string pot_policy = "infinipot";
  bool no_cr_rope = false;
  int pool = 0;
  std::string pot_heads = "shared";
  bool nuc_given = false, heads_given = false;
  std::string watch;
};

// Where `watch` first occurs in the document, as stream indices [first, last] of the body
// tokens that cover it (body token i is stream index offset + i); {-1, -1} if absent.
std::pair<int, int> watch_span(const Tokenizer& tok, const std::vector<TokenId>& body, int offset,
                               const std::string& document, const std::string& watch) {
  const size_t at = document.find(watch);
  if (watch.empty() || at == std::string::npos) return {-1, -1};
  int first = -1, last = -1;
  size_t pos = 0;  // byte offset of token i in the decoded document
  for (size_t i = 0; i < body.size() && pos < at + watch.size(); ++i) {
    const size_t len = tok.decode_token(body[i]).size();
    if (pos + len > at && first < 0) first = offset + static_cast<int>(i);
    if (pos + len > at) last = offset + static_cast<int>(i);
    pos += len;
  }
  return {first, last};
}

// How much of the watched span each (layer, KV head) of the pot still holds.
nlohmann::json watch_report(const MemoryPot& pot, const LlamaConfig& cfg, std::pair<int, int> span) {
  if (span.first < 0) return {{"found", false}};
  const int n = span.second - span.first + 1;
  double kept = 0;
  int complete = 0;
  nlohmann::json per_layer = nlohmann::json::array();
  for (int l = 0; l < cfg.n_layer; ++l) {
    double layer_kept = 0;
    for (int h = 0; h < cfg.n_head_kv; ++h) {
      int c = 0;
      for (int src : pot.sources(l, h)) c += src >= span.first && src <= span.second;
      layer_kept += double(c) / n;
      complete += c == n;
    }
    per_layer.push_back(layer_kept / cfg.n_head_kv);
    kept += layer_kept;
  }
  const int heads = cfg.n_layer * cfg.n_head_kv;
  return {{"found", true}, {"first_token", span.first}, {"tokens", n}, {"kept_fraction", kept / heads},
          {"heads_complete", double(complete) / heads}, {"kept_fraction_per_layer", per_layer}};
}

// The general catalyst prompt (CaP-G) when no question is known in advance.
const char* kGeneralCatalyst =
    "Summarize the text above. List its key facts, names, numbers, dates and events.";

nlohmann::json pot_report(const MemoryPot& pot, int catalyst_tokens) {
  const PotOptions& o = pot.options();
  const PotStats& s = pot.stats();
  return {{"capacity", o.capacity},         {"keep", o.keep},
          {"pinned", pot.pinned()},         {"catalyst_tokens", catalyst_tokens},
          {"nuc_slots", pot.nuc_slots()},   {"nuc_ratio", o.nuc_ratio},
          {"policy", pot_policy_name(o.policy)}, {"cr_rope", o.cr_rope},
          {"cycles", s.cycles},             {"tokens_read", s.tokens_read},
          {"max_position", s.max_position}, {"catalyst_s", s.catalyst_s},
          {"novelty_s", s.novelty_s},       {"compact_s", s.compact_s}};
}

void print_summary(Engine& engine, const GenerateResult& r, const nlohmann::json& extra, bool json);

// run with --pot: the document streams through the memory pot.
void run_in_pot(const RunOpts& o, Engine& engine, const PromptParts& parts, const std::string& document) {
  PotOptions po;
  po.capacity = o.pot;
  po.keep = o.keep;
  po.nuc_ratio = o.nuc_ratio;
  po.policy = parse_pot_policy(o.pot_policy);
  po.cr_rope = !o.no_cr_rope;
  po.pool = o.pool;
  po.shared_heads = o.pot_heads == "shared";
  // CaP-Q when the question is known, CaP-G otherwise (paper, Table 2); --catalyst overrides.
  const std::string cap_text = o.catalyst_given ? o.catalyst : !o.question.empty() ? o.question : kGeneralCatalyst;
  const std::vector<TokenId> catalyst =
      po.policy == PotPolicy::InfiniPot ? engine.catalyst_prompt(parts, cap_text) : std::vector<TokenId>{};
  po = MemoryPot::resolve(po, Engine::pot_layout(parts, catalyst, o.n_predict));
  engine.prepare_pot(po);

  GenerateOptions go;
  go.n_predict = o.n_predict;
  go.sampler = {o.temp, o.top_k, o.top_p, o.seed};
  if (!o.json) go.on_text = [](const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); std::fflush(stdout); };
  const GenerateResult r = engine.generate(parts, catalyst, go);
  nlohmann::json report = pot_report(*engine.pot(), static_cast<int>(catalyst.size()));
  if (!o.watch.empty()) {
    const auto span = watch_span(engine.tokenizer(), parts.body, static_cast<int>(parts.prefix.size()), document, o.watch);
    report["watch"] = watch_report(*engine.pot(), engine.config(), span);
    if (!o.json)
      std::fprintf(stderr, "\n--- watch: %s\n", span.first < 0 ? "text not found in the document"
                   : ("the pot holds " + std::to_string(int(100 * report["watch"]["kept_fraction"].get<double>() + 0.5)) +
                      "% of its " + std::to_string(span.second - span.first + 1) + " tokens (all of them in " +
                      std::to_string(int(100 * report["watch"]["heads_complete"].get<double>() + 0.5)) +
                      "% of layer heads)").c_str());
  }
  print_summary(engine, r, {{"pot", report}}, o.json);
}

void run(const RunOpts& o, bool have_prompt, bool have_file) {
  if (have_prompt == have_file) throw std::invalid_argument("run needs exactly one of -p PROMPT or -f FILE");
  if (o.n_predict <= 0) throw std::invalid_argument("-n must be at least 1 (tokens to generate), got " + std::to_string(o.n_predict));
  std::string user = have_file ? read_text_file(o.file, "document") : o.prompt;
  require_utf8(user, have_file ? "document '" + o.file + "'" : "prompt");
  require_utf8(o.question, "question");
  require_utf8(o.catalyst, "--catalyst text");
  if (user.find_first_not_of(" \t\r\n") == std::string::npos)
    throw std::invalid_argument(have_file ? "document '" + o.file + "' is empty" : "the prompt is empty");
  const bool use_pot = o.pot > 0;
  if (!use_pot && (o.keep || o.catalyst_given || o.no_cr_rope || o.pot_policy != "infinipot" || o.pool || o.nuc_given || o.heads_given || !o.watch.empty()))
    throw std::invalid_argument("--keep, --nuc-ratio, --catalyst, --pot-policy, --pot-heads, --pot-pool, --pot-watch and "
                                "--no-cr-rope set up the memory pot: give --pot N too");
  if (o.pot_policy == "recent" && (o.catalyst_given || o.nuc_given || o.heads_given || o.pool))
    throw std::invalid_argument("--catalyst, --nuc-ratio, --pot-heads and --pot-pool shape the infinipot policy's "
                                "scores; --pot-policy recent uses none of them: drop them or the policy");
  require_utf8(o.watch, "--pot-watch text");
  if (o.catalyst_given && o.catalyst.find_first_not_of(" \t\r\n") == std::string::npos)
    throw std::invalid_argument("--catalyst is empty: give the text the catalyst prompt should ask, or leave it out");

  EngineOptions eo;
  eo.model_path = o.model;
  eo.device = o.device;
  eo.device_mem = o.device_mem.empty() ? 0 : cl::parse_byte_size(o.device_mem);
  eo.chunk = o.chunk;
  eo.kv_type = o.kv_type;
  Engine engine(eo);

  // The user's text is data: only the chat template's own markers become special tokens.
  const PromptParts parts = engine.prompt_parts(o.system, user, o.question, o.raw);
  if (use_pot) return run_in_pot(o, engine, parts, user);
  const std::vector<TokenId> prompt = parts.all();
  const int needed = static_cast<int>(prompt.size()) + o.n_predict;
  int capacity = o.ctx > 0 ? o.ctx : needed;
  if (needed > capacity)
    throw std::invalid_argument("the prompt (" + std::to_string(prompt.size()) + " tokens) plus -n " +
                                std::to_string(o.n_predict) + " needs " + std::to_string(needed) +
                                " KV entries but --ctx is " + std::to_string(capacity) +
                                "; raise --ctx or shorten the input");
  if (needed > engine.config().n_ctx_train && !o.json)
    std::fprintf(stderr, "note: %d tokens exceed the model's training context (%d); a full KV cache reads "
                 "past it, quality may drop (--pot N reads it through the memory pot instead)\n", needed, engine.config().n_ctx_train);
  engine.prepare(capacity);

  GenerateOptions go;
  go.n_predict = o.n_predict;
  go.sampler = {o.temp, o.top_k, o.top_p, o.seed};
  if (!o.json) go.on_text = [](const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); std::fflush(stdout); };
  const GenerateResult r = engine.generate(prompt, go);
  print_summary(engine, r, {{"kv_capacity", capacity}}, o.json);
}

void print_summary(Engine& engine, const GenerateResult& r, const nlohmann::json& extra, bool json) {
  const auto mem = engine.memory_report();
  const double prefill_tps = r.prefill_s > 0 ? r.prompt_tokens / r.prefill_s : 0;
  const double decode_tps = r.decode_s > 0 && r.tokens.size() > 1 ? (r.tokens.size() - 1) / r.decode_s : 0;
  nlohmann::json by_cat = nlohmann::json::object();
  for (auto it = mem["by_category"].begin(); it != mem["by_category"].end(); ++it) by_cat[it.key()] = it.value()["peak"];
  if (json) {
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
                        {"kv_type", engine.kv_half() ? "f16" : "f32"},
                        {"device", engine.context().device().name}};
    j.update(extra);
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return;
  }
  std::fprintf(stderr, "\n\n--- %d prompt tokens, %zu generated (%s) on %s\n", r.prompt_tokens, r.tokens.size(),
               r.stop_reason.c_str(), engine.context().device().name.c_str());
  std::fprintf(stderr, "--- prefill %.1f tok/s, decode %.1f tok/s, time to first token %.2f s\n", prefill_tps,
               decode_tps, r.ttft_s);
  if (extra.contains("pot")) {
    const auto& p = extra["pot"];
    std::fprintf(stderr, "--- pot %d entries (keep %d, %d pinned, catalyst %d tokens, %d NuC slots): %d distillations; "
                 "catalyst %.2f s, novelty %.2f s, compaction %.2f s\n", p["capacity"].get<int>(), p["keep"].get<int>(),
                 p["pinned"].get<int>(), p["catalyst_tokens"].get<int>(), p["nuc_slots"].get<int>(),
                 p["cycles"].get<int>(), p["catalyst_s"].get<double>(), p["novelty_s"].get<double>(),
                 p["compact_s"].get<double>());
  }
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
  auto* pot = sub->add_option("--pot", o->pot, "Memory pot: read the input through a KV store of N entries with "
                              "InfiniPot's continual context distillation (default: off, a full KV cache)")
                  ->check(CLI::Range(1, 1 << 24));
  pot->excludes(sub->get_option("--ctx"));
  sub->add_option("--keep", o->keep, "Pot entries left after a distillation, chat prefix included (default: --pot / 2)")
      ->check(CLI::Range(1, 1 << 24));
  sub->add_option("--nuc-ratio", o->nuc_ratio, "Share of the kept entries chosen by novelty (NuC) before catalyst "
                  "attention (CaP)")->capture_default_str()->check(CLI::Range(0.0f, 1.0f))
      ->each([o](const std::string&) { o->nuc_given = true; });
  sub->add_option("--catalyst", o->catalyst, "Catalyst prompt text (default: the -q question, else a general "
                  "summarize instruction)")->each([o](const std::string&) { o->catalyst_given = true; });
  sub->add_option("--pot-policy", o->pot_policy, "Which entries survive: infinipot (CaP + NuC) or recent "
                  "(chat prefix + latest text, a StreamingLLM-style baseline)")
      ->capture_default_str()->check(CLI::IsMember({"infinipot", "recent"}));
  sub->add_option("--pot-pool", o->pool, "Max-pool scores over +-N neighbouring entries so phrases survive whole")
      ->capture_default_str()->check(CLI::Range(0, 64));
  sub->add_option("--pot-watch", o->watch, "Report how much of this text (first occurrence in the document) "
                  "the pot still holds at the end, per layer and KV head");
  sub->add_option("--pot-heads", o->pot_heads, "shared: every KV head of a layer keeps the same entries (scores "
                  "summed over its heads); per-head: each head chooses its own (the paper's)")
      ->capture_default_str()->check(CLI::IsMember({"shared", "per-head"}))
      ->each([o](const std::string&) { o->heads_given = true; });
  sub->add_flag("--no-cr-rope", o->no_cr_rope, "Keep stream positions after a distillation (ablation of CR-RoPE)");
  sub->add_flag("--raw", o->raw, "Feed the text as is, without the chat template");
  sub->add_flag("--json", o->json, "Print one JSON object with the answer and the figures");
  sub->callback([o, p, f] { run(*o, static_cast<bool>(*p), static_cast<bool>(*f)); });
}

}  // namespace infinipot::cli
