#!/usr/bin/env python3
"""The results tables of docs/*.md, made from the committed records (Python 3, stdlib only).

Each generated table in a page sits between two comment lines:

    <!-- table: python3 bench/tables.py nih bench/results/nih/nih-pocl.jsonl --haystack passkey -->
    | ... the table ... |
    <!-- end table -->

Commands:
  tables.py nih FILE --haystack H [--task T] [--configs C1,C2,...] [--by length|depth]
      a table that `infinipot nih --table-only --out FILE` prints, keeping the rows of the
      configs given (in that order; all rows without --configs)
  tables.py potsizes FILE --haystack H [--task T]
      found / needle kept whole / peak device / host RSS / distillations per pot size, for
      infinipot and streaming (and `full`) on one haystack and length
  tables.py keep FILE
      --keep auto against the fixed half: per task, haystack, length and pot, keys (or the
      task's score) found by each over every seed, the distillations (median) and the entries
      auto kept a cycle (median of the trials' means)
  tables.py bench FILE [FILE ...]
      `infinipot bench` rows (bench/results/bench/*.json) by context: our pot, our full cache,
      llama.cpp; a later file's row of the same context and engine wins
  tables.py families FIXTURE RECORDS
      per generated family file: llama.cpp's perplexity (tests/fixtures/family_reference.json,
      on the file and, for quantized files, on its weights dequantized to F32) beside ours
      (scripts/family-perplexity.sh's records; a later record of the same file wins)
  tables.py --check PATH [PATH ...]
      regenerate every marked table of the .md files (directories: their *.md) and exit 1
      naming the first one that differs from the page, else 0

--infinipot PATH (or $INFINIPOT) names the binary the nih tables come from (default build/infinipot).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

MIB = 1024 * 1024
GIB = 1024 * MIB
BEGIN = "<!-- table: "
END = "<!-- end table -->"


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---- nih: the tables `infinipot nih --table-only` prints -----------------------------------

def nih_table(args, binary):
    try:
        out = subprocess.run([binary, "nih", "--table-only", "--out", args.file], capture_output=True, text=True)
    except OSError as e:
        raise SystemExit(f"cannot run {binary} (--infinipot PATH or $INFINIPOT names the binary): {e}")
    if out.returncode != 0:
        raise SystemExit(f"{binary} nih --table-only --out {args.file} failed: {out.stderr.strip()}")
    title = "### %s: %s" % (args.haystack, "pass key found, by length (tokens)" if args.by == "length" else "by depth")
    if args.task != "passkey":
        title = "### %s / %s:" % (args.task, args.haystack)
    lines = out.stdout.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(title) and (args.by == "length") == ("by depth" not in l)), None)
    if start is None:
        raise SystemExit(f"no table '{title}' in the tables of {args.file}")
    table = []
    for l in lines[start + 1:]:
        if l.startswith("|"):
            table.append(l)
        elif table:
            break
    head, rows = table[:2], table[2:]
    if args.configs:
        wanted = args.configs.split(",")
        by_config = {}
        for r in rows:
            by_config.setdefault(r.split("|")[1].strip(), []).append(r)
        missing = [c for c in wanted if c not in by_config]
        if missing:
            raise SystemExit(f"{args.file}: no rows for {', '.join(missing)}")
        rows = [r for c in wanted for r in by_config[c]]
    return head + rows


# ---- potsizes: one haystack and length, a row per pot size ---------------------------------

def potsizes_table(args):
    recs = [r for r in read_jsonl(args.file)
            if r.get("haystack") == args.haystack and r.get("task", "passkey") == args.task and "error" not in r]
    cells = {}
    for r in recs:
        cells.setdefault((r["policy"], r.get("pot") or 0), []).append(r)

    def found(rs):
        return "%d/%d" % (sum(1 for r in rs if r.get("found")), len(rs))

    def kept(rs):
        return "%d/%d" % (sum(1 for r in rs if r.get("needle_kept") == 1.0), len(rs))

    def resources(rs):
        dev = max(r["peak_device_bytes"] for r in rs) / MIB
        rss = [r["host_peak_rss"] for r in rs if r.get("host_peak_rss")]
        cyc = statistics.median(r.get("ccd_cycles", 0) for r in rs)
        return ["%.1f" % dev, "%.0f" % (max(rss) / MIB) if rss else "-", "%g" % cyc]

    out = ["| pot (entries) | infinipot found | needle kept whole | streaming found | peak device MiB | host peak RSS MiB | distillations (median) |",
           "|---:|---:|---:|---:|---:|---:|---:|"]
    for pot in sorted({p for (pol, p) in cells if pol == "infinipot"}):
        ip, st = cells[("infinipot", pot)], cells.get(("streaming", pot), [])
        out.append("| %s | %s | %s | %s | %s |" % ("{:,}".format(pot), found(ip), kept(ip), found(st) if st else "",
                                                    " | ".join(resources(ip))))
    if ("full", 0) in cells:
        full = cells[("full", 0)]
        out.append("| `full` | %s | | | %s |" % (found(full), " | ".join(resources(full))))
    return out


# ---- keep: --keep auto against the fixed half, cell by cell -------------------------------

def keep_table(args):
    recs = [r for r in read_jsonl(args.file) if "error" not in r and r.get("policy") == "infinipot"]
    cells = {}
    for r in recs:
        auto = r["config"].endswith(":keep=auto")
        cells.setdefault((r.get("task", "passkey"), r["haystack"], r["length"], r["pot"]), {}).setdefault(auto, []).append(r)

    def found(rs):
        return "%g/%d" % (sum(r.get("score", float(bool(r.get("found")))) for r in rs), len(rs))

    def cycles(rs):
        return "%g" % statistics.median(r.get("ccd_cycles", 0) for r in rs)

    out = ["| task | haystack | length | pot | seeds | fixed half: found | distillations | auto: found | distillations | kept a cycle (auto) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (task, hay, length, pot) in sorted(cells):
        c = cells[(task, hay, length, pot)]
        fixed, auto = c.get(False, []), c.get(True, [])
        seeds = len({r.get("seed") for r in fixed + auto})
        kept = "%g" % round(statistics.median(r["kept_mean"] for r in auto)) if auto and all("kept_mean" in r for r in auto) else ""
        out.append("| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s |" % (
            task, hay, ctx_label(length), pot, seeds, found(fixed) if fixed else "", cycles(fixed) if fixed else "",
            found(auto) if auto else "", cycles(auto) if auto else "", kept))
    return out


# ---- bench: context-length rows against llama.cpp ------------------------------------------

def size(b):
    return "%.1f MiB" % (b / MIB) if b < GIB else "%.2f GiB" % (b / GIB)


def ctx_label(n):
    return "%dK" % (n // 1024) if n % 1024 == 0 else str(n)


def bench_table(args):
    rows = {}
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            for r in json.load(f):
                if r.get("engine") == "llama.cpp" or r.get("policy") == "llama.cpp":
                    engine = (2, "llama.cpp, full cache")
                elif r.get("policy") == "full":
                    engine = (1, "infinipot, full cache")
                else:  # policy_config: the policy with its settings (bench --policy infinipot:nuc_stride=4)
                    label = r.get("policy_config", r["policy"])
                    engine = (0, "infinipot, %s %s" % ("pot" if label == "infinipot" else label + ", pot", r.get("pot")))
                rows[(r["ctx"], engine)] = r
    out = ["| context | engine | prefill tok/s | decode tok/s | TTFT s | distillation s (share of TTFT) | peak device | of which KV | host peak RSS |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (ctx, (_, name)), r in sorted(rows.items()):
        if "error" in r:
            need = r["error"].split("this run needs ")[-1].split(" (")[0] if "this run needs" in r["error"] else "?"
            budget = size(r["device_mem"]).replace("1.00 GiB", "1 GiB")
            out.append("| %s | %s | does not fit %s: needs %s | | | | | | |" % (ctx_label(ctx), name, budget, need))
            continue
        distill = "-" if not r.get("ccd_cycles") else "%.1f (%.1f%%)" % (r["cd_time_s"], 100 * r["cd_share_of_ttft"])
        if r.get("ccd_cycles") and r["cd_time_s"] < 1:
            distill = "%.2f (%.1f%%)" % (r["cd_time_s"], 100 * r["cd_share_of_ttft"])
        dev = r.get("peak_device_bytes")
        kv = (r.get("device_bytes") or {}).get("kv_cache")
        ttft = r["ttft_s"]
        out.append("| %s | %s | %.1f | %s | %s | %s | %s | %s | %s |" % (
            ctx_label(ctx), name, r["prefill_tok_s"],
            "%.2f" % r["decode_tok_s"] if r["decode_tok_s"] < 10 else "%.1f" % r["decode_tok_s"],
            "{:,.0f}".format(ttft) if ttft >= 1000 else ("%.2f" % ttft if ttft < 1 else "%.1f" % ttft), distill,
            size(dev) if dev else "-", size(kv) if kv else "", size(r["host_peak_rss"])))
    return out


def families_table(args):
    with open(args.fixture, encoding="utf-8") as f:
        models = json.load(f)["models"]
    ours = {r["file"]: r for r in read_jsonl(args.records)}
    names = {"qwen2": "Qwen2 / Qwen2.5", "qwen3": "Qwen3", "phi3": "Phi-3", "llama32": "Llama 3.2 (llama)"}
    out = ["| family | weights | llama.cpp PPL | infinipot PPL | difference | llama.cpp, F32 weights | difference | CPU |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    for m in models:
        r = ours.get(m["file"])
        if r is None:
            raise SystemExit(f"{args.records} has no record of {m['file']} (scripts/family-perplexity.sh makes them)")
        if r["sha256"] != m["sha256"]:
            raise SystemExit(f"{args.records}: {m['file']} was measured on other bytes than the fixture's")
        ref, got = m["perplexity"]["ppl"], r["perplexity"]
        f32 = m.get("f32_weights", {}).get("perplexity", {}).get("ppl")
        out.append("| %s | %s | %.4g | %.4g | %+.2f%% | %s | %s | %s |" % (
            names.get(m["family"], m["family"]), m["weight_type"].upper(), ref, got, 100 * (got / ref - 1),
            "%.4g" % f32 if f32 else "(the file)", "%+.2f%%" % (100 * (got / f32 - 1)) if f32 else "",
            r["cpu"]))
    return out


# ---- the command line and --check ----------------------------------------------------------

def parser():
    p = argparse.ArgumentParser(prog="bench/tables.py", description=__doc__.split("\n")[0])
    p.add_argument("--infinipot", default=os.environ.get("INFINIPOT", "build/infinipot"))
    p.add_argument("--check", nargs="+", metavar="PATH")
    sub = p.add_subparsers(dest="kind")
    n = sub.add_parser("nih")
    n.add_argument("file")
    n.add_argument("--haystack", required=True)
    n.add_argument("--task", default="passkey")
    n.add_argument("--configs")
    n.add_argument("--by", choices=["length", "depth"], default="length")
    s = sub.add_parser("potsizes")
    s.add_argument("file")
    s.add_argument("--haystack", required=True)
    s.add_argument("--task", default="passkey")
    k = sub.add_parser("keep")
    k.add_argument("file")
    b = sub.add_parser("bench")
    b.add_argument("files", nargs="+")
    fa = sub.add_parser("families")
    fa.add_argument("fixture")
    fa.add_argument("records")
    return p


def make(args, binary):
    if args.kind == "nih":
        return nih_table(args, binary)
    if args.kind == "potsizes":
        return potsizes_table(args)
    if args.kind == "keep":
        return keep_table(args)
    if args.kind == "bench":
        return bench_table(args)
    if args.kind == "families":
        return families_table(args)
    raise SystemExit("name a table: nih, potsizes, keep, bench or families (or --check PATH)")


def marked_tables(path):
    """(line number, command, the table's lines) for every marked table of one page."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    found = []
    for i, l in enumerate(lines):
        if l.startswith(BEGIN):
            cmd = l[len(BEGIN):].rstrip().removesuffix("-->").strip()
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == END), None)
            if end is None:
                raise SystemExit(f"{path}:{i + 1}: a table with no '{END}' line")
            found.append((i + 1, cmd, lines[i + 1:end]))
    return found


def check(paths, binary):
    pages = []
    for p in paths:
        if os.path.isdir(p):
            pages += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".md"))
        else:
            pages.append(p)
    count = 0
    for page in pages:
        for line, cmd, text in marked_tables(page):
            words = shlex.split(cmd)
            if words[:2] != ["python3", "bench/tables.py"]:
                print(f"{page}:{line}: not a bench/tables.py command: {cmd}")
                return 1
            want = make(parser().parse_args(words[2:]), binary)
            if want != text:
                diff = next((k for k in range(max(len(want), len(text)))
                             if k >= len(want) or k >= len(text) or want[k] != text[k]), 0)
                print(f"{page}:{line}: the table differs from `{cmd}`")
                print("  page:    %s" % (text[diff] if diff < len(text) else "(no line)"))
                print("  records: %s" % (want[diff] if diff < len(want) else "(no line)"))
                return 1
            count += 1
    print(f"{count} tables in {len(pages)} pages match their records")
    return 0


def main():
    args = parser().parse_args()
    if args.check:
        return check(args.check, args.infinipot)
    print("\n".join(make(args, args.infinipot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
