#!/usr/bin/env bash
# Our perplexity on each generated family file (the 12 of tests/fixtures/family_reference.json),
# as the fixture measured llama.cpp's: data/perplexity.txt, every window of 128 tokens, fp32 KV.
# Appends one JSON record per file to OUT (default bench/results/families/families.jsonl),
# which `python3 bench/tables.py families` reads for docs/models.md.
#
# Usage: scripts/family-perplexity.sh [OUT]
#   The files are made by scripts/reference/make_family_models.py into
#   ~/.cache/infinipot/family-models (where the family tests keep them) and sha256-checked
#   against the fixture. Env: INFINIPOT (default build/infinipot).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/bench/results/families/families.jsonl}
bin=${INFINIPOT:-$root/build/infinipot}
models=${XDG_CACHE_HOME:-$HOME/.cache}/infinipot/family-models
fixture=$root/tests/fixtures/family_reference.json
[ -x "$bin" ] || { echo "family-perplexity: $bin is not built (scripts/build.sh builds it)" >&2; exit 2; }
mkdir -p "$models" "$(dirname "$out")"
cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$fixture" <<'PY' > "$models/.list"
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    print(m["file"], m["sha256"], m["seed"], m["perplexity"]["ctx"], m["perplexity"]["chunks"])
PY
while read -r file sha seed ctx chunks; do
  path=$models/$file
  if [ ! -f "$path" ] || [ "$(sha256sum "$path" | cut -d' ' -f1)" != "$sha" ]; then
    python3 "$root/scripts/reference/make_family_models.py" --seed "$seed" --out "$models" --only "${file%.gguf}" >&2
  fi
  [ "$(sha256sum "$path" | cut -d' ' -f1)" = "$sha" ] || { echo "family-perplexity: $file has other bytes than the fixture's" >&2; exit 3; }
  r=$("$bin" perplexity -m "$path" -f "$root/data/perplexity.txt" -c "$ctx" --chunks "$chunks" --kv-type f32 --json)
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(file=sys.argv[2], sha256=sys.argv[3], cpu=sys.argv[4], commit=sys.argv[5]); print(json.dumps(r))' \
    "$r" "$file" "$sha" "$cpu" "$commit" | tee -a "$out"
done < "$models/.list"
