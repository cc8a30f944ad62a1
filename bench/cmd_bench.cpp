// infinipot bench: speed and memory under fixed device-memory caps. Sweeps context lengths,
// policies, pot sizes and --device-mem caps in one command; each row reads a real document
// (a prose haystack with a pass key in the middle) of that many tokens and answers -n tokens,
// --reps times (median, min, max). Rows: prefill tok/s, time to first token, decode tok/s,
// the pot's distillation time and its share of TTFT, peak device bytes per category, host
// peak RSS. --pot auto takes the largest pot the cap allows. --vs-llama-cpp DIR puts
// llama.cpp (same GGUF, same threads, full KV cache) beside each length: llama-bench, or
// llama-completion on the same document with one prefill per length (--llama-cpp-tool).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "engine/answer.h"
#include "engine/nih.h"
#include "pot/policy_registry.h"
#include "runtime/device_memory.h"
#include "tools/cli_common.h"
#include "tools/host_usage.h"
#include "bench/llama_cpp_runner.h"
#include "tools/progress.h"

namespace infinipot::cli {
nlohmann::json bench_gemm(cl::Context& ctx, int reps, int m);  // bench/bench_gemm.cpp
nlohmann::json bench_attention(const std::string& device, int reps, int n_heads, int n_kv_heads, int head_dim,
                               int chunk, const std::vector<int>& pasts);  // bench/bench_attention.cpp
nlohmann::json bench_matvec(Engine& engine, int reps);  // bench/bench_matvec.cpp
namespace {

struct BenchOpts {
  std::string model, ctx = "4096", policies = default_policy(true), pots = "1024", caps, haystack, device, kv_type = "auto";
  std::string out, llama_dir, llama_tool = "llama-bench", llama_resume;
  int n_predict = 32, reps = 1, chunk = 0, threads = 0, llama_stages = 0;
  bool only_llama = false, json = false, warmup = true, gemm = false, attention = false, matvec = false;
};

struct Stat {
  double median = 0, min = 0, max = 0;
};
Stat stat_of(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return {v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2, v.front(), v.back()};
}
nlohmann::json to_json(const Stat& s) { return {{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

// "1024,auto" -> pot sizes; 0 stands for auto.
std::vector<int> parse_pots(const std::string& list) {
  std::vector<int> out;
  for (const std::string& e : nih::parse_names(list, "--pot")) {
    if (e == "auto") {
      out.push_back(0);
      continue;
    }
    const auto n = nih::parse_lengths(e, "--pot");
    out.push_back(n.front());
  }
  return out;
}

// "256M,1G" -> byte caps; "" -> one row at the device's own memory (0).
std::vector<uint64_t> parse_caps(const std::string& list) {
  if (list.empty()) return {0};
  std::vector<uint64_t> out;
  for (const std::string& e : nih::parse_names(list, "--device-mem")) {
    uint64_t b = 0;
    try {
      b = cl::parse_byte_size(e);
    } catch (const std::exception&) {
    }
    if (b == 0) throw std::invalid_argument("--device-mem takes a comma list of sizes like 256M or 1.5G, got '" + e + "'");
    out.push_back(b);
  }
  return out;
}

std::string cap_text(uint64_t cap) { return cap ? cl::format_bytes(cap) : "device"; }

struct RowSpec {
  int ctx;
  uint64_t cap;
  PolicySpec policy;  // its pot: 0 is auto (pot policies) or none (full)
};

// A row's policy as the table and the records name it: the spec without its pot (a column of
// its own), e.g. "infinipot", "infinipot:nuc_stride=4", "h2o:keep=512", "full".
std::string policy_label(const PolicySpec& p) {
  if (!p.holds_pot()) return p.config();
  const std::string c = p.config(), head = p.name + ":pot=" + std::to_string(p.pot);
  return p.name + c.substr(head.size());
}

// One measured row: the figures of `reps` answers to the same question about the same document.
nlohmann::json run_row(const BenchOpts& o, const RowSpec& spec, const nih::Document& doc, Progress& progress,
                       const std::string& head) {
  const bool sized_by_pot = spec.policy.holds_pot();
  nlohmann::json row = {{"ctx", spec.ctx},
                        {"prompt_tokens", nullptr},
                        {"policy", spec.policy.name},
                        {"policy_config", policy_label(spec.policy)},
                        {"pot", sized_by_pot ? nlohmann::json(spec.policy.pot) : nlohmann::json(nullptr)},
                        {"device_mem", spec.cap},
                        {"n_decode", o.n_predict},
                        {"reps", o.reps}};
  Engine engine(engine_options(o.model, o.device, spec.cap ? std::to_string(spec.cap) : "", o.chunk, o.kv_type));
  AnswerOptions ao;
  ao.n_predict = o.n_predict;
  ao.ignore_eos = true;
  ao.pot = spec.policy.options();
  if (sized_by_pot && spec.policy.pot == 0) {
    PotChoice choice;
    choice.pot = ao.pot;
    const PotPlan draft =
        PotPlan::draft(engine, engine.prompt_parts("", doc.text, nih::kQuestion), nih::kQuestion, choice, o.n_predict);
    // A pot larger than the whole prompt never distills: the document's own size bounds it.
    const PotLayout& L = draft.layout();
    const int pot = engine.largest_pot(draft, L.pinned + L.catalyst + L.body + L.final_tokens);
    if (pot == 0) {
      row["error"] = "no pot fits --device-mem " + cap_text(spec.cap) + " beside the weights and activations";
      return row;
    }
    row["pot"] = pot;
    row["pot_auto"] = true;
    ao.pot.capacity = pot;
  }
  std::vector<double> prefill, decode, ttft, cd, share;
  nlohmann::json last_mem, last_pot;
  int cycles = 0, kv_capacity = 0, prompt_tokens = 0;
  bool found = false;
  reset_peak_rss();
  for (int r = 0; r < o.reps; ++r) {
    const std::string rep_head = head + (o.reps > 1 ? " rep " + std::to_string(r + 1) + "/" + std::to_string(o.reps) : "");
    if (progress.enabled())
      ao.on_prefill = [&](const PrefillProgress& p) { progress.status(rep_head + " | " + prefill_status(p)); };
    Answer a;
    try {
      a = answer(engine, doc.text, nih::kQuestion, ao);
    } catch (const cl::BudgetError& e) {
      row["error"] = std::string("does not fit: ") + worded(e);
      row["min_device_mem"] = e.minimum_bytes();
      return row;
    }
    const GenerateResult& g = a.result;
    prompt_tokens = g.prompt_tokens;
    prefill.push_back(g.prefill_s > 0 ? g.prompt_tokens / g.prefill_s : 0);
    decode.push_back(g.decode_s > 0 && g.tokens.size() > 1 ? (g.tokens.size() - 1) / g.decode_s : 0);
    ttft.push_back(g.ttft_s);
    double cd_s = 0;
    if (a.pot.is_object()) {
      cd_s = a.pot.value("catalyst_s", 0.0) + a.pot.value("novelty_s", 0.0) + a.pot.value("compact_s", 0.0);
      cycles = a.pot.value("cycles", 0);
      last_pot = a.pot;
    }
    cd.push_back(cd_s);
    share.push_back(g.ttft_s > 0 ? cd_s / g.ttft_s : 0);
    kv_capacity = a.kv_capacity;
    found = nih::key_found(g.text, doc.key);
    last_mem = engine.memory_report();
  }
  nlohmann::json by_cat = nlohmann::json::object();
  for (auto it = last_mem["by_category"].begin(); it != last_mem["by_category"].end(); ++it)
    by_cat[it.key()] = it.value()["peak"];
  const Stat p = stat_of(prefill), d = stat_of(decode), t = stat_of(ttft), c = stat_of(cd), s = stat_of(share);
  row["prompt_tokens"] = prompt_tokens;
  row["prefill_tok_s"] = p.median;
  row["decode_tok_s"] = d.median;
  row["ttft_s"] = t.median;
  row["cd_time_s"] = c.median;
  row["cd_share_of_ttft"] = s.median;
  row["stats"] = {{"prefill_tok_s", to_json(p)}, {"decode_tok_s", to_json(d)}, {"ttft_s", to_json(t)},
                  {"cd_time_s", to_json(c)}};
  if (last_pot.is_object())
    row["cd_split_s"] = {{"catalyst", last_pot.value("catalyst_s", 0.0)}, {"novelty", last_pot.value("novelty_s", 0.0)},
                         {"selection_compaction_rerotation", last_pot.value("compact_s", 0.0)}};
  if (last_pot.is_object()) row["pot_report"] = last_pot;  // the pot the last rep ran: its settings and times
  row["ccd_cycles"] = cycles;
  row["kv_capacity"] = kv_capacity;
  row["peak_device_bytes"] = last_mem.value("peak", uint64_t(0));
  row["device_mem_budget"] = last_mem.value("budget", uint64_t(0));
  row["device_bytes"] = by_cat;
  row["host_peak_rss"] = host_peak_rss();
  row["key_found"] = found;
  // What the cap allows a full KV cache: the longest prompt + answer it can hold.
  row["longest_full_cache_ctx"] = engine.largest_full_cache(1 << 24);
  row["device"] = engine.context().device().name;
  row["build"] = build_id();
  return row;
}

std::string fmt_tps(const nlohmann::json& row, const char* key) {
  if (!row.contains(key) || !row[key].is_number()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", row[key].get<double>());
  return b;
}

std::string fmt_bytes(const nlohmann::json& v) { return v.is_number() ? cl::format_bytes(v.get<uint64_t>()) : "-"; }

// llama-bench-like Markdown table, then one line per cap on what filled its memory.
void print_table(const std::vector<nlohmann::json>& rows) {
  std::printf("| %7s | %-10s | %6s | %10s | %13s | %12s | %8s | %16s | %11s | %11s | %11s |\n", "ctx", "policy", "pot",
              "device_mem", "prefill tok/s", "decode tok/s", "TTFT s", "distill s (%TTFT)", "peak device",
              "kv_cache", "host RSS");
  std::printf("| %7s | %-10s | %6s | %10s | %13s | %12s | %8s | %16s | %11s | %11s | %11s |\n", "------:", "----------",
              "-----:", "---------:", "------------:", "-----------:", "-------:", "---------------:", "----------:",
              "----------:", "----------:");
  auto name = [](const nlohmann::json& r) { return r.value("policy_config", r["policy"].get<std::string>()); };
  for (const auto& r : rows) {
    const bool llama = r.value("engine", "") == "llama.cpp";
    std::string pot = r["pot"].is_number() ? std::to_string(r["pot"].get<int>()) + (r.value("pot_auto", false) ? "*" : "")
                                           : "-";
    if (r.contains("error")) {
      std::printf("| %7d | %-10s | %6s | %10s | %s |\n", r["ctx"].get<int>(), name(r).c_str(),
                  pot.c_str(), llama ? "-" : cap_text(r["device_mem"].get<uint64_t>()).c_str(),
                  r["error"].get<std::string>().substr(0, 160).c_str());
      continue;
    }
    char ttft[32], cd[48];
    std::snprintf(ttft, sizeof ttft, "%.2f", r["ttft_s"].get<double>());
    if (r.contains("cd_time_s") && r["ccd_cycles"].get<int>() > 0)
      std::snprintf(cd, sizeof cd, "%.2f (%.1f%%)", r["cd_time_s"].get<double>(),
                    100 * r["cd_share_of_ttft"].get<double>());
    else std::snprintf(cd, sizeof cd, "-");
    std::printf("| %7d | %-10s | %6s | %10s | %13s | %12s | %8s | %16s | %11s | %11s | %11s |\n", r["ctx"].get<int>(),
                name(r).c_str(), pot.c_str(),
                llama ? "-" : cap_text(r["device_mem"].get<uint64_t>()).c_str(), fmt_tps(r, "prefill_tok_s").c_str(),
                fmt_tps(r, "decode_tok_s").c_str(), ttft, cd, llama ? "-" : fmt_bytes(r["peak_device_bytes"]).c_str(),
                llama ? "-" : fmt_bytes(r["device_bytes"].value("kv_cache", nlohmann::json())).c_str(),
                fmt_bytes(r["host_peak_rss"]).c_str());
  }
  bool any_auto = false;
  for (const auto& r : rows) any_auto = any_auto || r.value("pot_auto", false);
  if (any_auto) std::printf("\n* --pot auto: the largest pot the cap allows (beside weights, activations and scratch)\n");
  for (const auto& r : rows) {
    if (r.contains("error") || r.value("engine", "") == "llama.cpp" || !r.contains("device_bytes")) continue;
    std::string top;
    uint64_t best = 0;
    for (auto it = r["device_bytes"].begin(); it != r["device_bytes"].end(); ++it)
      if (it.value().get<uint64_t>() > best) best = it.value().get<uint64_t>(), top = it.key();
    const uint64_t peak = r["peak_device_bytes"].get<uint64_t>();
    if (peak > 0)
      std::printf("ctx %d %s pot %s cap %s: %s holds %.0f%% of the %s peak\n", r["ctx"].get<int>(),
                  name(r).c_str(), r["pot"].is_number() ? std::to_string(r["pot"].get<int>()).c_str() : "-",
                  cap_text(r["device_mem"].get<uint64_t>()).c_str(), top.c_str(), 100.0 * best / peak,
                  cl::format_bytes(peak).c_str());
  }
}

// --out: the rows as one JSON list (written whole, so a failed write is an error, not a
// truncated file).
void write_out(const BenchOpts& o, const nlohmann::json& rows) {
  if (o.out.empty()) return;
  FILE* f = std::fopen(o.out.c_str(), "w");
  if (!f) throw std::invalid_argument("cannot write --out '" + o.out + "'");
  const std::string dump = rows.dump(1) + "\n";
  const bool ok = std::fwrite(dump.data(), 1, dump.size(), f) == dump.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error("writing --out '" + o.out + "' failed");
}

// --gemm: the GEMM backends on this device instead of the sweep.
void bench_gemm_only(const BenchOpts& o) {
  Engine engine(engine_options(o.model, o.device, "", o.chunk, o.kv_type));
  engine.prepare(64);
  const nlohmann::json rows = bench_gemm(engine.context(), o.reps, 512);
  write_out(o, rows);
  if (o.json) {
    std::cout << rows.dump(1) << std::endl;
    return;
  }
  std::printf("GEMM on %s (median of %d)\n| backend  |    m |    n |    k |  GFLOP/s |\n| -------- | ---: | ---: | ---: | -------: |\n",
              engine.context().device().name.c_str(), o.reps);
  for (const auto& g : rows)
    std::printf("| %-8s | %4d | %4d | %4d | %8.1f |\n", g["backend"].get<std::string>().c_str(), g["m"].get<int>(),
                g["n"].get<int>(), g["k"].get<int>(), g["gflops"].get<double>());
}

// --matvec: the decode products on this device instead of the sweep.
void bench_matvec_only(const BenchOpts& o) {
  Engine engine(engine_options(o.model, o.device, "", o.chunk, o.kv_type));
  engine.prepare(64);
  const nlohmann::json rows = bench_matvec(engine, o.reps);
  write_out(o, rows);
  if (o.json) {
    std::cout << rows.dump(1) << std::endl;
    return;
  }
  std::printf("Decode products (one input row) on %s: us per product over every layer in turn (median of %d runs)\n"
              "| path  | product   | type |  rows |  cols |      us |  min us |  GB/s |\n"
              "| ----- | --------- | ---- | ----: | ----: | ------: | ------: | ----: |\n",
              engine.context().device().name.c_str(), o.reps);
  for (const auto& r : rows)
    std::printf("| %-5s | %-9s | %-4s | %5d | %5d | %7.1f | %7.1f | %5.2f |\n", r["path"].get<std::string>().c_str(),
                r["product"].get<std::string>().c_str(), r["type"].get<std::string>().c_str(), r["rows"].get<int>(),
                r["cols"].get<int>(), r["seconds"].get<double>() * 1e6, r["seconds_min"].get<double>() * 1e6,
                r["gbps"].get<double>());
}

// --attention: the prefill attention variants on this device, at the model's head shape.
void bench_attention_only(const BenchOpts& o) {
  Engine engine(engine_options(o.model, o.device, "", o.chunk, o.kv_type));  // the model's shape only
  const auto& cfg = engine.config();
  const int chunk = o.chunk > 0 ? o.chunk : 512;
  const std::vector<int> pasts = nih::parse_lengths(o.ctx, "--ctx");
  const nlohmann::json rows =
      bench_attention(o.device, o.reps, cfg.n_head, cfg.n_head_kv, cfg.head_dim, chunk, pasts);
  write_out(o, rows);
  if (o.json) {
    std::cout << rows.dump(1) << std::endl;
    return;
  }
  std::printf("Prefill attention on %s: %d query rows after n_past cached fp32 entries, %d/%d heads of %d (median of %d)\n"
              "| variant      | n_past |  seconds | GFLOP/s |\n| ------------ | -----: | -------: | ------: |\n",
              rows.empty() ? "" : rows[0]["device"].get<std::string>().c_str(), chunk, cfg.n_head, cfg.n_head_kv, cfg.head_dim, o.reps);
  for (const auto& r : rows)
    std::printf("| %-12s | %6d | %8.4f | %7.2f |\n", r["variant"].get<std::string>().c_str(), r["n_past"].get<int>(),
                r["seconds"].get<double>(), r["gflops"].get<double>());
}

void bench(const BenchOpts& o) {
  if (o.reps < 1) throw CLI::ValidationError("-r/--reps must be at least 1, got " + std::to_string(o.reps));
  if (int(o.gemm) + int(o.attention) + int(o.matvec) > 1)
    throw CLI::ValidationError("--gemm, --attention and --matvec each replace the sweep; give one");
  if (o.gemm) return bench_gemm_only(o);
  if (o.matvec) return bench_matvec_only(o);
  if (o.attention) return bench_attention_only(o);
  if (o.n_predict < 2) throw CLI::ValidationError("-n must be at least 2 (decode speed needs two tokens), got " + std::to_string(o.n_predict));
  std::vector<int> ctxs;
  std::vector<int> pots;
  std::vector<uint64_t> caps;
  std::vector<PolicySpec> policies;
  try {
    ctxs = nih::parse_lengths(o.ctx, "--ctx");
    pots = parse_pots(o.pots);
    caps = parse_caps(o.caps);
    // 1 stands for the pot of a spec that names none: its rows take --pot's sizes instead.
    policies = nih::parse_policies(o.policies, 1, 0);
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(worded(e));
  }
  if (!o.llama_resume.empty() && o.llama_tool != "llama-completion")
    throw CLI::ValidationError("--llama-cpp-resume: stages go through llama-completion's prompt cache; add "
                               "--llama-cpp-tool llama-completion");
  if (!o.llama_resume.empty() && o.reps != 1)
    throw CLI::ValidationError("--llama-cpp-resume: one staged run per length; drop --reps (" +
                               std::to_string(o.reps) + ")");
  if (!o.llama_dir.empty()) require_llama_tool(o.llama_dir, o.llama_tool);

  std::vector<RowSpec> specs;
  for (int ctx : o.only_llama ? std::vector<int>{} : ctxs)
    for (uint64_t cap : caps)
      for (const PolicySpec& p : policies) {
        // A spec that names its pot (infinipot:pot=2048) is that row alone; the others sweep --pot.
        std::vector<PolicySpec> sized;
        if (!p.holds_pot() || (p.given & bit(Setting::Pot))) sized.push_back(p);
        else
          for (int pot : pots) {
            sized.push_back(p);
            sized.back().pot = pot;
          }
        for (const PolicySpec& q : sized)
          if (std::none_of(specs.begin(), specs.end(), [&](const RowSpec& r) {
                return r.ctx == ctx && r.cap == cap && r.policy.config() == q.config();
              }))
            specs.push_back({ctx, cap, q});
      }

  const std::string hay_file = o.haystack.empty() ? data_path("data/perplexity.txt") : o.haystack;
  const std::string hay_text = read_text_file(hay_file, "--haystack");
  require_utf8(hay_text, "--haystack '" + hay_file + "'");
  Engine tokens_engine(engine_options(o.model, o.device, "", o.chunk, o.kv_type));
  nih::DocumentBuilder builder(nih::prose_haystack("bench", hay_text), [&](const std::string& s) {
    return static_cast<int>(tokens_engine.tokenizer().encode(s, false, false).size());
  });

  Progress progress(progress_wanted(o.json));
  if (o.warmup && !specs.empty()) {
    // Compiles every kernel (the pot's too) once, so the first row does not pay for it.
    progress.status("warm-up: compiling kernels");
    const nih::Document d = builder.build(384, 0.5, "12345");
    Engine e(engine_options(o.model, o.device, "", o.chunk, o.kv_type));
    AnswerOptions ao;
    ao.n_predict = 2;
    ao.pot.capacity = 256;
    (void)answer(e, d.text, nih::kQuestion, ao);
    ao.pot.policy = default_policy(false);
    (void)answer(e, d.text, nih::kQuestion, ao);
  }

  std::vector<nlohmann::json> rows;
  // One document per length, shared by every row of that length and by llama.cpp's.
  std::map<int, nih::Document> docs;
  auto doc_for = [&](int ctx) -> const nih::Document& {
    if (!docs.count(ctx)) docs.emplace(ctx, builder.build(ctx, 0.5, nih::derive_key(1, "bench", ctx, 0.5, 0)));
    return docs.at(ctx);
  };
  size_t i = 0;
  for (const RowSpec& s : specs) {
    ++i;
    const std::string head = "[" + std::to_string(i) + "/" + std::to_string(specs.size()) + "] ctx " +
                             std::to_string(s.ctx) + " " + policy_label(s.policy) + (!s.policy.holds_pot() ? "" : " pot " +
                             (s.policy.pot ? std::to_string(s.policy.pot) : std::string("auto"))) + " cap " + cap_text(s.cap);
    progress.status(head);
    nlohmann::json row = run_row(o, s, doc_for(s.ctx), progress, head);
    if (!o.json) {
      const std::string what = row.contains("error") ? "error: " + row["error"].get<std::string>().substr(0, 200)
                                                     : "prefill " + fmt_tps(row, "prefill_tok_s") + " tok/s, decode " +
                                                           fmt_tps(row, "decode_tok_s") + " tok/s, peak " +
                                                           fmt_bytes(row["peak_device_bytes"]);
      progress.line(head + ": " + what);
    }
    rows.push_back(std::move(row));
  }
  if (!o.llama_dir.empty()) {
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int ctx : ctxs) {
      progress.status("llama.cpp " + o.llama_tool + " ctx " + std::to_string(ctx));
      LlamaCppRow l;
      if (o.llama_tool == "llama-completion") {
        const std::string prompt = (std::filesystem::temp_directory_path() /
                                    ("infinipot-bench-" + std::to_string(getpid()) + "-" + std::to_string(ctx) + ".txt"))
                                       .string();
        struct RemovedAtExit {  // whichever way this scope ends
          const std::string& path;
          ~RemovedAtExit() { std::remove(path.c_str()); }
        } removed{prompt};
        if (!(std::ofstream(prompt, std::ios::binary) << doc_for(ctx).text))
          throw std::runtime_error("cannot write llama-completion's prompt file " + prompt);
        if (o.llama_resume.empty()) {
          l = run_llama_completion(o.llama_dir, o.model, prompt, ctx, o.n_predict, o.reps, threads);
        } else {
          // One stage per 8K tokens by default: the most a killed run loses is one stage.
          const int stages = o.llama_stages > 0 ? o.llama_stages : std::max(2, (ctx + 8191) / 8192);
          const std::string state = o.llama_resume + "/ctx-" + std::to_string(ctx);
          try {
            l = run_llama_completion_staged(o.llama_dir, o.model, prompt, ctx, o.n_predict, threads, state, stages,
                                            [&](const std::string& s) { progress.status(s); });
          } catch (const std::invalid_argument& e) {
            throw CLI::ValidationError(worded(e));
          }
        }
      } else {
        l = run_llama_bench(o.llama_dir, o.model, ctx, o.n_predict, o.reps, threads);
      }
      nlohmann::json row = {{"engine", "llama.cpp"}, {"ctx", ctx}, {"policy", "llama.cpp"}, {"pot", nullptr},
                            {"device_mem", 0}, {"n_decode", o.n_predict}, {"reps", o.reps}, {"threads", threads},
                            {"tool", o.llama_tool}, {"prefill_cmd", l.prefill_cmd}, {"decode_cmd", l.decode_cmd}};
      if (l.stages > 0) {  // a staged prefill: the commands are its last stage's
        row["stages"] = l.stages;
        row["cpu_share"] = l.cpu_share;
      }
      if (l.prompt_tokens > 0) row["prompt_tokens"] = l.prompt_tokens;
      if (!l.error.empty()) row["error"] = l.error;
      else {
        row["prefill_tok_s"] = l.prefill_tok_s;
        row["decode_tok_s"] = l.decode_tok_s;
        row["ttft_s"] = l.ttft_s;
        row["host_peak_rss"] = l.peak_rss_bytes;
        row["peak_device_bytes"] = nullptr;  // its CPU backend has no device: host RSS is its footprint
        for (auto& r : rows)
          if (r["ctx"] == ctx && !r.contains("error") && r.value("engine", "") != "llama.cpp") {
            r["prefill_vs_llama_cpp"] = r["prefill_tok_s"].get<double>() / l.prefill_tok_s;
            r["decode_vs_llama_cpp"] = r["decode_tok_s"].get<double>() / l.decode_tok_s;
          }
      }
      if (!o.json) progress.line("llama.cpp ctx " + std::to_string(ctx) + ": " +
                                 (l.error.empty() ? "prefill " + fmt_tps(row, "prefill_tok_s") + " tok/s, decode " +
                                                        fmt_tps(row, "decode_tok_s") + " tok/s"
                                                  : "error: " + l.error));
      rows.push_back(std::move(row));
    }
  }
  progress.done();
  const nlohmann::json all(rows);
  write_out(o, all);
  if (o.json) std::cout << all.dump(1) << std::endl;
  else print_table(rows);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* sub = app.add_subcommand("bench", "Speed and memory under device-memory caps: sweep lengths, policies, pots and "
                                          "caps (table, or --json rows), optionally beside llama.cpp");
  auto o = std::make_shared<BenchOpts>();
  sub->add_option("-m,--model", o->model, "GGUF model file")->required();
  sub->add_option("--ctx", o->ctx, "Comma list of document lengths in tokens (4096,16K,64K,1M)")->capture_default_str();
  sub->add_option("--policy", o->policies,
                  "Comma list of KV policies (" + policy_names(", ") + "), each NAME or NAME:key=value:... as on nih "
                  "(infinipot:nuc_stride=4, h2o:keep=512); one that names pot= is that pot alone, the others sweep --pot")
      ->capture_default_str();
  sub->add_option("--pot", o->pots, "Comma list of pot sizes in entries, or auto: the largest pot each cap allows")
      ->capture_default_str();
  sub->add_option("--device-mem", o->caps, "Comma list of device-memory caps (128M,256M,1G; default: the device's)");
  sub->add_option("-n,--n-decode", o->n_predict, "Tokens decoded after the prompt (EOS ignored)")->capture_default_str();
  sub->add_option("-r,--reps", o->reps, "Repetitions per row (median, min, max)")->capture_default_str();
  sub->add_option("--haystack", o->haystack, "UTF-8 prose the documents are cut from (default: data/perplexity.txt)");
  sub->add_option("--device", o->device, "OpenCL device: index or name substring");
  sub->add_option("--chunk", o->chunk, "Prefill chunk in tokens (default: from platforms/)")->check(CLI::Range(1, 1 << 16));
  sub->add_option("--kv-type", o->kv_type, "KV element type: auto, f16, f32")->capture_default_str()
      ->check(CLI::IsMember({"auto", "f16", "f32"}));
  CLI::Option* vs_llama = sub->add_option("--vs-llama-cpp", o->llama_dir,
                                          "Directory with llama.cpp's programs (--llama-cpp-tool): run it on the same "
                                          "GGUF at each --ctx (full KV cache) and compare");
  sub->add_option("--llama-cpp-tool", o->llama_tool,
                  "What runs llama.cpp: llama-bench (two prefills per length: pp<ctx>, and tg<n> at depth ctx) or "
                  "llama-completion (one: it reads the same document as our rows and decodes -n tokens after it; "
                  "for long --ctx)")
      ->capture_default_str()
      ->check(CLI::IsMember({"llama-bench", "llama-completion"}))
      ->needs(vs_llama);  // said without llama.cpp to run, it would be ignored without a word
  sub->add_option("--threads", o->threads, "llama.cpp threads (default: all cores, as PoCL uses)")
      ->check(CLI::Range(1, 1024))
      ->needs(vs_llama);
  CLI::Option* resume =
      sub->add_option("--llama-cpp-resume", o->llama_resume,
                      "Directory for a llama-completion prefill of hours in stages (its --prompt-cache): a rerun "
                      "skips the stages already done there and goes on")
          ->needs(vs_llama);
  sub->add_option("--llama-cpp-stages", o->llama_stages,
                  "Stages of a --llama-cpp-resume prefill (default: one per 8K tokens)")
      ->check(CLI::Range(1, 4096))
      ->needs(resume);
  sub->add_flag("--only-llama-cpp", o->only_llama, "Run llama.cpp's rows only (each --ctx), none of ours")
      ->needs(vs_llama);
  sub->add_option("--out", o->out, "Also write the rows (JSON) to this file");
  sub->add_flag("!--no-warmup", o->warmup, "Skip the warm-up run that compiles the kernels first");
  sub->add_flag("--attention", o->attention,
                "Instead of the sweep: GFLOP/s of the prefill attention variants at the model's heads, a chunk of "
                "rows (--chunk, default 512) after each --ctx cached entries (e.g. --ctx 512,1024,4096)");
  sub->add_flag("--gemm", o->gemm, "Instead of the sweep: GFLOP/s of the GEMM backends (packed, CLBlast) on the "
                                   "model's prefill shapes");
  sub->add_flag("--matvec", o->matvec, "Instead of the sweep: microseconds and GB/s of the model's decode products "
                                       "(layer 0 and the LM head, float and integer paths), and one token's worth");
  sub->add_flag("--json", o->json, "Print the rows as one JSON list instead of the table");
  sub->callback([o] { bench(*o); });
}

}  // namespace infinipot::cli
