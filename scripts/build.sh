#!/usr/bin/env bash
# Configures and builds infinipot (Release) into build/; fast when nothing changed.
# Extra arguments go to the CMake configure step (e.g. -DINFINIPOT_SANITIZE=ON).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${INFINIPOT_BUILD_DIR:-$root/build}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
elif [ $# -gt 0 ]; then
  cmake "$build" "$@" >/dev/null
fi
cmake --build "$build" -j "$(nproc)"
