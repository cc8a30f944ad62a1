#!/usr/bin/env bash
# Reference perplexity of the model on data/perplexity.txt with llama.cpp's llama-perplexity.
#
# Usage: scripts/reference/llama_perplexity.sh [CTX ...]     (default: 512 1024)
# Env:   LLAMA_BIN     bin dir of a llama.cpp build (default: the AMX-off build of
#                      scripts/reference/build-llama-cpp.sh, built on first use)
#        MODEL         gguf (default models/SmolLM2-135M-Instruct.Q4_1.gguf)
#        TOKENS        tokens evaluated per context size: chunks = TOKENS / CTX (default 10240)
#        THREADS       default 2
#        OMP_WAIT_POLICY  default passive here: OpenMP's spinning barriers make llama.cpp many
#                      times slower on a busy shared machine (see docs/benchmarks.md);
#                      it changes the run time only, not the result.
# For each CTX prints one line: "ctx=512 chunks=20 ppl=12.3456 err=0.1234 seconds=42 load=0.50",
# and keeps llama-perplexity's full log in build/reference/perplexity-c<CTX>.log.
#
# Method (llama-perplexity defaults): the text is tokenized without BOS (the model's
# add_bos_token is false), cut into consecutive chunks of CTX tokens; each chunk is evaluated
# from an empty KV cache and only the second half of its tokens is scored (each predicted
# from at least CTX/2 tokens of context). PPL = exp(mean NLL); the +/- is its standard error.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
model=${MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}
text=$root/data/perplexity.txt
tokens=${TOKENS:-10240}
threads=${THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
ctxs=("$@"); [ ${#ctxs[@]} -gt 0 ] || ctxs=(512 1024)
bin=${LLAMA_BIN:-}
[ -n "$bin" ] || bin=$("$root/scripts/reference/build-llama-cpp.sh" noamx --no-python)
[ -x "$bin/llama-perplexity" ] || { echo "error: no llama-perplexity in $bin" >&2; exit 1; }
[ -f "$model" ] || { echo "error: model $model missing (scripts/fetch-model.sh)" >&2; exit 1; }
logdir=$root/build/reference; mkdir -p "$logdir"

for ctx in "${ctxs[@]}"; do
  chunks=$(( tokens / ctx ))
  log=$logdir/perplexity-c$ctx.log
  load=$(cut -d' ' -f1 /proc/loadavg)
  t0=$(date +%s.%N)
  "$bin/llama-perplexity" -m "$model" -f "$text" -c "$ctx" -t "$threads" --chunks "$chunks" \
    >"$log" 2>&1 || { tail -20 "$log" >&2; echo "error: llama-perplexity failed (log: $log)" >&2; exit 1; }
  secs=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(date +%s.%N)")
  # e.g. "Final estimate: PPL = 10.1234 +/- 0.21098"
  line=$(grep -a 'Final estimate: PPL' "$log" | tail -1)
  [[ $line =~ PPL\ =\ ([0-9.]+)\ \+/-\ ([0-9.]+) ]] ||
    { echo "error: no final estimate in $log" >&2; exit 1; }
  # load: 1-minute load average before the run (this machine is shared; timings vary with it)
  echo "ctx=$ctx chunks=$chunks ppl=${BASH_REMATCH[1]} err=${BASH_REMATCH[2]} seconds=$secs load=$load"
done
