// infinipot nih: the needle-in-a-haystack benchmark. Each --task (the pass key by default,
// or a RULER-style task: engine/tasks/) hides its needles at several depths of documents of
// several lengths (in tokens); each KV policy is asked the task's question; one JSON line
// per trial goes to --out (a rerun skips what is there), then a Markdown table per task and
// haystack. The host logic is engine/nih.h and engine/tasks/.
#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "engine/answer.h"
#include "engine/nih.h"
#include "engine/prefix_forks.h"
#include "engine/trial_checkpoint.h"
#include "engine/tasks/task_registry.h"
#include "pot/policy_registry.h"
#include "runtime/device_memory.h"
#include "tools/cli_common.h"
#include "tools/host_usage.h"
#include "tools/progress.h"

namespace infinipot::cli {
namespace {

struct NihOpts {
  std::string model, policies = default_policy(true), lengths = "4096", depths = "0.1,0.5,0.9", haystacks;
  std::vector<std::string> haystack_files;  // NAME=FILE
  std::string tasks = nih::kDefaultTask;
  std::string out = "nih_results.jsonl", device, device_mem, kv_type = "auto", question, needle;
  int pot = 1024, keep = 0, trials = 5, n_predict = 0, full_max = 0, chunk = 0;  // n_predict 0: the task's
  uint64_t seed = 1;
  bool table_only = false, json = false, n_given = false, question_given = false, needle_given = false;
  bool share_prefix = true, pot_text = false, needle_attention = false;
  std::string checkpoint_dir;     // "" = no checkpoints (engine/trial_checkpoint.h)
  double checkpoint_every = 600;  // seconds of reading between a trial's saves
  int checkpoint_stop = 0;        // tests: exit (code 75) after this many saves, as a killed run would stop
};

// Built-in prose haystacks: name -> file under data/.
const std::map<std::string, std::string>& builtin_prose() {
  static const std::map<std::string, std::string> m = {
      {"prose", "data/perplexity.txt"},        // KJV Genesis 1-30 (data/README.md)
      {"alice", "data/haystack/alice.txt"},    // Alice's Adventures in Wonderland (data/haystack/README.md)
  };
  return m;
}

std::string depth_text(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

void print_summary(const std::string& out, bool json, bool repair) {
  const nih::Results res = nih::load_results(out, repair);
  for (const auto& w : res.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (json) std::cout << nih::summary_json(res.records).dump(1) << std::endl;
  else std::cout << nih::render_tables(res.records) << std::flush;
}

struct Cell {
  const nih::Task* task;
  size_t hay;  // index into haystacks
  int length;
  double depth;
  int trial;
  std::vector<size_t> todo;  // indices into specs still to run
};

void nih_command(const NihOpts& o) {
  if (o.table_only) {
    std::error_code ec;
    if (!std::filesystem::exists(o.out, ec))
      throw std::invalid_argument("results file '" + o.out + "' does not exist: nothing to tabulate (give --out FILE)");
    return print_summary(o.out, o.json, false);
  }
  if (o.model.empty()) throw CLI::ValidationError("nih needs -m MODEL (or --table-only to print the tables of --out)");
  if (o.trials < 1) throw CLI::ValidationError("--trials must be at least 1, got " + std::to_string(o.trials));
  if (o.n_given && o.n_predict < 1) throw CLI::ValidationError("-n must be at least 1 (tokens to generate), got " + std::to_string(o.n_predict));
  if (o.full_max < 0) throw CLI::ValidationError("--full-max must be >= 0 (0: the model's training context)");
  if (!o.checkpoint_dir.empty()) nih::TrialCheckpoint::prepare_dir(o.checkpoint_dir);

  // Lists and policies: usage errors (exit 2) name the flag.
  std::vector<nih::PolicySpec> specs;
  std::vector<int> lengths;
  std::vector<double> depths;
  std::vector<std::string> hay_names;
  std::map<std::string, std::string> files;  // prose haystack name -> file
  for (const auto& [name, rel] : builtin_prose()) files[name] = data_path(rel);
  std::vector<std::string> added;
  std::vector<const nih::Task*> tasks;
  try {
    for (const std::string& name : nih::parse_names(o.tasks, "--task")) tasks.push_back(&nih::find_task(name));
    for (const nih::Task* t : tasks)
      if (o.question_given && t->fixed_question().empty())
        throw std::invalid_argument(std::string("--question does not apply to --task ") + t->name() +
                                    " (its question names the trial's keys); drop --question or that task");
    if (o.question_given && o.question.find_first_not_of(" \t\r\n") == std::string::npos)
      throw std::invalid_argument("--question is empty; give the question to ask, or drop --question for the task's own");
    if (o.needle_given) {
      for (const nih::Task* t : tasks)
        if (!t->takes_needle())
          throw std::invalid_argument(std::string("--needle rewords the pass key's needle; --task ") + t->name() +
                                      " has needles of its own; drop --needle or that task");
      nih::check_needle(o.needle);
    }
    specs = nih::parse_policies(o.policies, o.pot, o.keep);
    lengths = nih::parse_lengths(o.lengths, "--lengths");
    depths = nih::parse_depths(o.depths, "--depths");
    for (const std::string& spec : o.haystack_files) {
      const size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw std::invalid_argument("--haystack takes NAME=FILE (e.g. --haystack essays=essays.txt), got '" + spec + "'");
      const std::string name = spec.substr(0, eq);
      nih::parse_names(name, "--haystack");
      if (name == "passkey") throw std::invalid_argument("--haystack cannot redefine 'passkey' (the built-in template)");
      files[name] = spec.substr(eq + 1);
      if (std::find(added.begin(), added.end(), name) == added.end()) added.push_back(name);
    }
    if (!o.haystacks.empty()) {
      hay_names = nih::parse_names(o.haystacks, "--haystacks");
    } else {
      hay_names = {"passkey"};
      for (const auto& n : added)
        if (n != "passkey") hay_names.push_back(n);
    }
    for (const std::string& n : hay_names)
      if (n != "passkey" && !files.count(n)) {
        std::string known = "passkey";
        for (const auto& f : files) known += ", " + f.first;
        throw std::invalid_argument("--haystacks names '" + n + "', which is not a haystack; known: " + known +
                                    " (add one with --haystack NAME=FILE)");
      }
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(worded(e));
  }

  // Haystack texts: a file that cannot be used is an input error (exit 1), found before the model loads.
  std::vector<nih::Haystack> haystacks;
  for (const std::string& n : hay_names) {
    if (n == "passkey") {
      haystacks.push_back(nih::passkey_haystack());
      continue;
    }
    const std::string text = read_text_file(files[n], "haystack file");
    require_utf8(text, "haystack file '" + files[n] + "'");
    haystacks.push_back(nih::prose_haystack(n, text));
  }
  if (o.question_given) require_utf8(o.question, "--question");
  if (!o.needle.empty()) require_utf8(o.needle, "--needle");

  nih::Results res = nih::load_results(o.out);
  for (const auto& w : res.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  {  // a results file that cannot be written is found before hours of work, not after the first trial
    FILE* f = std::fopen(o.out.c_str(), "ab");
    if (!f) throw std::invalid_argument("cannot write the results file '" + o.out + "' (does its folder exist?); give --out another path");
    std::fclose(f);
  }

  Engine engine(engine_options(o.model, o.device, o.device_mem, o.chunk, o.kv_type));
  nih::resolve_positions(specs, engine.config().architecture);
  const int full_max = o.full_max > 0 ? o.full_max : engine.config().n_ctx_train;
  const std::string model_name = std::filesystem::path(o.model).filename().string();
  for (const auto& r : res.records)
    if (r.is_object() && r.contains("model") && r["model"] != model_name) {
      std::fprintf(stderr, "warning: %s holds results of another model (%s); trials are matched by policy, haystack, "
                   "length, depth, trial and seed only, so give each model its own --out\n", o.out.c_str(),
                   r["model"].dump().c_str());
      break;
    }

  // The plan: every (task, haystack, length, depth, trial) document, the policies still to run on it.
  // A trial asked in other words (--needle, --question) is another trial than the task's own.
  auto variant = [&](const nih::Task& t) { return nih::trial_variant(t.name(), o.needle, o.question_given ? o.question : ""); };
  std::vector<Cell> cells;
  size_t pending = 0, already = 0;
  long long tokens_left = 0;
  std::vector<std::string> skipped;
  for (const nih::Task* task : tasks) {
    for (size_t h = 0; h < haystacks.size(); ++h)
      for (int length : lengths) {
        for (const auto& s : specs)
          if (s.info().accepts(Setting::Ctx) && length > full_max && task == tasks[0])
            skipped.push_back(haystacks[h].name + " " + std::to_string(length) + " tokens");
        for (double depth : depths)
          for (int trial = 0; trial < o.trials; ++trial) {
            Cell c{task, h, length, depth, trial, {}};
            for (size_t p = 0; p < specs.size(); ++p) {
              if (specs[p].info().accepts(Setting::Ctx) && length > full_max) continue;
              if (res.done.count(nih::trial_id(specs[p].config(), haystacks[h].name, length, depth, trial, o.seed,
                                               task->name(), variant(*task)))) {
                ++already;
                continue;
              }
              c.todo.push_back(p);
              tokens_left += length;
            }
            pending += c.todo.size();
            if (!c.todo.empty()) cells.push_back(std::move(c));
          }
      }
  }
  if (!skipped.empty()) {
    std::string list;
    for (const auto& s : skipped) list += (list.empty() ? "" : ", ") + s;
    std::fprintf(stderr, "skipped: full above --full-max %d tokens (%s); raise --full-max to run them\n", full_max,
                 list.c_str());
  }
  std::fprintf(stderr, "nih: %zu trials to run, %zu already in %s (%zu tasks x %zu policies x %zu haystacks x %zu "
               "lengths x %zu depths x %d trials, seed %llu)\n", pending, already, o.out.c_str(), tasks.size(),
               specs.size(), haystacks.size(), lengths.size(), depths.size(), o.trials,
               static_cast<unsigned long long>(o.seed));

  Progress progress(progress_wanted(o.json));
  std::vector<std::unique_ptr<nih::DocumentBuilder>> builders;
  for (const auto& h : haystacks)
    builders.push_back(std::make_unique<nih::DocumentBuilder>(h, [&engine](const std::string& s) {
      return static_cast<int>(engine.tokenizer().encode(s, false, false).size());
    }));
  std::string device_name;
  size_t i = 0;
  double seconds = 0, last_tps = 0;
  long long tokens_read = 0;
  int answered = 0, found_n = 0, errors = 0;
  std::string first_error;  // told again at the end of a run that measured nothing
  std::set<std::pair<size_t, int>> warned_short;
  // Run order: per (task, haystack, length) and policy, the deepest needles first, so that their
  // reads hand the haystack prefix they share to the other trials (engine/prefix_forks.h).
  for (size_t g0 = 0, g1 = 0; g0 < cells.size(); g0 = g1) {
    while (g1 < cells.size() && cells[g1].task == cells[g0].task && cells[g1].hay == cells[g0].hay &&
           cells[g1].length == cells[g0].length)
      ++g1;
    const std::string& hay = haystacks[cells[g0].hay].name;
    const std::string task = cells[g0].task->name();
    std::vector<nih::Trial> trials;  // one per cell of the group
    for (size_t k = g0; k < g1; ++k) {
      const Cell& c = cells[k];
      nih::Trial tr = c.task->make({o.seed, hay, c.length, c.depth, c.trial, o.needle}, *builders[c.hay]);
      if (o.question_given) tr.question = o.question;
      if (std::abs(tr.doc.tokens - c.length) > std::max(1, c.length / 100) && warned_short.insert({c.hay, c.length}).second)
        progress.line("warning: " + hay + " documents of length " + std::to_string(c.length) + " have " +
                      std::to_string(tr.doc.tokens) + " tokens (the haystack's opening and the needle alone take "
                      "more); use longer --lengths");
      trials.push_back(std::move(tr));
    }
    for (size_t p = 0; p < specs.size(); ++p) {
      const nih::PolicySpec& s = specs[p];
      std::vector<size_t> order;  // cells of the group that still need this policy, deepest first
      for (size_t k = g0; k < g1; ++k)
        if (std::find(cells[k].todo.begin(), cells[k].todo.end(), p) != cells[k].todo.end()) order.push_back(k);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cells[a].depth > cells[b].depth; });
      // The answer's options for a trial of this policy (what its pot's settings come from).
      auto options_for = [&](const Cell& c, const nih::Trial& tr) {
        AnswerOptions ao;
        ao.n_predict = o.n_given ? o.n_predict : c.task->default_n_predict();
        ao.pot = s.options();
        ao.ctx = s.ctx;
        // CaP-G: answer() asks this text instead of the question (which still follows the document).
        if (s.general_catalyst) ao.catalyst = kGeneralCatalyst;
        if (s.oracle) ao.oracle = tr.watch;
        if (s.holds_pot()) ao.watch = tr.watch;
        ao.watch_attention = o.needle_attention;
        ao.pot_text = o.pot_text && s.holds_pot();
        return ao;
      };
      // The plans of the group's trials: a policy that sizes its store to the prompt (snapkv)
      // gets the largest of them for every trial, so that all have the same settings (and can
      // share a prefix; entries past a prompt stay empty and change nothing). A trial whose
      // plan fails is left out here and records its error when it runs.
      int whole_capacity = 0;
      bool plans_hold_a_pot = false;
      for (size_t k : order) {
        try {
          const PotPlan plan = answer_plan(engine, trials[k - g0].doc.text, trials[k - g0].question,
                                           options_for(cells[k], trials[k - g0]));
          whole_capacity = std::max(whole_capacity, plan.kv_capacity());
          plans_hold_a_pot = plans_hold_a_pot || plan.pot();
        } catch (const std::invalid_argument&) {
        }
      }
      std::unique_ptr<nih::PrefixForks> forks;
      if (o.share_prefix && order.size() > 1 && plans_hold_a_pot && !s.oracle) {
        std::vector<nih::PrefixForks::Trial> shared;
        for (size_t k : order) {
          const nih::Trial& tr = trials[k - g0];
          shared.push_back({s.config() + "\n" + tr.question, engine.prompt_parts("", tr.doc.text, tr.question).body});
        }
        forks = std::make_unique<nih::PrefixForks>(std::move(shared), s.pot);
      }
      for (size_t f = 0; f < order.size(); ++f) {
        const Cell& c = cells[order[f]];
        const nih::Trial& tr = trials[order[f] - g0];
        const nih::Document& doc = tr.doc;
        ++i;
        const double eta = tokens_read > 0 ? tokens_left / (tokens_read / seconds) : NAN;
        char head[512];
        std::snprintf(head, sizeof head, "[%zu/%zu] %s %s %s %d d=%s t=%d", i, pending, task.c_str(), s.config().c_str(),
                      hay.c_str(), c.length, depth_text(c.depth).c_str(), c.trial);
        progress.status(std::string(head) + " | found " + std::to_string(found_n) + "/" + std::to_string(answered) +
                        (errors ? " (" + std::to_string(errors) + " err)" : "") + " | last " +
                        (last_tps > 0 ? std::to_string(std::lround(last_tps)) : "?") + " tok/s | ETA " + fmt_duration(eta));

        AnswerOptions ao = options_for(c, tr);
        ao.whole_capacity = whole_capacity;
        const int n_predict = ao.n_predict;
        if (progress.enabled())
          ao.on_prefill = [&](const PrefillProgress& p) { progress.status(std::string(head) + " | " + prefill_status(p)); };

        // "key": the first reference (the pass key, the needle's value); "references": all of them.
        nlohmann::json r = {{"task", task},         {"haystack", hay},      {"length", c.length},
                            {"depth", c.depth},     {"trial", c.trial},     {"seed", o.seed},
                            {"key", tr.references[0]}, {"references", tr.references},
                            {"policy", s.name},     {"pot", s.pot},         {"keep", s.keep},
                            {"config", s.config()}, {"doc_tokens", doc.tokens}, {"needle_depth", doc.needle_depth},
                            {"n_predict", n_predict}, {"question", tr.question}, {"model", model_name}, {"version", "infinipot-nih-1"},
                            {"build", build_id()}};
        if (!o.needle.empty() && o.needle != nih::kNeedle) r["needle"] = o.needle;
        reset_peak_rss();
        const auto t0 = std::chrono::steady_clock::now();
        auto wall = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
        const double cpu0 = process_cpu_seconds();
        std::string outcome;
        // A trial that could not run: an error record, which a later run tries again.
        auto record_error = [&](const char* kind, const std::exception& e) {
          ++errors;
          r["error"] = std::string(kind) + ": " + worded(e);
          if (first_error.empty()) first_error = r["error"].get<std::string>();
          r["wall_s"] = wall();
          if (!device_name.empty()) r["device"] = device_name;
          outcome = std::string("error: ") + worded(e);
        };
        // Where the trial starts: a shared prefix (forks) or its own pot saved by a run that
        // stopped in it (--checkpoint-dir), whichever has read further. A saved pot is named
        // after the trial and after what else shapes it, so that it is never read on under
        // other ones: the chunk (the pot at a chunk boundary depends on the chunking), the KV
        // element type, the device (a record names one) and the build (a trial is read by one
        // binary: a checkpoint of another build is not resumed).
        std::string identity;
        if (s.holds_pot() && !o.checkpoint_dir.empty()) {
          const std::string dev = engine.device_name();  // opens the context: kv_half() is known after it
          identity = o.out + "\n" + model_name + "\n" +
                     nih::trial_id(s.config(), hay, c.length, c.depth, c.trial, o.seed, task, variant(*c.task)) +
                     "\nchunk " + std::to_string(engine.planned_chunk(s.pot)) + ", kv " +
                     (engine.kv_half() ? "f16" : "f32") + ", " + dev + ", build " + build_id();
        }
        nih::TrialCheckpoint ckpt(identity.empty() ? "" : o.checkpoint_dir, identity, o.checkpoint_every);
        std::string unreadable;
        std::shared_ptr<const PotSnapshot> from = forks ? forks->start(f) : nullptr;
        ao.resume_body = forks ? forks->start_body(f) : 0;
        if (const auto saved = ckpt.load(&unreadable)) {
          const int body = static_cast<int>(saved->tokens.size()) -
                           static_cast<int>(engine.prompt_parts("", doc.text, tr.question).prefix.size());
          if (body > ao.resume_body) {
            from = saved;
            ao.resume_body = body;
            r["checkpoint_at"] = body;
          }
        }
        if (!unreadable.empty()) progress.line("warning: removed the unreadable checkpoint " + ckpt.path() + ": " + unreadable);
        ao.resume = from.get();
        if (forks || ckpt.enabled()) {
          ao.after_chunk = [&](int done, const std::function<PotSnapshot()>& capture) {
            std::shared_ptr<const PotSnapshot> snap;
            if (forks && forks->wants(f, done)) forks->offer(f, done, snap = std::make_shared<const PotSnapshot>(capture()));
            if (ckpt.due()) {
              ckpt.save(snap ? *snap : capture());
              if (o.checkpoint_stop > 0 && ckpt.saves() >= o.checkpoint_stop) std::_Exit(75);  // as a killed run: no cleanup
            }
          };
          // The document tokens this trial did not read itself (0: it read them all).
          r["resumed_at"] = ao.resume_body;
        }
        try {
          const Answer a = answer(engine, doc.text, tr.question, ao);
          const GenerateResult& g = a.result;
          device_name = engine.context().device().name;
          const nih::Score sc = c.task->score(g.text, tr.references);
          const bool found = sc.found;
          ++answered;
          found_n += found;
          const nlohmann::json mem = engine.memory_report();
          r["prompt_tokens"] = g.prompt_tokens;
          r["answer"] = g.text;
          r["found"] = found;
          r["score"] = sc.fraction;
          r["ccd_cycles"] = a.pot.is_object() ? a.pot.value("cycles", 0) : 0;
          if (a.pot.is_object() && a.pot.contains("keep")) r["keep"] = a.pot["keep"];
          if (a.pot.is_object() && a.pot.value("keep_auto", false)) r["kept_mean"] = a.pot["kept_mean"];  // --keep auto varies it
          // What the ablations change, as the pot saw it: CaP-G's catalyst is another length than
          // the question's; without CR-RoPE the highest position runs past the pot's size.
          if (a.pot.is_object() && a.pot.contains("catalyst_tokens")) r["catalyst_tokens"] = a.pot["catalyst_tokens"];
          if (a.pot.is_object() && a.pot.contains("max_position")) r["max_position"] = a.pot["max_position"];
          if (a.pot.is_object() && a.pot.contains("digest")) r["pot_digest"] = a.pot["digest"];
          if (a.pot.is_object() && a.pot.contains("watch") && a.pot["watch"].contains("kept_fraction"))
            r["needle_kept"] = a.pot["watch"]["kept_fraction"];
          if (a.pot.is_object() && a.pot.contains("held")) r["pot_text"] = a.pot["held"]["text"];
          if (a.pot.is_object() && a.pot.contains("watch") && a.pot["watch"].contains("question_attention"))
            r["needle_attention"] = a.pot["watch"]["question_attention"];
          r["ttft_s"] = g.ttft_s;
          // Over the tokens this trial read itself (a resumed trial skips the shared prefix).
          r["prefill_tok_s"] = g.prefill_s > 0 ? (g.prompt_tokens - ao.resume_body) / g.prefill_s : 0.0;
          r["peak_device_bytes"] = mem.value("peak", uint64_t(0));
          r["host_peak_rss"] = host_peak_rss();  // since this trial began
          r["kv_capacity"] = a.kv_capacity;
          r["wall_s"] = wall();
          r["cpu_s"] = process_cpu_seconds() - cpu0;  // the trial's own work, pauses excluded
          r["device"] = device_name;
          last_tps = r["prefill_tok_s"].get<double>();
          std::string shown = g.text.substr(0, 40);
          for (char& ch : shown)
            if (ch == '\n' || ch == '\r') ch = ' ';
          std::string refs;
          for (const auto& x : tr.references) refs += (refs.empty() ? "" : ", ") + x;
          outcome = std::string(found ? "found" : "missed") + " (" + std::to_string(sc.present) + "/" +
                    std::to_string(sc.total) + " of " + refs + ", answer \"" + shown + "\")";
        } catch (const cl::BudgetError& e) {
          record_error("budget", e);
        } catch (const std::invalid_argument& e) {
          record_error("refused", e);
        } catch (const std::logic_error& e) {
          // A checkpoint another build saved (other pot settings, another prompt): recorded as
          // an error, the file goes, and the next run reads the trial from its start.
          if (!r.contains("checkpoint_at")) throw;
          record_error("checkpoint", e);
        }
        nih::append_result(o.out, r);
        ckpt.remove();
        if (forks) forks->finished(f);
        seconds += r["wall_s"].get<double>();
        tokens_read += c.length - ao.resume_body;
        tokens_left -= c.length;
        if (!progress.enabled() || r.contains("error")) {
          char tail[160];
          std::snprintf(tail, sizeof tail, " | %.1f s, %.0f tok/s | ETA %s", r["wall_s"].get<double>(), last_tps,
                        fmt_duration(tokens_left / (tokens_read / seconds)).c_str());
          progress.line(std::string(head) + ": " + outcome + (r.contains("error") ? "" : tail));
        }
      }
    }
  }
  progress.done();
  if (pending > 0)
    std::fprintf(stderr, "nih: this run found the answer in %d of %d answers%s\n", found_n, answered,
                 errors ? (", and " + std::to_string(errors) + " trials ended in an error (the `error` field in " + o.out +
                           "; a rerun tries them again)").c_str() : "");
  if (!o.json) std::cout << "\n";
  print_summary(o.out, o.json, false);
  // A run that measured nothing fails (exit 1), so scripts notice; some errors among
  // answers (a refused full cache, say) are results, recorded in the file.
  if (pending > 0 && static_cast<size_t>(errors) == pending)
    throw std::runtime_error("nih: all " + std::to_string(errors) + " trials of this run ended in an error (the " +
                             "`error` field in " + o.out + " says why); nothing was measured. The first: " +
                             first_error);
}

}  // namespace

void add_nih_command(CLI::App& app) {
  auto* sub = app.add_subcommand("nih", "Needle-in-a-haystack benchmarks (pass key, RULER-style tasks) of the KV "
                                 "policies (JSONL + tables)");
  auto o = std::make_shared<NihOpts>();
  sub->add_option("-m,--model", o->model, "GGUF model file");
  sub->add_option("--policy", o->policies, "Comma list of KV policies, each NAME or NAME:pot=N:keep=K:nuc_ratio=A:"
                  "pool=P:ahead=F:recent=R:units=word|plain|alnum|token:... (" + policy_names(", ") +
                  "; every setting: the error message of a wrong one)")->capture_default_str();
  sub->add_option("--pot", o->pot, "Pot size (KV entries) for entries that give no pot=N")->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  add_keep_option(sub, &o->keep, "Entries kept at a distillation for entries that give no keep=K (default: pot / 2)");
  std::string task_help = "Comma list of tasks (records and tables are per task):";
  for (const auto& t : nih::tasks())
    task_help += std::string("\n  ") + t->name() + ": " + t->summary() + " (-n " +
                 std::to_string(t->default_n_predict()) + ")";
  sub->add_option("--task", o->tasks, task_help)->capture_default_str();
  sub->add_option("--lengths", o->lengths, "Comma list of document lengths in tokens (4096 or 4K)")->capture_default_str();
  sub->add_option("--depths", o->depths, "Comma list of needle depths, fractions of the document in [0, 1]")
      ->capture_default_str();
  sub->add_option("--trials", o->trials, "Documents (keys) per length and depth")->capture_default_str();
  sub->add_option("--haystacks", o->haystacks, "Comma list of haystacks: passkey (the usual filler template), prose "
                  "(KJV Genesis), alice (Alice in Wonderland), or names given with --haystack (default: passkey and "
                  "those)");
  sub->add_option("--haystack", o->haystack_files, "NAME=FILE: a UTF-8 prose file to use as haystack NAME "
                  "(cycled when shorter than a length); repeatable")->take_all();
  sub->add_option("-n,--n-predict", o->n_predict, "Most tokens to generate per answer (default: the task's)");
  sub->add_option("--seed", o->seed, "Seed of the pass keys (every policy sees the same documents)")
      ->capture_default_str()->check(CLI::Validator(
          [](std::string& s) { return s.find('-') == std::string::npos ? std::string() : "a seed is a whole number >= 0, got " + s; },
          "", "non-negative"));
  sub->add_option("--question", o->question, std::string("The question asked after the document, for tasks whose "
                  "question names no trial value (passkey: \"") + nih::kQuestion + "\")");
  sub->add_option("--needle", o->needle, std::string("The pass key's needle in other words, with {key} where the key "
                  "goes (default: \"") + nih::kNeedle + "\"); trials and tables keep each wording apart");
  sub->add_option("--full-max", o->full_max, "Skip policy full above this many tokens (0: the model's training "
                  "context)")->capture_default_str();
  sub->add_option("--out", o->out, "Results, one JSON line per trial; trials already there are skipped")
      ->capture_default_str();
  sub->add_option("--device-mem", o->device_mem, "Hard cap on device memory, e.g. 256M, 1.5G (default: device's global memory)")
      ->check(byte_size_validator());
  sub->add_option("--device", o->device, "OpenCL device: index or name substring (default: first GPU, else CPU)");
  sub->add_option("--kv-type", o->kv_type, "KV store element type: auto (f16 with cl_khr_fp16, else f32), f16, f32")
      ->capture_default_str()->check(CLI::IsMember({"auto", "f16", "f32"}));
  sub->add_option("--chunk", o->chunk, "Prefill chunk in tokens (default: from platforms/)")->check(CLI::Range(1, 1 << 16));
  sub->add_flag("--no-prefix-sharing{false}", o->share_prefix, "Read every document from its start, instead of "
               "resuming trials that share a document prefix from a snapshot of the pot (the same results, slower)");
  sub->add_option("--checkpoint-dir", o->checkpoint_dir, "Save each trial's pot under DIR every --checkpoint-every "
                  "seconds of reading, and start a trial that a stopped run left unfinished from its last save (long "
                  "cells across restarts; the same records as a whole read); a trial's file goes once it is recorded");
  sub->add_option("--checkpoint-every", o->checkpoint_every, "Seconds of reading between a trial's saves under "
                  "--checkpoint-dir")->capture_default_str()->check(CLI::Range(0.0, 1e9));
  sub->add_option("--checkpoint-stop", o->checkpoint_stop, "Tests: exit with code 75 after this many saves")
      ->group("");
  sub->add_flag("--needle-attention", o->needle_attention, "Record the share of the question's attention (CaP's "
                "measure) on the needle once the document is read, per layer (field needle_attention; diagnostics)");
  sub->add_flag("--pot-text", o->pot_text, "Record the text each pot holds at the end (field pot_text; diagnostics)");
  sub->add_flag("--table-only", o->table_only, "Only print the tables of the results already in --out");
  sub->add_flag("--json", o->json, "Print the summary as JSON instead of Markdown tables");
  sub->callback([o, sub] {
    o->n_given = sub->count("-n") > 0;
    o->question_given = sub->count("--question") > 0;
    o->needle_given = sub->count("--needle") > 0;
    nih_command(*o);
  });
}

}  // namespace infinipot::cli
