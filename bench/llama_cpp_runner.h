// llama.cpp beside infinipot in `infinipot bench --vs-llama-cpp DIR`: runs DIR/llama-bench on
// the same GGUF with the same thread count and its full KV cache at each length, and reads
// back its throughput and the process's peak resident memory (its CPU backend keeps weights,
// KV cache and compute buffers in host memory, so that is its whole footprint).
#pragma once
#include <functional>
#include <string>
#include <nlohmann/json.hpp>

namespace infinipot::cli {

struct LlamaCppRow {
  int ctx = 0;
  double prefill_tok_s = 0;     // pp<ctx>: the whole prompt into an empty cache
  double decode_tok_s = 0;      // tg<n> at depth ctx: the cache already holds ctx tokens
  double ttft_s = 0;            // ctx / prefill_tok_s
  long long peak_rss_bytes = 0; // the largest peak RSS of its runs
  int prompt_tokens = 0;        // llama-completion: the prompt as llama.cpp tokenized it (0: llama-bench's ctx)
  int stages = 0;               // run_llama_completion_staged: the stages the prefill took (0: one run)
  double cpu_share = 0;         // ... and its CPU time over threads x wall time, all stages (1: nothing else ran)
  std::string prefill_cmd, decode_cmd;  // llama-completion: one command, both fields
  std::string error;            // non-empty: what failed (the row has no figures)
};

// Runs llama-bench twice (prefill of ctx tokens; n decode tokens at depth ctx), reps
// repetitions each (llama-bench's mean is reported). Never throws for a failing llama-bench:
// the row carries the error and its stderr tail.
LlamaCppRow run_llama_bench(const std::string& dir, const std::string& model, int ctx, int n_decode, int reps,
                            int threads);

// One prefill for both figures, for lengths where a prefill takes most of an hour on a CPU:
// llama-completion reads prompt_file (the document bench reads, ctx tokens) into a cache of
// ctx + n_decode entries and decodes n_decode tokens after it (--ignore-eos, greedy); its own
// timing lines give the prefill rate (prompt tokens over prompt-eval time) and the decode
// rate at depth ctx (runs over eval time). reps runs, the rates averaged as llama-bench
// averages. llama-bench (above) needs two prefills of ctx tokens per repetition: one for
// pp<ctx>, one to fill the depth before tg<n>. Never throws for a failing run (row.error).
LlamaCppRow run_llama_completion(const std::string& dir, const std::string& model, const std::string& prompt_file,
                                 int ctx, int n_decode, int reps, int threads);

// run_llama_completion for a prefill of hours, in stages that survive an interrupted run:
// stage k of `stages` reads the first k/stages of prompt_file (cut at whitespace, so its
// tokens are a prefix of the whole prompt's) through llama-completion's --prompt-cache,
// which reloads the KV cache of stage k-1 and evaluates only the new tokens; the last stage
// reads the whole prompt and decodes n_decode tokens. Each finished stage appends its timing
// to state_dir/stages.jsonl and keeps its cache file until the next stage has finished, so a
// rerun with the same arguments skips finished stages and resumes. The prefill rate is the
// evaluated tokens over the stages' prompt-eval time (loading a cache file is not counted);
// the decode rate is the last stage's. A state_dir made for another document, model, length
// or stage count is refused (std::invalid_argument); a failing stage is the row's error.
// status(text) is told which stage runs.
LlamaCppRow run_llama_completion_staged(const std::string& dir, const std::string& model,
                                        const std::string& prompt_file, int ctx, int n_decode, int threads,
                                        const std::string& state_dir, int stages,
                                        const std::function<void(const std::string&)>& status);

// Checks DIR holds an executable `tool` (llama-bench or llama-completion); throws
// std::invalid_argument saying how to build one (scripts/reference/build-llama-cpp.sh) when not.
void require_llama_tool(const std::string& dir, const std::string& tool);

// llama.cpp's own timing lines (common_perf_print / llama_perf_context_print on stderr):
// "prompt eval time = MS ms / N tokens" and "eval time = MS ms / N runs". Fields a log lacks stay 0.
struct CompletionTimes {
  double prompt_ms = 0, eval_ms = 0;
  int prompt_tokens = 0, runs = 0;
};
CompletionTimes parse_completion_times(const std::string& log);

}  // namespace infinipot::cli
