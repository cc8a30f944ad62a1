#!/usr/bin/env bash
# Cross-builds infinipot for aarch64 (cmake/toolchains/aarch64-linux-gnu.cmake) and runs the
# test suite under qemu-aarch64, with PoCL for arm64 from Debian's packages as the OpenCL
# device. Skips with a message (exit 0) when the cross tools are missing; --install adds them
# (root, apt, needs arm64 in dpkg's architectures: it adds it).
#   scripts/test-aarch64.sh [--install] [--all] [ctest arguments, e.g. -R Quant]
# Environment: BUILD (default build-aarch64), INFINIPOT_ARM64_ROOT (default
# ~/.cache/infinipot/arm64-root), INFINIPOT_MODEL (a GGUF for the model tests), JOBS,
# INFINIPOT_AARCH64_EXCLUDE (the ctest -E regex used without --all; below).
#
# Under qemu-user every instruction is emulated and PoCL compiles each kernel with its own
# LLVM under emulation: a test runs 20-100x slower than natively (the attention kernel test,
# 24 s natively, took 472 s). The tests that run the real 135M model's forward pass, and
# the device-choice sweep up to 65,536 entries, would take hours each, so without --all they
# are left out (the list is printed); everything else runs, the tiny-model forward pass,
# every kernel family and the C API included. --all runs the whole suite.
#
# Why PoCL lives in a private root: Debian 12's libpocl2 is not Multi-Arch: same, so
# installing libpocl2:arm64 removes the host's libpocl2 (and clang-15:arm64 pulls
# binutils:arm64, which removes the host's compilers). The arm64 PoCL and what it needs are
# therefore downloaded and unpacked into INFINIPOT_ARM64_ROOT, and qemu-aarch64 -L finds them.
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root_dir/build-aarch64}
arm64_root=${INFINIPOT_ARM64_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/infinipot/arm64-root}
install=0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
all=0
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1; shift ;;
    --all) all=1; shift ;;
    *) break ;;
  esac
done
slow_under_emulation='^(CliPot|CliOutputs|ModelReference|ModelReferenceF16Kv|ModelReferenceInt8Matvec|MemoryPotRealModel|KvTypes/KvStoreTest|Tune|PotSelectKernel|PotSnapshotCli|Profile|Bench)[.]|RealModel|OutOfResourcesMidGeneration'
exclude=${INFINIPOT_AARCH64_EXCLUDE:-$slow_under_emulation}

dev_pkgs=(ocl-icd-opencl-dev:arm64 libclblast-dev:arm64 libfmt-dev:arm64 libpcre2-dev:arm64
          libgtest-dev:arm64 libgmock-dev:arm64 libstdc++-12-dev:arm64)
host_pkgs=(g++-aarch64-linux-gnu qemu-user)
pocl_so=$arm64_root/usr/lib/aarch64-linux-gnu/libpocl.so.2

missing() {
  local m=()
  for p in "${host_pkgs[@]}" "${dev_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || m+=("$p")
  done
  [ -e "$pocl_so" ] || m+=("arm64 PoCL in $arm64_root")
  echo "${m[*]}"
}

if [ -n "$(missing)" ] && [ $install = 1 ]; then
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${host_pkgs[@]}" "${dev_pkgs[@]}"
  if [ ! -e "$pocl_so" ]; then
    debs=$(mktemp -d "${TMPDIR:-/tmp}/arm64-debs-XXXXXX")
    mkdir -p "$debs/partial"
    # Download only: the packages apt would install next to what is there, unpacked below.
    $SUDO apt-get install -y -qq --download-only --no-install-recommends -o Dir::Cache::archives="$debs" \
      pocl-opencl-icd:arm64 ocl-icd-libopencl1:arm64 >/dev/null
    mkdir -p "$arm64_root"
    for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$arm64_root"; done
    $SUDO rm -rf "$debs"
  fi
fi
if [ -n "$(missing)" ]; then
  echo "test-aarch64: skipped: missing $(missing); scripts/test-aarch64.sh --install adds them"
  exit 0
fi

# The OpenCL loader is told where the arm64 PoCL is (a path inside the root, which qemu
# resolves). PoCL looks for its kernel library through a path qemu does not map into the
# root, so the host's /usr/share/pocl gets a link to the arm64 one (the host's PoCL ignores it).
vendors=$arm64_root/etc/OpenCL/arm64-vendors
mkdir -p "$vendors"
echo /usr/lib/aarch64-linux-gnu/libpocl.so.2 > "$vendors/pocl.icd"
for bc in "$arm64_root"/usr/share/pocl/kernel-aarch64-*.bc; do
  [ -e "/usr/share/pocl/$(basename "$bc")" ] || $SUDO ln -s "$bc" /usr/share/pocl/
done

emu="qemu-aarch64 -L $arm64_root"
export OCL_ICD_VENDORS=$vendors
export INFINIPOT_TEST_EMULATOR=$emu
export POCL_CACHE_DIR=$build/pocl-cache

t0=$(date +%s)
cmake -S "$root_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$root_dir/cmake/toolchains/aarch64-linux-gnu.cmake" \
  -DCMAKE_CROSSCOMPILING_EMULATOR="qemu-aarch64;-L;$arm64_root" >/dev/null
cmake --build "$build" -j "${JOBS:-$(nproc)}"
file "$build/infinipot" | grep -q "ARM aarch64" || { echo "test-aarch64: $build/infinipot is not an aarch64 program" >&2; exit 1; }
$emu "$build/infinipot" devices
echo "test-aarch64: built in $(( $(date +%s) - t0 )) s"
cd "$build"
select=()
if [ $all = 0 ]; then
  select=(-E "$exclude")
  echo "test-aarch64: leaving out (slow under emulation; --all runs them): $(ctest -N -R "$exclude" | grep -c 'Test *#') tests matching $exclude"
fi
ctest --output-on-failure --timeout 3600 -j "${JOBS:-$(nproc)}" "${select[@]}" "$@"
echo "test-aarch64: $( [ $all = 1 ] && echo "whole suite" || echo "suite without the tests above") passed under qemu-aarch64 in $(( $(date +%s) - t0 )) s"
