#!/usr/bin/env bash
# Builds llama.cpp (vendored in the PyPI sdist of llama-cpp-python, pinned below) as an
# independent reference for infinipot, and makes the Python package `llama_cpp` importable
# by python3 using that very library (llama.cpp is compiled only once).
#
# Usage: scripts/reference/build-llama-cpp.sh [noamx|amx|cuda] [--no-python]
#   noamx (default)  portable x86-64 build: AVX/AVX2/FMA/F16C(/AVX512*) explicitly, AMX OFF,
#                    into <cache>/build-noamx; then installs the python package against it.
#   amx              same plus AMX (tile/int8/bf16) into <cache>/build-amx, from a separate
#                    source copy patched with a compiler barrier before _tile_loadconfig
#                    (GCC 12 otherwise miscompiles the tile setup -> SIGILL on batch > 1).
#                    The python package is not touched for this variant.
#   cuda             same as noamx plus the CUDA backend for sm_90 (H100/H200; CUDA_ARCHS
#                    overrides), into <cache>/build-cuda, for a lent NVIDIA machine
#                    (scripts/device/pack-llama-cuda.sh packs it). Needs nvcc; links the CUDA
#                    runtime and cuBLAS dynamically (the GPU image has them). No python step.
#   --no-python      skip the python package step.
# Prints the bin dir of the chosen build (the only line on stdout); logs go to stderr.
# Idempotent: re-running only re-checks the download, reconfigures and rebuilds incrementally.
# <cache> = ${XDG_CACHE_HOME:-$HOME/.cache}/infinipot/llama.cpp
# Env: LLAMA_CPP_SDIST=/path/to/llama_cpp_python-<ver>.tar.gz uses a local copy (sha-checked).
#      JOBS (default 2).
#      TARGETS="llama-tokenize" builds only those targets (default: all five below); the
#      python package needs only the shared libraries, which every target builds.
set -euo pipefail

LCP_VERSION=0.3.36   # llama-cpp-python; vendors llama.cpp ggml-org/llama.cpp@0c1e57098
LCP_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
LLAMA_CPP_COMMIT=0c1e57098

variant=noamx; python_step=1
for a in "$@"; do
  case "$a" in
    noamx|amx|cuda) variant=$a ;;
    --no-python) python_step=0 ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) echo "unknown argument: $a" >&2; exit 2 ;;
  esac
done
[ "$variant" != noamx ] && python_step=0

jobs=${JOBS:-2}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/infinipot/llama.cpp
sdist_name=llama_cpp_python-$LCP_VERSION.tar.gz
sdist=$cache/dl/$sdist_name
log() { echo "[build-llama-cpp] $*" >&2; }
mkdir -p "$cache/dl"

# ---- 1. pinned sdist -------------------------------------------------------------------
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$LCP_SHA256" ]; }
if ! sha_ok "$sdist"; then
  if [ -n "${LLAMA_CPP_SDIST:-}" ] && sha_ok "$LLAMA_CPP_SDIST"; then
    cp "$LLAMA_CPP_SDIST" "$sdist.part" && mv "$sdist.part" "$sdist"
  else
    log "downloading llama-cpp-python==$LCP_VERSION sdist from PyPI"
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    # --no-binary for this package only: with :all: pip also builds the sdist's build
    # dependencies (scikit-build-core, hatchling, setuptools...) from source just to read its
    # metadata, minutes instead of seconds.
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
      --dest "$tmp" "llama-cpp-python==$LCP_VERSION" >&2
    mv "$tmp/$sdist_name" "$sdist"
  fi
  sha_ok "$sdist" || { log "error: $sdist does not match sha256 $LCP_SHA256"; exit 1; }
fi

# ---- 2. unpack (and patch for the amx variant) -----------------------------------------
srcdir=$cache/src-$variant
top=$srcdir/llama_cpp_python-$LCP_VERSION
if [ ! -f "$srcdir/.unpacked-$LCP_VERSION" ]; then
  log "unpacking into $srcdir"
  rm -rf "$srcdir" && mkdir -p "$srcdir"
  tar -xzf "$sdist" -C "$srcdir"
  if [ "$variant" = amx ]; then
    mmq=$top/vendor/llama.cpp/ggml/src/ggml-cpu/amx/mmq.cpp
    grep -q '^ *_tile_loadconfig(&tc);' "$mmq" || { log "error: patch site not found in $mmq"; exit 1; }
    sed -i 's|^\( *\)_tile_loadconfig(&tc);|\1asm volatile("" ::: "memory");  /* infinipot: GCC 12 AMX workaround */\n\1_tile_loadconfig(\&tc);|' "$mmq"
    grep -q 'infinipot: GCC 12 AMX workaround' "$mmq" || { log "error: patch failed"; exit 1; }
  fi
  touch "$srcdir/.unpacked-$LCP_VERSION"
