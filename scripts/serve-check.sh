#!/usr/bin/env bash
# Runs the server's client tests (tests/server/test_serve.py: the official openai package and
# curl) against the real SmolLM2 model instead of the tiny one CI uses. Builds first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/fetch-model.sh" >/dev/null
"$root/scripts/build.sh"
build=${INFINIPOT_BUILD_DIR:-$root/build}
exec python3 "$root/tests/server/test_serve.py" "$build/infinipot" "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$@"
