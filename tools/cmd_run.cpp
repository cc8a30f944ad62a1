// infinipot run: answer a prompt, or a question about a long document, on the device.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "engine/answer.h"
#include "pot/policy_registry.h"
#include "pot/policy_spec.h"
#include "tools/cli_common.h"
#include "tools/cmd_run.h"
#include "tools/host_usage.h"
#include "tools/progress.h"

namespace infinipot::cli {
namespace {

std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

void print_summary(Engine& engine, const GenerateResult& r, const nlohmann::json& extra, bool json);

// The flags that set a policy's settings (pot/policy_registry.h), whether each was given.
struct SettingFlag {
  Setting setting;
  bool given;
  const char* flag;
};
std::vector<SettingFlag> setting_flags(const RunOpts& o) {
  return {{Setting::Pot, o.pot > 0, "--pot"},
          {Setting::Keep, o.keep != 0, "--keep"},
          {Setting::Ctx, o.ctx > 0, "--ctx"},
          {Setting::NucRatio, o.nuc_given, "--nuc-ratio"},
          {Setting::NucStride, o.nuc_stride > 0, "--nuc-stride"},
          {Setting::Pool, o.pool >= 0, "--pot-pool"},
          {Setting::Ahead, o.pool_ahead >= 0, "--pot-pool-ahead"},
          {Setting::Recent, o.recent >= 0, "--pot-recent"},
          {Setting::Heads, o.heads_given, "--pot-heads"},
          {Setting::Layers, o.layers_given, "--pot-layers"},
          {Setting::Units, o.units_given, "--pot-units"},
          {Setting::Catalyst, o.catalyst_given, "--catalyst"},
          {Setting::CapRows, o.cap_rows_given, "--cap-rows"},
          {Setting::Positions, o.no_cr_rope || !o.positions.empty() || o.position_gap > 0,
           "--positions/--no-cr-rope/--position-gap"},
          {Setting::Inspect,
           !o.watch.empty() || !o.oracle.empty() || o.pot_text || o.watch_attention || !o.save_pot.empty() ||
               o.select != "device",
           "--pot-watch/--pot-oracle/--pot-text/--save-pot/--select"}};
}

// The flags a policy does not read are refused, naming the policy's own; a pot policy
// without --pot is told to give one.
void check_policy_flags(const RunOpts& o, const PolicyInfo& info) {
  const std::vector<SettingFlag> flags = setting_flags(o);
  std::string pot_flags_given;  // every flag but --ctx shapes or reports on a pot
  for (const SettingFlag& f : flags)
    if (f.given && f.setting != Setting::Ctx) pot_flags_given += (pot_flags_given.empty() ? "" : ", ") + std::string(f.flag);
  if (!info.accepts(Setting::Pot) && !pot_flags_given.empty())
    throw CLI::ValidationError(pot_flags_given + ": --pot, --keep, --nuc-ratio, --catalyst, --pot-*, --positions, "
                               "--no-cr-rope and --save-pot set up the memory pot; --policy " + std::string(info.name) +
                               " keeps none: drop them, or give --pot N with a pot policy");
  if (info.requires_setting(Setting::Pot) && o.pot <= 0)
    throw CLI::ValidationError("--policy " + std::string(info.name) + " reads through a memory pot: give --pot N (its KV entries)");
  for (const SettingFlag& f : flags)
    if (f.given && !info.accepts(f.setting))
      throw CLI::ValidationError(std::string(f.flag) + " does not apply to --policy " + info.name + " (" + infinipot::worded(info.summary, setting_names()) +
                                 "): drop it or choose another policy");
}

// Flags that shape or report on a memory pot (a snapshot fixes them).
bool pot_shaping_flags(const RunOpts& o) {
  return o.keep || o.no_cr_rope || !o.positions.empty() || o.position_gap || o.pool_given || o.nuc_given ||
         o.heads_given || o.layers_given || o.units_given || o.recent >= 0 || o.cap_rows_given || !o.watch.empty() ||
         !o.oracle.empty() || o.pot_text || o.watch_attention;
}

}  // namespace

// --load-pot: the saved pot replaces the document and fixes the pot's settings.
void check_load_pot(const RunOpts& o, bool have_prompt, bool have_file) {
  if (have_prompt || have_file)
    throw CLI::ValidationError("--load-pot answers about the document the pot was saved from: drop -p/-f");
  if (o.question.find_first_not_of(" \t\r\n") == std::string::npos)
    throw CLI::ValidationError("--load-pot needs the question to answer: give -q QUESTION");
  if (!o.save_pot.empty()) throw CLI::ValidationError("--load-pot and --save-pot together: the pot is already saved");
  if (o.pot > 0 || !o.policy.empty() || pot_shaping_flags(o) || o.ctx > 0)
    throw CLI::ValidationError("--load-pot takes the pot's settings from the snapshot: drop --pot, --keep, --policy, "
                               "--ctx and the --pot-* flags");
}

void run(const RunOpts& o, bool have_prompt, bool have_file, const std::function<void(Engine&, const Answer&)>& after) {
  if (!o.load_pot.empty()) check_load_pot(o, have_prompt, have_file);
  else if (have_prompt == have_file) throw std::invalid_argument("run needs exactly one of -p PROMPT or -f FILE");
  if (o.n_predict <= 0) throw std::invalid_argument("-n must be at least 1 (tokens to generate), got " + std::to_string(o.n_predict));
  // Range checks let NaN through and include 0: refused here, before the model is loaded.
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) throw CLI::ValidationError("--top-p must be in (0, 1], got " + fmt_float(o.top_p));
  if (!std::isfinite(o.temp)) throw CLI::ValidationError("--temp must be a finite number >= 0, got " + fmt_float(o.temp));
  const bool loading = !o.load_pot.empty();
  std::string user = have_file ? read_text_file(o.file, "document") : o.prompt;
  require_utf8(user, have_file ? "document '" + o.file + "'" : "prompt");
  require_utf8(o.question, "question");
  require_utf8(o.catalyst, "--catalyst text");
  require_utf8(o.watch, "--pot-watch text");
  if (o.watch_attention && o.watch.empty())
    throw CLI::ValidationError("--pot-watch-attention measures the attention on the --pot-watch text: give --pot-watch TEXT");
  require_utf8(o.oracle, "--pot-oracle text");
  if (!loading && user.find_first_not_of(" \t\r\n") == std::string::npos)
    throw std::invalid_argument(have_file ? "document '" + o.file + "' is empty" : "the prompt is empty");
  const std::string policy = loading ? default_policy(true) : !o.policy.empty() ? o.policy : default_policy(o.pot > 0);
  const PolicyInfo& info = find_policy(policy);
  if (!loading) check_policy_flags(o, info);
  if (!o.save_pot.empty()) {  // checked before reading the document, not after
    if (std::filesystem::is_directory(o.save_pot))
      throw std::invalid_argument("--save-pot: '" + o.save_pot + "' is a directory; give a file name inside it");
    const std::string probe = o.save_pot + ".partial";
    if (!std::ofstream(probe)) throw std::invalid_argument("--save-pot: cannot write '" + o.save_pot + "' (missing directory or no permission)");
    std::remove(probe.c_str());
  }
  if (o.catalyst_given && o.catalyst.find_first_not_of(" \t\r\n") == std::string::npos)
    throw std::invalid_argument("--catalyst is empty: give the text the catalyst prompt should ask, or leave it out");

