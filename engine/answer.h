// One question about one document, answered under a KV policy: the path `infinipot run`,
// `infinipot nih` and `infinipot bench` share. The policy's way of reading (pot/reading.h)
// decides where the document lives; the job's PotPlan (engine/pot_plan.h) sizes it.
#pragma once
#include <functional>
#include <string>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "pot/memory_pot.h"

namespace infinipot {

struct AnswerOptions {
  std::string system;        // system prompt ("" = the template's default)
  bool raw = false;          // no chat template
  int n_predict = 256;
  SamplerOptions sampler;
  int ctx = 0;               // full cache only: KV capacity (0 = prompt + n_predict)
  // Whole-input policies (snapkv) only: hold at least this many entries (0 = what the prompt
  // needs). nih gives every trial of a cell the largest of their plans (answer_plan), so that
  // their pots have the same settings and can share a document prefix.
  int whole_capacity = 0;
  // The KV policy and the pot's shape: pot.policy names it (pot/policy_registry.h); pot.capacity
  // is --pot (ignored by full).
  PotOptions pot;
  // Catalyst text (CaP) for policies that use one; empty: the question, else a general
  // instruction to summarise the document's facts.
  std::string catalyst;
  std::string watch;         // report how much of this text the pot still holds ("" = off)
  // With watch: also the share of the catalyst's attention (its question rows, as CaP measures
  // it) that falls on that text once the document is read, per layer (watch.question_attention;
  // null for a policy without a catalyst). For SnapKV it is measured over the whole input.
  bool watch_attention = false;
  std::string oracle;        // diagnostics: the pot keeps this text (first occurrence) whatever the policy chooses
  bool pot_text = false;     // report the text the pot holds at the end (Answer::pot["held"])
  std::function<void(const std::string&)> on_text;  // streamed answer pieces
  std::function<void(const PrefillProgress&)> on_prefill;  // after each prefill chunk
  std::function<bool()> cancelled;  // GenerateOptions::cancelled
  bool ignore_eos = false;   // answer n_predict tokens whatever they are (benchmarks)
  // Pot snapshots (pot/pot_snapshot.h): save_pot: write the pot after reading the document,
  // then answer; load_pot: answer from a saved pot (the document is not read; the pot's
  // settings come from the file, pot above is ignored).
  std::string save_pot, load_pot;
  // Sharing a document prefix between answers (nih's trials: engine/prefix_forks.h), for the
  // policies that read through a pot of fixed size. after_chunk: after each chunk of the
  // document the pot reads, with the document tokens read so far and a function that
  // snapshots the pot there. resume: start from such a snapshot, taken after the first
  // resume_body document tokens of this same prompt, with the same policy and catalyst.
  std::function<void(int body_done, const std::function<PotSnapshot()>& capture)> after_chunk;
  const PotSnapshot* resume = nullptr;
  int resume_body = 0;
};

struct Answer {
  GenerateResult result;
  nlohmann::json pot;        // the pot's report (null for full): policy, cycles, timings, watch, held
  int kv_capacity = 0;       // KV entries the device held
};

// Prepares the engine's device side for this policy and answers. Throws
// std::invalid_argument for a layout that cannot work (naming the flag to change) and
// cl::BudgetError when --device-mem cannot hold the plan.
Answer answer(Engine& engine, const std::string& document, const std::string& question, const AnswerOptions& opts);

// The plan answer() makes for this document and question (sized: throws as answer() does for
// settings that cannot hold the prompt). nih sizes a cell's stores alike from it.
PotPlan answer_plan(const Engine& engine, const std::string& document, const std::string& question,
                    const AnswerOptions& opts);

}  // namespace infinipot
