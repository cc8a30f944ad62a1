// llama.cpp beside infinipot in `infinipot bench --vs-llama-cpp DIR`: runs DIR/llama-bench on
// the same GGUF with the same thread count and its full KV cache at each length, and reads
// back its throughput and the process's peak resident memory (its CPU backend keeps weights,
// KV cache and compute buffers in host memory, so that is its whole footprint).
#pragma once
#include <string>
#include <nlohmann/json.hpp>

namespace infinipot::cli {

struct LlamaCppRow {
  int ctx = 0;
  double prefill_tok_s = 0;     // pp<ctx>: the whole prompt into an empty cache
  double decode_tok_s = 0;      // tg<n> at depth ctx: the cache already holds ctx tokens
  double ttft_s = 0;            // ctx / prefill_tok_s
  long long peak_rss_bytes = 0; // the larger of the two runs' peak RSS
  std::string prefill_cmd, decode_cmd;
  std::string error;            // non-empty: what failed (the row has no figures)
};

// Runs llama-bench twice (prefill of ctx tokens; n decode tokens at depth ctx), reps
// repetitions each (llama-bench's mean is reported). Never throws for a failing llama-bench:
// the row carries the error and its stderr tail.
LlamaCppRow run_llama_bench(const std::string& dir, const std::string& model, int ctx, int n_decode, int reps,
                            int threads);

// Checks DIR holds an executable llama-bench; throws std::invalid_argument saying how to build
// one (scripts/reference/build-llama-cpp.sh) when not.
void require_llama_bench(const std::string& dir);

// Peak resident memory of this process since the last reset_peak_rss() (VmHWM), in bytes;
// 0 where /proc is not there.
long long host_peak_rss();
// Resets VmHWM to the current RSS (Linux: /proc/self/clear_refs "5"), so a sweep reports
// each row's own peak; returns false where the kernel does not allow it.
bool reset_peak_rss();

}  // namespace infinipot::cli