  EngineOptions eo = engine_options(o.model, o.device, o.device_mem, o.chunk, o.kv_type);
  eo.weights = o.weights == "in-place" ? "in_place" : o.weights;
  eo.round_activations = o.round_activations;
  Engine engine(eo);

  AnswerOptions ao;
  ao.system = o.system;
  ao.raw = o.raw;
  ao.n_predict = o.n_predict;
  ao.sampler = {o.temp, o.top_k, o.top_p, o.seed};
  ao.ctx = o.ctx;
  ao.pot.policy = policy;
  ao.pot.capacity = o.pot;
  ao.pot.keep = o.keep == kKeepAuto ? 0 : o.keep;
  ao.pot.keep_auto = o.keep == kKeepAuto;
  if (o.no_cr_rope && !o.positions.empty() && o.positions != "stream")
    throw CLI::ValidationError("--no-cr-rope keeps stream positions, --positions " + o.positions + " asks otherwise: give one");
  ao.pot.positions = o.no_cr_rope ? PositionRule::Stream : *parse_position_rule(o.positions.empty() ? "auto" : o.positions);
  if (o.position_gap > 0 && ao.pot.positions != PositionRule::Gaps)
    throw CLI::ValidationError("--position-gap sets how wide --positions gaps leaves a cut: add --positions gaps or drop it");
  if (o.position_gap > 0) ao.pot.position_gap = o.position_gap;
  ao.pot.cap_question_rows = o.cap_rows == "question";
  ao.pot.params.nuc_ratio = o.nuc_ratio;
  if (o.nuc_stride > 0) ao.pot.params.nuc_stride = o.nuc_stride;
  ao.pot.params.pool = o.pool;
  ao.pot.params.pool_ahead = o.pool_ahead;
  ao.pot.params.recent = o.recent;
  ao.pot.params.per_head = o.pot_heads == "per-head";
  ao.pot.params.per_layer = o.pot_layers == "per-layer";
  ao.pot.params.units = *parse_unit_rule(o.units);  // checked by the flag's IsMember
  if (o.catalyst_given) ao.catalyst = o.catalyst;
  ao.save_pot = o.save_pot;
  ao.load_pot = o.load_pot;
  ao.watch = o.watch;
  ao.watch_attention = o.watch_attention;
  ao.oracle = o.oracle;
  ao.pot_text = o.pot_text;
  ao.pot.device_select = o.select == "device";
  Progress progress(progress_wanted(o.json));
  if (progress.enabled()) ao.on_prefill = [&](const PrefillProgress& p) { progress.status(prefill_status(p)); };
  if (!o.json)
    ao.on_text = [&](const std::string& s) {
      progress.done();
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
    };
  if (!info.accepts(Setting::Pot) && !o.json && !loading) {
    const int needed = static_cast<int>(engine.prompt_parts(o.system, user, o.question, o.raw).all().size()) + o.n_predict;
    if (needed > engine.config().n_ctx_train)
      std::fprintf(stderr, "note: %d tokens exceed the model's training context (%d); a full KV cache reads "
                   "past it, quality may drop (--pot N reads it through the memory pot instead)\n", needed,
                   engine.config().n_ctx_train);
  }
  const Answer a = answer(engine, user, o.question, ao);
  progress.done();
  nlohmann::json extra = {{"kv_capacity", a.kv_capacity}, {"policy", policy}};
  if (!a.pot.is_null()) {
    extra["pot"] = a.pot;
    extra["ccd_cycles"] = a.pot["cycles"];
    if (a.pot.contains("watch") && !o.json) {
      const auto& w = a.pot["watch"];
      std::fprintf(stderr, "\n--- watch: %s\n", !w["found"].get<bool>() ? "text not found in the document"
                   : ("the pot holds " + std::to_string(int(100 * w["kept_fraction"].get<double>() + 0.5)) +
                      "% of its " + std::to_string(w["tokens"].get<int>()) + " tokens (all of them in " +
                      std::to_string(int(100 * w["heads_complete"].get<double>() + 0.5)) +
                      "% of layer heads)").c_str());
      if (w.contains("question_attention") && w["question_attention"].is_object())
        std::fprintf(stderr, "--- the question gives it %.1f%% of its attention to the pot (mean over layers)\n",
                     100 * w["question_attention"]["share"].get<double>());
    }
    if (a.pot.contains("held") && !o.json) {
      const auto& t = a.pot["held"];
      std::fprintf(stderr, "\n--- the pot holds %d entries (%s; [\u2026N]: N tokens dropped there):\n%s\n",
                   t["entries"].get<int>(), t["shared"].get<bool>() ? "the same in every layer and head" : "layer 0, head 0",
                   t["text"].get<std::string>().c_str());
    }
  } else {
    extra["ccd_cycles"] = 0;
  }
  print_summary(engine, a.result, extra, o.json);
  if (after) after(engine, a);
}

