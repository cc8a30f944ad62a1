#!/usr/bin/env bash
# The installed package, as an application sees it: `cmake --install BUILD` into a temporary
# prefix, examples/ configured with find_package(infinipot) against that prefix (and nothing
# of this source tree), built and run on MODEL; the pkg-config file checked; include/infinipot.h
# compiled as C89 with -pedantic -Werror. Run by ctest (tests/CMakeLists.txt).
#   scripts/test-package.sh BUILD_DIR MODEL.gguf
set -euo pipefail
build=${1:?usage: test-package.sh BUILD_DIR MODEL.gguf}
model=${2:?usage: test-package.sh BUILD_DIR MODEL.gguf}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infinipot-package-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/infinipot.h lib/cmake/infinipot/infinipotConfig.cmake lib/pkgconfig/infinipot.pc bin/infinipot; do
  [ -e "$prefix/$f" ] || { echo "test-package: $f was not installed" >&2; exit 1; }
done
ls "$prefix"/lib/libinfinipot.* >/dev/null

# A copy of examples/ outside the tree, so nothing but the prefix can be found.
cp -r "$root/examples" "$tmp/examples"
# A sanitizer build's library needs the sanitizer runtime in the executable too.
san=()
if grep -q "^INFINIPOT_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
  san=(-DCMAKE_C_FLAGS=-fsanitize=address,undefined -DCMAKE_CXX_FLAGS=-fsanitize=address,undefined
       -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined)
fi
# A cross build (scripts/test-aarch64.sh): the example is cross-built too, and run through
# the emulator in INFINIPOT_TEST_EMULATOR.
cross=()
toolchain=$(sed -n 's/^CMAKE_TOOLCHAIN_FILE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[ -n "$toolchain" ] && cross=(-DCMAKE_TOOLCHAIN_FILE="$toolchain")
cmake -S "$tmp/examples" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release "${san[@]}" "${cross[@]}" >/dev/null
cmake --build "$tmp/build" >/dev/null
grep -q -- "-I$prefix/include\|-isystem $prefix/include" "$tmp/build/CMakeFiles/read_and_ask.dir/flags.make" || {
  echo "test-package: the example was not compiled against the installed header" >&2; exit 1; }

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags infinipot)
pkg-config --libs infinipot | grep -q -- "-linfinipot"
cc -std=c89 -pedantic -Wall -Wextra -Werror $flags -c "$tmp/examples/read_and_ask.c" -o "$tmp/c89.o"

doc=$tmp/doc.txt
for i in $(seq 1 40); do echo "Line $i of the log: the vault code is 5831, and the gate opens at noon."; done > "$doc"
LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  ${toolchain:+${INFINIPOT_TEST_EMULATOR:-}} "$tmp/build/read_and_ask" "$model" "$doc" "What is the vault code?" 320 64 >"$tmp/out" 2>"$tmp/err" || {
  echo "test-package: read_and_ask failed:" >&2; cat "$tmp/err" >&2; exit 1; }
grep -q "distillations" "$tmp/err" || { echo "test-package: no figures from read_and_ask" >&2; cat "$tmp/err" >&2; exit 1; }
n=$(sed -n 's/.* generated, \([0-9]*\) distillations.*/\1/p' "$tmp/err")
[ "${n:-0}" -gt 0 ] || { echo "test-package: the document was not distilled (pot 320)" >&2; cat "$tmp/err" >&2; exit 1; }
echo "test-package: installed to $prefix, built examples/read_and_ask against it, answered with $n distillations"
