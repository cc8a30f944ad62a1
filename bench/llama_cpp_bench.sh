#!/usr/bin/env bash
# llama.cpp reference throughput (llama-bench) for the model, to sit next to infinipot's figures.
#
# Usage: bench/llama_cpp_bench.sh [--quick] [--no-amx] [--build-amx]
#   --quick      pp512 + tg128 only (default also runs pp2048)
#   --no-amx     only the AMX-off build (default: also the AMX build when it has been built)
#   --build-amx  build the AMX variant first if it is missing (several minutes)
# Env: MODEL (default models/SmolLM2-135M-Instruct.Q4_1.gguf), THREADS (default 2),
#      REPS (default 3), OMP_WAIT_POLICY (unset: llama.cpp's own default; see below).
# llama.cpp's CPU backend is built with OpenMP, whose threads spin at every barrier by default
# (hundreds of barriers per token). On this shared 2-core machine a preempted peer thread then
# costs a whole scheduler slice per barrier: with the default (active) policy we measured
# pp128 24 tok/s and tg32 4 tok/s, with OMP_WAIT_POLICY=passive 311 and 30 tok/s, with -t 1
# 174 and 58 tok/s (same minute, load average about 4). On a quiet machine it is the other way
# round (default: tg128 114 tok/s, passive: 30 tok/s, AMX-off build, load 1.4), and the default
# is what users run, so this script leaves the policy alone unless the caller sets
# OMP_WAIT_POLICY (e.g. passive on a busy machine); the policy is recorded in the output.
# Prints on stdout one JSON array: llama-bench's records (`-o json`) of every build run, each
# with keys added: "variant" ("noamx" | "amx"), "llama_bench_cmd", "omp_wait_policy" and
# "loadavg_1m_before"
# (the machine's 1-minute load average before the run: figures taken on a busy shared
# machine are not comparable, -t 2 suffers most when other processes compete). The throughput
# figures are "avg_ts" / "stddev_ts" (tokens/s) with n_prompt (pp) or n_gen (tg) set.
# Progress and a short summary go to stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}
threads=${THREADS:-2}
reps=${REPS:-3}
if [ -n "${OMP_WAIT_POLICY:-}" ]; then export OMP_WAIT_POLICY; fi
quick=0; amx=1; build_amx=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1 ;;
    --no-amx) amx=0 ;;
    --build-amx) build_amx=1 ;;
    -h|--help) sed -n 2,23p "$0"; exit 0 ;;
    *) echo "unknown argument: $a" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "error: model $model missing (scripts/fetch-model.sh)" >&2; exit 1; }
build=$root/scripts/reference/build-llama-cpp.sh
cache=${XDG_CACHE_HOME:-$HOME/.cache}/infinipot/llama.cpp

variants=(noamx)
if [ "$amx" = 1 ]; then
  if [ -x "$cache/build-amx/bin/llama-bench" ] || [ "$build_amx" = 1 ]; then variants+=(amx); fi
fi
prompts=512; [ "$quick" = 1 ] || prompts=512,2048

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for v in "${variants[@]}"; do
  bin=$("$build" "$v" --no-python)
  cmd=(llama-bench -m "$model" -t "$threads" -p "$prompts" -n 128 -r "$reps" -o json)
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "[llama_cpp_bench] $v: OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-default} ${cmd[*]} (load average before: $load)" >&2
  "$bin/llama-bench" "${cmd[@]:1}" >"$tmp/$v.json" 2>"$tmp/$v.err" ||
    { cat "$tmp/$v.err" >&2; echo "error: llama-bench ($v) failed" >&2; exit 1; }
  echo "${cmd[*]}" >"$tmp/$v.cmd"
  echo "$load" >"$tmp/$v.load"
done

python3 - "$tmp" "${variants[@]}" <<'EOF'
import json, os, sys
d, variants = sys.argv[1], sys.argv[2:]
out = []
for v in variants:
    cmd = open(os.path.join(d, v + ".cmd")).read().strip()
    for rec in json.load(open(os.path.join(d, v + ".json"))):
        rec["variant"] = v
        rec["llama_bench_cmd"] = cmd
        rec["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY", "default")
        rec["loadavg_1m_before"] = float(open(os.path.join(d, v + ".load")).read())
        out.append(rec)
        test = f"pp{rec['n_prompt']}" if rec["n_gen"] == 0 else f"tg{rec['n_gen']}"
        print(f"[llama_cpp_bench] {v:6s} {test:7s} {rec['avg_ts']:9.2f} +/- "
              f"{rec['stddev_ts']:.2f} tok/s", file=sys.stderr)
json.dump(out, sys.stdout, indent=1)
print()
EOF
