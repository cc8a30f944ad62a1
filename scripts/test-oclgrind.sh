#!/usr/bin/env bash
# The kernel tests of every op family under Oclgrind (Debian's `oclgrind`), an OpenCL 1.2
# simulator that reports itself as a GPU and checks what PoCL's CPU device forgives: every API
# call (OCLGRIND_CHECK_API), data races between work-items and work-groups
# (OCLGRIND_DATA_RACES), out-of-bounds accesses, barrier divergence, a work-group's local
# memory over the device's 32 KiB. So the GPU paths (the five launches a decode block: matvec,
# matvec_q8 and attention's tests; the local-memory reductions: norm, matvec, matvec_q8 and
# pot_select's work-group tests; the tiled and split attention; pot selection) run on a second
# implementation. .ci/run runs it after scripts/test.sh, on the tests that built.
#
# Usage: scripts/test-oclgrind.sh [BUILD_DIR]   (default $INFINIPOT_BUILD_DIR or build/; its tests
# must be built)
# Exits 1 when a test fails, a binary exits non-zero (an abort at exit included) or runs past
# its time, or Oclgrind reports anything; prints one line a family, the report count and the
# total seconds.
# Small shapes: INFINIPOT_TEST_SMALL=1 (tests/runtime/kernel_fixture.h, small_shapes) cuts the
# few large shapes (attention's 1,024-row chunk and 16K cache, pot selection's 64K-slot rows) and
# the long random loops of pot selection to sizes that still take every path (several work-groups,
# several items per work-item); nothing else changes. The whole run fits its budget (12 min on CI's
# 2 cores, measured 4-5 min: each family's time is about a third of its limit).
# Left out: tests that cannot run on this device skip and are counted: the CPU-only paths (the
# CPU's own 8-bit dot: native_dot, gemm_native; the one-launch decode block: decode_layer) are
# PoCL's on x86 only, and scripts/test.sh runs them. MatvecPrefetch: below, beside its filter.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${INFINIPOT_BUILD_DIR:-$root/build}}
lib=/usr/lib/oclgrind/liboclgrind-rt-icd.so
[ -f "$lib" ] || { echo "test-oclgrind: $lib is missing: apt install oclgrind (scripts/deps.sh does)" >&2; exit 1; }
vendors=$(mktemp -d)
logs=$(mktemp -d)
trap 'rm -rf "$vendors"' EXIT
echo "$lib" > "$vendors/oclgrind.icd"
export OCL_ICD_VENDORS=$vendors OCLGRIND_CHECK_API=1 OCLGRIND_DATA_RACES=1
# The kernel tests' large shapes and long random loops cut down (tests/runtime/kernel_fixture.h,
# small_shapes): Oclgrind runs a kernel thousands of times slower than PoCL.
export INFINIPOT_TEST_SMALL=1

# family  seconds (its limit: about 3x its time on CI's 2 cores)  gtest filter (what is left
# out, and why, is said beside it)
families=(
  "norm 30 *"
  "rope 30 *"
  "elementwise 30 *"
  "kv_cache 30 *"
  "cross_entropy 30 *"
  "argmax 30 *"
  "act_round 30 *"
  "embedding 30 *"
  "dequant 30 *"
  # MatvecPrefetch forces OpenCL's prefetch(), which Oclgrind 21.10 cannot run (it stops on
  # the undefined llvm.prefetch); the other matvec tests run the same kernel without it.
  "matvec 300 *:-MatvecPrefetch.*"
  "matvec_q8 30 *"
  "native_dot 30 *"
  "gemm 120 *"
  "gemm_native 30 *"
  "decode_layer 30 *"
  "attention 300 *"
  "kernels_pot_select 60 *"
)
budget=720  # seconds for the whole run: a family's limit is cut to what is left of it
failed=0 reports_total=0 run_start=$(date +%s)
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
  left=$((budget - (start - run_start)))
  [ "$left" -lt "$seconds" ] && seconds=$((left > 1 ? left : 1))
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
echo "Oclgrind reports: $reports_total; $(( $(date +%s) - run_start )) s in all (budget $budget s); logs in $logs"
exit $failed
