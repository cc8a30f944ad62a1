#!/usr/bin/env bash
# Host allocations of a decode step, every library counted (docs/benchmarks.md, "Decode's host
# side"): a malloc counter preloaded into two `bench` runs that differ only in decoded tokens
# (32 and 96), attributing each call to the first library on its stack that is not libc or
# libstdc++; the difference over the 64 extra steps is what a step allocates. Needs gcc.
# Usage: scripts/count-decode-allocations.sh [BINARY] [MODEL]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/infinipot}
model=${2:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/count.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>
extern void* __libc_malloc(size_t);
#define N 64
static const char* names[N];
static long counts[N];
static int used, on;
static __thread int inside;
void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  if (!on || inside) return p;
  inside = 1;
  void* bt[4];
  const int k = backtrace(bt, 4);
  const char* who = "?";
  Dl_info info;
  for (int i = 1; i < k; ++i)
    if (dladdr(bt[i], &info) && info.dli_fname) {
      who = info.dli_fname;
      if (!strstr(who, "libstdc++") && !strstr(who, "libc.so")) break;
    }
  int j = 0;
  while (j < used && strcmp(names[j], who) != 0) ++j;
  if (j == used && used < N) names[used++] = who;
  if (j < N) counts[j]++;
  inside = 0;
  return p;
}
__attribute__((constructor)) static void start(void) { void* b[2]; backtrace(b, 2); on = 1; }
__attribute__((destructor)) static void stop(void) {
  on = 0;
  for (int j = 0; j < used; ++j) fprintf(stderr, "MALLOCS %ld %s\n", counts[j], names[j]);
}
C
gcc -O2 -shared -fPIC "$work/count.c" -o "$work/count.so" -ldl
for n in 32 96; do
  LD_PRELOAD="$work/count.so" "$bin" bench -m "$model" --ctx 64 --policy full -n "$n" -r 1 --out "$work/b.json" 2>&1 |
    grep '^MALLOCS' | sort -k3 > "$work/$n.txt"
done
echo "allocations per decode step (64 steps), by the library that asked:"
join -1 3 -2 3 "$work/32.txt" "$work/96.txt" | awk '{ printf "%10.1f  %s\n", ($5 - $3) / 64, $1 }' | sort -rn