namespace {

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
                        {"host_peak_rss", host_peak_rss()},
                        {"unified_memory", mem.value("unified_memory", false)},
                        {"weights_place", mem.value("weights_place", "")},
                        {"model_file_cached_bytes", mem.value("model_file_cached_bytes", uint64_t(0))},
                        {"weights_load_s", engine.weights_load_s()},
                        {"kv_type", engine.kv_half() ? "f16" : "f32"},
                        {"round_activations", engine.options().round_activations},
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
    std::fprintf(stderr, "--- pot %d entries, policy %s (keep %d, %d pinned, catalyst %d tokens): %d distillations; "
                 "measuring %.2f s, novelty %.2f s, selection + compaction %.2f s\n", p["capacity"].get<int>(),
                 p["policy"].get<std::string>().c_str(), p["keep"].get<int>(),
                 p["pinned"].get<int>(), p["catalyst_tokens"].get<int>(),
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
  // What DRAM holds beside the process on a device that shares it: the file's cached pages.
  std::fprintf(stderr, "--- host peak RSS %s; %s; model file in the page cache %s\n",
               cl::format_bytes(static_cast<uint64_t>(host_peak_rss())).c_str(),
               mem.value("unified_memory", false) ? "device memory is the host's (unified): its buffers are in that RSS"
                                                  : "device memory is the device's own",
               cl::format_bytes(mem.value("model_file_cached_bytes", uint64_t(0))).c_str());
}

}  // namespace

