#!/usr/bin/env bash
# Regenerates data/perplexity.txt: the King James Version of the Bible (public domain),
# Genesis chapters 1-30, taken from Debian's bible-kjv-text package with its `bible` reader
# (package bible-kjv). One paragraph per chapter, verse numbers removed.
# Usage: scripts/make-perplexity-text.sh [--check]   (--check: fail if the file would change)
# Needs apt-get (downloads the two .deb files; installs nothing).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/data/perplexity.txt
last_chapter=30
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q bible-kjv bible-kjv-text >/dev/null 2>&1) || {
  echo "error: 'apt-get download bible-kjv bible-kjv-text' failed (run apt-get update?)" >&2; exit 1; }
for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$tmp/x"; done
"$tmp/x/usr/bin/bible" -p "$tmp/x/usr/lib" -f "gen1:1-gen$last_chapter:999" </dev/null >"$tmp/verses"
python3 - "$tmp/verses" "$tmp/out" "$last_chapter" <<'EOF'
import re, sys
chapters = {}
for line in open(sys.argv[1], encoding="ascii"):
    m = re.match(r"Ge(\d+):(\d+) (.*)$", line.rstrip("\n"))
    if not m:
        raise SystemExit(f"unexpected line: {line!r}")
    chapters.setdefault(int(m.group(1)), []).append(m.group(3).strip())
assert sorted(chapters) == list(range(1, int(sys.argv[3]) + 1)), sorted(chapters)
with open(sys.argv[2], "w", encoding="ascii", newline="\n") as f:
    f.write("The First Book of Moses, called Genesis\n\n")
    for c in sorted(chapters):
        f.write(f"Chapter {c}\n\n" + " ".join(chapters[c]) + "\n\n")
EOF
if [ "${1:-}" = "--check" ]; then
  cmp -s "$tmp/out" "$out" && { echo "data/perplexity.txt is up to date"; exit 0; }
  echo "data/perplexity.txt differs from the regenerated text" >&2; exit 1
fi
mkdir -p "$root/data" && cp "$tmp/out" "$out" && echo "$out"
