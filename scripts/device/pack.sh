#!/usr/bin/env bash
# Packs this build for a lent GPU machine (the `device` tool of a session: x86-64, no network,
# at most 64 MiB of working tree per call, files under /tmp kept only while the machine stays
# warm between calls). Writes .dev/p1 .. .dev/pN (ignored by git), one folder per call:
#   p1: the binary, its shared libraries (the GPU image is Ubuntu; ours are Debian 12's), the
#       test binaries named in TESTS, the scripts below, and the model's first part;
#   p2 ..: the model's further parts.
# Each call carries one folder and runs `bash .dev/pK/device.sh`, which unpacks what it carries
# into /tmp/ip; the last one also runs the jobs file given to this script (one shell command
# per line, run by device.sh with $IP = the binary, $M = the model, $OUT = the result folder).
#   scripts/device/pack.sh MODEL.gguf JOBS.txt
# Env: TESTS (test binary names under build/tests), TREE_MB (size of the rest of the tree,
# default: measured), BUILD (default build), EXTRA (a folder carried beside the model in the
# last call and unpacked to /tmp/ip/extra, e.g. llama.cpp's CUDA build:
# EXTRA=~/.cache/infinipot/llama.cpp/build-cuda/bin; its binaries and libraries are stripped).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
model=${1:?usage: pack.sh MODEL.gguf JOBS.txt}
jobs=${2:?usage: pack.sh MODEL.gguf JOBS.txt}
build=${BUILD:-$root/build}
[ -f "$model" ] || { echo "pack.sh: no model file $model" >&2; exit 2; }
[ -f "$jobs" ] || { echo "pack.sh: no jobs file $jobs" >&2; exit 2; }
[ -x "$build/infinipot" ] || { echo "pack.sh: build $build/infinipot first (scripts/build.sh)" >&2; exit 2; }
out=$root/.dev
rm -rf "$out" && mkdir -p "$out/stage/lib" "$out/stage/bin"
for lib in $(ldd "$build/infinipot" | awk '/=>/ {print $3}'); do
  case $(basename "$lib") in libc.so*|libm.so*|ld-linux*|libpthread*|libdl*|librt*) ;; *) cp -L "$lib" "$out/stage/lib/";; esac
done
cp "$build/infinipot" "$out/stage/bin/"
for t in ${TESTS:-}; do cp "$build/tests/$t" "$out/stage/bin/"; done
strip -s "$out/stage/bin/"* 2>/dev/null || true
tar -C "$out/stage" -czf "$out/bundle.tgz" . && rm -rf "$out/stage"

limit=$((64 * 1024 * 1024))
tree=${TREE_MB:+$((TREE_MB * 1024 * 1024))}
tree=${tree:-$(cd "$root" && git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)}
room=$((limit - tree - 2 * 1024 * 1024))   # 2 MiB spare for scripts and jobs
bundle=$(stat -c %s "$out/bundle.tgz")
extra_bytes=0
if [ -n "${EXTRA:-}" ]; then
  [ -d "$EXTRA" ] || { echo "pack.sh: EXTRA=$EXTRA is not a folder" >&2; exit 2; }
  mkdir -p "$out/extra" && cp -a "$EXTRA"/. "$out/extra/"  # links kept: a library is carried once
  find "$out/extra" -type f -exec strip -s {} + 2>/dev/null || true
  tar -C "$out/extra" -czf "$out/extra.tgz" . && rm -rf "$out/extra"
  extra_bytes=$(stat -c %s "$out/extra.tgz")
fi
size=$(stat -c %s "$model")
first=$((room - bundle))
[ "$first" -gt 0 ] || { echo "pack.sh: the bundle alone ($bundle bytes) leaves no room" >&2; exit 2; }
k=1 off=0
while [ "$off" -lt "$size" ]; do
  mkdir -p "$out/p$k"
  n=$([ "$k" = 1 ] && echo "$first" || echo "$room")
  dd if="$model" of="$out/p$k/model.part" bs=1M iflag=skip_bytes,count_bytes skip="$off" count="$n" status=none
  off=$((off + n)) k=$((k + 1))
done
parts=$((k - 1)) model_parts=$((k - 1))
if [ "$extra_bytes" -gt 0 ]; then  # into the last call when it has room, else a call of its own
  last=$(stat -c %s "$out/p$parts/model.part")
  [ $((parts == 1 ? last + bundle : last)) -le $((room - extra_bytes)) ] || { parts=$((parts + 1)); mkdir -p "$out/p$parts"; }
  mv "$out/extra.tgz" "$out/p$parts/"
fi
mv "$out/bundle.tgz" "$out/p1/"
sha256sum "$model" | cut -d' ' -f1 > "$out/p$parts/model.sha256"
cp "$jobs" "$out/p$parts/jobs.txt"
for i in $(seq 1 "$parts"); do
  cp "$root/scripts/device/device.sh" "$out/p$i/"
  echo "$i $parts $(basename "$model")" > "$out/p$i/part"
  echo "$model_parts" > "$out/p$i/model_parts"
  echo "$root" > "$out/p$i/srcdir"
done
echo "pack.sh: $parts calls; carry .dev/p1 .. .dev/p$parts in order, each running: bash .dev/pK/device.sh"
du -sh "$out"/p*