std::pair<CLI::Option*, CLI::Option*> add_run_flags(CLI::App* sub, const std::shared_ptr<RunOpts>& o) {
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
  sub->add_option("--weights", o->weights,
                  "Where the weights live: auto (in place in host memory where the device shares it, else "
                  "copied to the device), in-place, copy")
      ->capture_default_str()->check(CLI::IsMember({"auto", "in-place", "copy"}));
  sub->add_option("--system", o->system, "System prompt (default: the model template's)");
  auto* pot = sub->add_option("--pot", o->pot, "Memory pot: read the input through a KV store of N entries with "
                              "InfiniPot's continual context distillation (default: off, a full KV cache)")
                  ->check(CLI::Range(1, 1 << 24));
  pot->excludes(sub->get_option("--ctx"));
  add_keep_option(sub, &o->keep, "Pot entries left after a distillation, chat prefix included (default: --pot / 2)");
  sub->add_option("--nuc-ratio", o->nuc_ratio, "Share of the kept entries chosen by novelty (NuC) before catalyst "
                  "attention (CaP)")->capture_default_str()->check(CLI::Range(0.0f, 1.0f))
      ->each([o](const std::string&) { o->nuc_given = true; });
  sub->add_option("--nuc-stride", o->nuc_stride, "NuC scores every Nth token of the document (the LM head over "
                  "those rows only); the span rule carries each score to the tokens between (default 1: all)")
      ->check(CLI::Range(1, PolicyParams::kMaxNucStride));
  sub->add_option("--catalyst", o->catalyst, "Catalyst prompt text (default: the -q question, else a general "
                  "summarize instruction)")->each([o](const std::string&) { o->catalyst_given = true; });
  sub->add_option("--policy", o->policy, "Which KV entries survive (default: infinipot with --pot, else full): " +
                  policy_names(", "))->check(CLI::IsMember([] {
                    std::vector<std::string> names;
                    for (const auto& p : policies()) names.push_back(p.name);
                    return names;
                  }()));
  sub->add_option("--pot-pool", o->pool, "An entry takes the best score of the N entries before it (default: the "
                  "policy's)")->check(CLI::Range(0, 64))->each([o](const std::string&) { o->pool_given = true; });
  sub->add_option("--pot-pool-ahead", o->pool_ahead, "... and of the N entries after it (default: the policy's)")
      ->check(CLI::Range(0, 64))->each([o](const std::string&) { o->pool_given = true; });
  sub->add_option("--pot-recent", o->recent, "Newest entries always kept (default: the policy's)")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--pot-watch", o->watch, "Report how much of this text (first occurrence in the document) "
                  "the pot still holds at the end, per layer and KV head");
  sub->add_flag("--pot-watch-attention", o->watch_attention, "Diagnostics: also the share of the question's attention "
                "(CaP's measure) that falls on the --pot-watch text once the document is read, per layer "
                "(pot.watch.question_attention; SnapKV: over the whole input)");
  sub->add_flag("--pot-text", o->pot_text, "After the answer, print the text the pot holds (its entries' tokens in "
                "order, [\u2026N] where N tokens were dropped); with --json: pot.held");
  sub->add_option("--pot-oracle", o->oracle, "Diagnostics: the pot keeps this text (first occurrence in the "
                  "document) in every layer and head whatever the policy chooses, to tell selection losses from "
                  "losses after it");
  sub->add_option("--pot-select", o->select, "Where the pot chooses its survivors: device (OpenCL kernels) or host "
                  "(the C++ reference)")->capture_default_str()->check(CLI::IsMember({"device", "host"}));
  sub->add_option("--pot-heads", o->pot_heads, "shared: every KV head of a layer keeps the same entries (scores "
                  "summed over its heads); per-head: each head chooses its own (the paper's)")
      ->capture_default_str()->check(CLI::IsMember({"shared", "per-head"}))
      ->each([o](const std::string&) { o->heads_given = true; });
  sub->add_option("--pot-layers", o->pot_layers, "shared: one choice for every layer (scores summed over layers); "
                  "per-layer: each layer chooses its own")
      ->capture_default_str()->check(CLI::IsMember({"shared", "per-layer"}))
      ->each([o](const std::string&) { o->layers_given = true; });
  sub->add_option("--pot-units", o->units, "word: a chosen token keeps its whole word or number run, with the "
                  "space token before a number, the punctuation right after it and the marks inside it (uuids, "
                  "dates); plain: the same, but a mark inside a word ends its run; alnum: runs of letters and "
                  "digits only; token: single tokens")->capture_default_str()
      ->check(CLI::IsMember({"word", "plain", "alnum", "token"}))
      ->each([o](const std::string&) { o->units_given = true; });
  sub->add_option("--cap-rows", o->cap_rows, "Catalyst rows whose attention counts: question (not the template's "
                  "tail) or all")->capture_default_str()->check(CLI::IsMember({"question", "all"}))
      ->each([o](const std::string&) { o->cap_rows_given = true; });
  sub->add_option("--save-pot", o->save_pot, "After reading the document, save the distilled pot to FILE (then answer "
                  "as usual); `run --load-pot FILE -q ...` answers from it later");
  sub->add_option("--load-pot", o->load_pot, "Answer -q QUESTION from a pot saved with --save-pot, without the document "
                  "(same model; the pot's settings come from the file)");
  sub->add_flag("--no-cr-rope", o->no_cr_rope, "Keep stream positions after a distillation (ablation of CR-RoPE; "
                "the same as --positions stream)");
  sub->add_option("--positions", o->positions, "Where kept entries' RoPE positions go at a distillation: reset "
                  "(CR-RoPE, 0..keep-1), stream (as read), fit (as read while inside the model's trained context, "
                  "squeezed to fit it after), gaps (as read, but each cut shrunk to at most --position-gap "
                  "positions), auto (the default: gaps for Gemma 3, reset for the others)")
      ->check(CLI::IsMember({"reset", "stream", "fit", "gaps", "auto"}));
  sub->add_option("--position-gap", o->position_gap, "With --positions gaps: the widest distance a cut leaves between "
                  "kept neighbours (default 256)")->check(CLI::Range(1, 1 << 24));
  sub->add_flag("--round-activations", o->round_activations,
                "Round each product's input as llama.cpp's CPU backend quantizes it (see perplexity "
                "--round-activations), to compare greedy output with llama.cpp");
  sub->add_flag("--raw", o->raw, "Feed the text as is, without the chat template");
  sub->add_flag("--json", o->json, "Print one JSON object with the answer and the figures");
  return {p, f};
}

void add_run_command(CLI::App& app) {
  auto* sub = app.add_subcommand("run", "Generate an answer to a prompt or to a question about a document");
  auto o = std::make_shared<RunOpts>();
  const auto [p, f] = add_run_flags(sub, o);
  sub->callback([o, p = p, f = f] { run(*o, static_cast<bool>(*p), static_cast<bool>(*f)); });
}

}  // namespace infinipot::cli
