#!/usr/bin/env bash
# The main job: a question about a long document (data/demo/long_document.txt, 8.6K tokens),
# answered on the default OpenCL device under a device-memory cap, streaming the answer
# and then printing speed and peak device memory. Installs what is missing, fetches and
# verifies the model, builds in Release. Override: DEVICE_MEM=512M scripts/demo.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/deps.sh"
"$root/scripts/fetch-model.sh"
"$root/scripts/build.sh"
doc=${DOCUMENT:-$root/data/demo/long_document.txt}
question=${QUESTION:-$(cat "$(dirname "$doc")/question.txt")}
echo "document: $doc ($(wc -w < "$doc") words)"
echo "question: $question"
echo "device memory cap: ${DEVICE_MEM:-1G}, memory pot: ${POT:-1024} entries (POT=0: full KV cache)"
echo
pot=()
if [ "${POT:-1024}" != 0 ]; then pot=(--pot "${POT:-1024}"); fi
exec "$root/build/infinipot" run -m "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" \
  -f "$doc" -q "$question" -n "${N_PREDICT:-96}" --device-mem "${DEVICE_MEM:-1G}" "${pot[@]}" "$@"
