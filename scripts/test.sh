#!/usr/bin/env bash
# Installs what is missing, fetches and verifies the models, builds, and runs the whole
# test suite with ctest. Idempotent: a second run reuses the packages, model and build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/fetch-model.sh" all  # SmolLM2 and Gemma 3 270M (the tokenizer and inspect tests read both)
"$root/scripts/build.sh"
build=${INFINIPOT_BUILD_DIR:-$root/build}
cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