fi
llama_src=$top/vendor/llama.cpp

# ---- 3. cmake build --------------------------------------------------------------------
cpu_has() { grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -qx "$1"; }
onoff() { if cpu_has "$1"; then echo ON; else echo OFF; fi; }
isa=(
  -DGGML_NATIVE=OFF
  -DGGML_AVX="$(onoff avx)" -DGGML_AVX2="$(onoff avx2)" -DGGML_FMA="$(onoff fma)"
  -DGGML_F16C="$(onoff f16c)" -DGGML_BMI2="$(onoff bmi2)" -DGGML_AVX_VNNI="$(onoff avx_vnni)"
  -DGGML_AVX512="$(onoff avx512f)" -DGGML_AVX512_VBMI="$(onoff avx512vbmi)"
  -DGGML_AVX512_VNNI="$(onoff avx512_vnni)" -DGGML_AVX512_BF16="$(onoff avx512_bf16)"
)
if [ "$variant" = amx ]; then
  cpu_has amx_tile && cpu_has amx_int8 || { log "error: this CPU has no AMX"; exit 1; }
  isa+=(-DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16="$(onoff amx_bf16)")
else
  isa+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
fi
if [ "$variant" = cuda ]; then
  command -v nvcc >/dev/null || { log "error: the cuda variant needs nvcc on PATH"; exit 1; }
  # The driver's libcuda.so.1 is on the GPU machine only (here a link stub): the programs
  # link with its symbols left to the loader there.
  # One card: no NCCL, one library fewer to find there.
  isa+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DGGML_CUDA_NCCL=OFF
        -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined)
fi
build=$cache/build-$variant
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$build/CMakeCache.txt" ]; then
  log "configuring $build"
  cmake -S "$llama_src" -B "$build" "${gen[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF \
    -DLLAMA_BUILD_NUMBER=0 -DLLAMA_BUILD_COMMIT="$LLAMA_CPP_COMMIT" \
    "${isa[@]}" >&2
fi
targets=(llama-perplexity llama-bench llama-tokenize llama-completion llama-simple)
[ -n "${TARGETS:-}" ] && read -r -a targets <<< "$TARGETS"
log "building ${targets[*]} (-j$jobs)"
t0=$(date +%s)
cmake --build "$build" --config Release -j "$jobs" --target "${targets[@]}" >&2
log "build step took $(( $(date +%s) - t0 )) s"
bindir=$build/bin
for t in "${targets[@]}"; do [ -x "$bindir/$t" ] || { log "error: $bindir/$t missing"; exit 1; }; done
printf '%s\n' "llama-cpp-python=$LCP_VERSION" "llama.cpp=$LLAMA_CPP_COMMIT" "variant=$variant" \
  "flags=${isa[*]}" > "$build/infinipot-build-info.txt"

# ---- 4. python package `llama_cpp`, using the library built above ------------------------
# The sdist's CMakeLists has option LLAMA_BUILD (default ON); with it OFF, pip installs only the
# Python sources. We then symlink our shared libraries into llama_cpp/lib, where the package
# looks by default (LLAMA_CPP_LIB_PATH is not needed).
py_ok() {
  python3 - "$bindir" <<'EOF' >/dev/null 2>&1
import sys, os, importlib.util
spec = importlib.util.find_spec("llama_cpp")
assert spec is not None
lib = os.path.join(spec.submodule_search_locations[0], "lib", "libllama.so")
assert os.path.realpath(lib).startswith(os.path.realpath(sys.argv[1]))
import llama_cpp
assert llama_cpp.__version__ == os.environ["LCP_VERSION"]
EOF
}
export LCP_VERSION
if [ "$python_step" = 1 ] && ! py_ok; then
  log "installing python package llama-cpp-python==$LCP_VERSION without its native build"
  CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" FORCE_CMAKE=1 \
    python3 -m pip install --quiet --force-reinstall --no-deps --no-cache-dir "$sdist" >&2
  # its runtime deps, only where missing (numpy, jinja2, typing-extensions, diskcache)
  python3 -m pip install --quiet "numpy>=1.20.0" "jinja2>=2.11.3" "typing-extensions>=4.5.0" \
    "diskcache>=5.6.1" >&2
  pkgdir=$(python3 -c 'import importlib.util as u; print(u.find_spec("llama_cpp").submodule_search_locations[0])')
  mkdir -p "$pkgdir/lib"
  for f in "$bindir"/lib*.so*; do ln -sfn "$f" "$pkgdir/lib/$(basename "$f")"; done
  py_ok || { log "error: python3 -c 'import llama_cpp' still fails"; exit 1; }
  log "python: llama_cpp $LCP_VERSION -> $pkgdir (libs symlinked from $bindir)"
fi

echo "$bindir"
