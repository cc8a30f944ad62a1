#!/usr/bin/env bash
# Runs a list of `infinipot nih` cells one after another (in the background, for hours),
# resumably: nih skips the trials already in its results file, so a worker stopped anywhere
# and started again goes on where it was, and a cell already finished costs a second.
#
# Usage: scripts/nih-worker.sh LIST
#   LIST: one cell per line, `OUTFILE nih-arguments` (the model and --out are added; lines
#   starting with '#' and blank lines are skipped). A cell that fails is reported and the
#   worker goes on to the next; it is tried again the next time the worker starts.
# Env: INFINIPOT  the binary (default build/infinipot; give a copy so that rebuilding does
#                 not change the binary under a running queue)
#      MODEL      default models/SmolLM2-135M-Instruct.Q4_1.gguf
#      THREADS    PoCL threads (default 1: on a 2-core VM two one-thread workers read ~25%
#                 more tokens per second than one two-thread process; docs/results.md)
#      CHECKPOINTS where each trial's pot is saved every 10 minutes of reading, so that a worker
#                 stopped inside a long trial (a 128K one reads for most of an hour) goes on
#                 from there when started again (default ~/.cache/infinipot/nih-checkpoints)
# Several workers may share one OUTFILE (nih locks it for each append); give each its own LIST.
set -uo pipefail
[ $# -eq 1 ] && [ -f "$1" ] || { sed -n 2,18p "$0" >&2; exit 2; }
list=$1
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${INFINIPOT:-$root/build/infinipot}
model=${MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}
export POCL_MAX_PTHREAD_COUNT=${THREADS:-1}
checkpoints=${CHECKPOINTS:-$HOME/.cache/infinipot/nih-checkpoints}
[ -x "$bin" ] || { echo "nih-worker: $bin is not an executable; build it (scripts/build.sh) or set INFINIPOT" >&2; exit 1; }
[ -f "$model" ] || { echo "nih-worker: no model at $model; run scripts/fetch-model.sh or set MODEL" >&2; exit 1; }
cd "$root"
failed=0
while IFS= read -r line <&3; do
  case "$line" in ''|'#'*) continue ;; esac
  out=${line%% *}
  args=${line#* }
  echo "=== $(date -u +%FT%TZ) start: $line"
  eval "\"\$bin\" nih -m \"\$model\" --out \"\$out\" --checkpoint-dir \"\$checkpoints\" $args"
  rc=$?
  echo "=== $(date -u +%FT%TZ) end (exit $rc): $line"
  [ $rc -ne 0 ] && failed=$((failed + 1))
done 3< "$list"
echo "=== $(date -u +%FT%TZ) $list: every cell run, $failed failed"
[ $failed -eq 0 ]
