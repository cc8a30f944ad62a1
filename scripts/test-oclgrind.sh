#!/usr/bin/env bash
# The kernel tests of every op family under Oclgrind (Debian's `oclgrind`), an OpenCL 1.2
# simulator that reports itself as a GPU and checks what PoCL's CPU device forgives: every API
# call (OCLGRIND_CHECK_API), data races between work-items and work-groups
# (OCLGRIND_DATA_RACES), out-of-bounds accesses, barrier divergence, a work-group's local
# memory over the device's 32 KiB. So the GPU paths (the five launches a decode block, the
# local-memory reductions, the tiled and split attention) run on a second implementation.
#
# Usage: scripts/test-oclgrind.sh [BUILD_DIR]   (default build/; its tests must be built)
# Exits 1 when a test fails, a binary exits non-zero (an abort at exit included) or runs past
# its time, or Oclgrind reports anything; prints one line a family and the report count.
# Tests that cannot run on this device skip and are counted: the CPU-only paths (the CPU's own
# 8-bit dot, the one-launch decode block) are PoCL's on x86 only.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
lib=/usr/lib/oclgrind/liboclgrind-rt-icd.so
[ -f "$lib" ] || { echo "test-oclgrind: $lib is missing: apt install oclgrind (scripts/deps.sh does)" >&2; exit 1; }
vendors=$(mktemp -d)
logs=$(mktemp -d)
trap 'rm -rf "$vendors"' EXIT
echo "$lib" > "$vendors/oclgrind.icd"
export OCL_ICD_VENDORS=$vendors OCLGRIND_CHECK_API=1 OCLGRIND_DATA_RACES=1

# family  seconds  gtest filter (what is left out, and why, is said beside it)
families=(
  "norm 120 *"
  "rope 120 *"
  "elementwise 120 *"
  "kv_cache 120 *"
  "cross_entropy 120 *"
  "argmax 120 *"
  "act_round 120 *"
  "embedding 120 *"
  "dequant 240 *"
  # MatvecPrefetch forces OpenCL's prefetch(), which Oclgrind 21.10 cannot run (it stops on
  # the undefined llvm.prefetch); the other matvec tests run the same kernel without it.
  "matvec 900 *:-MatvecPrefetch.*"
  "matvec_q8 240 *"
  "native_dot 120 *"
  "gemm 600 *"
  "gemm_native 120 *"
  "decode_layer 120 *"
  "attention 1200 *"
  "kernels_pot_select 900 *"
)
failed=0 reports_total=0
for row in "${families[@]}"; do
  read -r family seconds filter <<< "$row"
  bin=$build/tests/test_$family
  log=$logs/$family.log
  if [ ! -x "$bin" ]; then
    echo "test-oclgrind: $bin is not built (scripts/build.sh)" >&2
    failed=1
    continue
  fi
  start=$(date +%s)
  timeout "$seconds" "$bin" --gtest_filter="$filter" > "$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  # Oclgrind's reports: "Oclgrind - OpenCL runtime error detected", races, invalid accesses.
  reports=$(grep -c -E "^Oclgrind - |OCLGRIND FATAL|data race at|Invalid (read|write)|Work-group divergence|Uninitialized" "$log")
  passed=$(grep -c '^\[       OK \]' "$log")
  skipped=$(grep -c '^\[  SKIPPED \]' "$log")
  failures=$(grep -c '^\[  FAILED  \]' "$log")
  reports_total=$((reports_total + reports))
  status=ok
  if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ]; then
    status="FAILED (exit $rc$([ "$rc" -eq 124 ] && echo ": past ${seconds} s"))"
    failed=1
  fi
  printf '%-20s %4d s  %3d passed  %3d skipped  %3d failed  %3d Oclgrind reports  %s\n' \
    "$family" "$took" "$passed" "$skipped" "$failures" "$reports" "$status"
  if [ "$status" != ok ]; then
    grep -E -A8 "^Oclgrind - |OCLGRIND FATAL|data race at|Invalid (read|write)|Work-group divergence|^\[  FAILED" "$log" | head -40 | sed 's/^/    /'
  fi
done
echo "Oclgrind reports: $reports_total; logs in $logs"
exit $failed
