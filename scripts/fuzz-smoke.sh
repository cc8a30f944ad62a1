#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang, -DINFINIPOT_FUZZ=ON) into build-fuzz/ and
# runs each for FUZZ_SECONDS (default 30) on a temporary copy of its seed corpus
# tests/fuzz/corpus/<name>/ (fuzz_<name>), so nothing is ever written into the repository.
# Fails on any crash, sanitizer report, leak, timeout or out-of-memory; the input that did it
# is kept and its path printed. Prints executions, exec/s and corpus growth per target.
#   scripts/fuzz-smoke.sh                  # every target, 30 s each
#   FUZZ_SECONDS=600 scripts/fuzz-smoke.sh fuzz_gguf   # one target, longer (docs/fuzzing.md)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${INFINIPOT_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-30}
jobs=${INFINIPOT_JOBS:-$(nproc)}
"$root/scripts/deps.sh"

# clang with libFuzzer's runtime (Debian: clang + libclang-rt-dev).
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
fuzzer_links() {
  command -v clang++ >/dev/null &&
    echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
      clang++ -x c++ -fsanitize=fuzzer,address - -o "$probe/probe" 2>/dev/null
}
if ! fuzzer_links; then
  echo "fuzz-smoke: installing clang and libclang-rt-dev (libFuzzer)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang libclang-rt-dev
  fuzzer_links || { echo "error: clang++ -fsanitize=fuzzer still does not link" >&2; exit 1; }
fi

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DINFINIPOT_FUZZ=ON -DINFINIPOT_BUILD_TESTS=OFF >/dev/null
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in "$root"/tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
start=$(date +%s)
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
echo "fuzz-smoke: built ${targets[*]} in $(( $(date +%s) - start )) s"

# The tokenizer target uses the real vocabulary when the model is there.
model=$root/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f "$model" ] && export INFINIPOT_MODEL=${INFINIPOT_MODEL:-$model}
export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

work=$(mktemp -d "${TMPDIR:-/tmp}/infinipot-fuzz-XXXXXX")
failed=()
summary=()
for t in "${targets[@]}"; do
  seeds=$root/tests/fuzz/corpus/${t#fuzz_}
  [ -d "$seeds" ] || { echo "error: no seed corpus $seeds for $t" >&2; exit 1; }
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  cp "$seeds"/* "$work/$t/corpus/"
  n_seeds=$(find "$seeds" -type f | wc -l)
  echo "fuzz-smoke: $t for $seconds s on $n_seeds seeds"
  status=0
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" >"$work/$t/log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/$t/log" | tail -1 | cut -d' ' -f2)
  n_final=$(find "$work/$t/corpus" -type f | wc -l)
  size=$(du -sk --apparent-size "$work/$t/corpus" | cut -f1)
  summary+=("$(printf '%-16s %10s execs %8s exec/s  cov %6s  corpus %4s -> %4s files (%s KiB)' \
    "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$n_seeds" "$n_final" "$size")")
  if [ $status -ne 0 ]; then
    failed+=("$t")
    echo "fuzz-smoke: $t FAILED (exit $status); the last of its log:" >&2
    tail -60 "$work/$t/log" >&2
    ls "$work/$t/artifacts/"* 2>/dev/null | sed 's/^/fuzz-smoke: reproducer: /' >&2 || true
  fi
done

printf '%s\n' "${summary[@]}"
echo "fuzz-smoke: total $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: failures in ${failed[*]}; inputs and logs kept in $work" >&2
  exit 1
fi
rm -rf "$work"
