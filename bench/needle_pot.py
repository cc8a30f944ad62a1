#!/usr/bin/env python3
"""Needle-in-a-haystack (passkey) benchmark of the memory pot, after the paper's NIH task.

A five-digit pass key is hidden at several depths of a haystack of natural text
(data/perplexity.txt, public-domain KJV Genesis, cut to the target length); the model is
asked for it. Each case runs `infinipot run --json` with
  full       a full KV cache (only where the document fits --full-max tokens)
  infinipot  --pot N (CaP + NuC, CR-RoPE)
  recent     --pot N --pot-policy recent (chat prefix + latest text: StreamingLLM-style)
and records whether the answer contains the key, whether the pot still holds the needle
(--pot-watch), time to first token and peak device memory. Prints a table and writes JSON.

Usage: bench/needle_pot.py [--lengths 2000,4000] [--depths 0.1,0.5,0.9] [--pot 1024]
                           [--methods full,infinipot,recent] [--json out.json] [--seed 7]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUESTION = "What is the pass key? Answer with the number only."


def needle(key):
    return f" The pass key is {key}. Remember it. {key} is the pass key. "


def tokens_of(binary, model, text):
    out = subprocess.run([binary, "tokenize", "-m", model, "--json", "-p", text],
                         check=True, capture_output=True, text=True).stdout
    return len(json.loads(out)["tokens"])


def make_document(haystack, n_tokens, depth, key, chars_per_token):
    """About n_tokens of haystack with the needle at `depth` (cut at sentence ends)."""
    text = haystack[: int(n_tokens * chars_per_token)]
    text = text[: text.rfind(".") + 1]
    at = int(len(text) * depth)
    cut = text.rfind(". ", 0, at)
    cut = 0 if cut < 0 else cut + 1
    return text[:cut] + needle(key) + text[cut:].lstrip()


def run_case(binary, model, doc_path, method, pot, keep, n_predict, extra, needle_key):
    cmd = [binary, "run", "-m", model, "-f", doc_path, "-q", QUESTION, "-n", str(n_predict), "--json"]
    if method != "full":
        cmd += ["--pot", str(pot), "--pot-watch", needle_key]
        if keep:
            cmd += ["--keep", str(keep)]
        if method == "recent":
            cmd += ["--pot-policy", "recent"]
    cmd += extra
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}",
                "wall_s": wall}
    j = json.loads(p.stdout)
    j["wall_s"] = wall
    return j


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "infinipot"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--haystack", default=os.path.join(ROOT, "data", "perplexity.txt"))
    ap.add_argument("--lengths", default="2000,4000")
    ap.add_argument("--depths", default="0.1,0.5,0.9")
    ap.add_argument("--methods", default="full,infinipot,recent")
    ap.add_argument("--pot", type=int, default=1024)
    ap.add_argument("--keep", type=int, default=0)
    ap.add_argument("--full-max", type=int, default=8192, help="longest document run with a full cache")
    ap.add_argument("-n", type=int, default=12)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("extra", nargs="*", help="more flags for `infinipot run` (after --)")
    a = ap.parse_args()
    for path, what in ((a.binary, "binary (scripts/build.sh)"), (a.model, "model (scripts/fetch-model.sh)"),
                       (a.haystack, "haystack text")):
        if not os.path.exists(path):
            sys.exit(f"needle_pot: {what} not found at {path}")
    haystack = " ".join(open(a.haystack, encoding="utf-8").read().split())
    sample = haystack[:20000]
    chars_per_token = len(sample) / tokens_of(a.binary, a.model, sample)
    rng = random.Random(a.seed)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_tokens in [int(x) for x in a.lengths.split(",")]:
            if n_tokens * chars_per_token > len(haystack):
                sys.exit(f"needle_pot: the haystack holds about {int(len(haystack) / chars_per_token)} tokens, "
                         f"less than {n_tokens}")
            for depth in [float(x) for x in a.depths.split(",")]:
                key = str(rng.randrange(10000, 100000))
                doc = make_document(haystack, n_tokens, depth, key, chars_per_token)
                path = os.path.join(tmp, "doc.txt")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(doc)
                for method in a.methods.split(","):
                    if method == "full" and n_tokens > a.full_max:
                        continue
                    r = run_case(a.binary, a.model, path, method, a.pot, a.keep, a.n, a.extra, key)
                    row = {"length": n_tokens, "depth": depth, "method": method, "key": key,
                           "prompt_tokens": r.get("prompt_tokens"), "answer": r.get("text", ""),
                           "correct": key in r.get("text", ""), "ttft_s": r.get("ttft_s"),
                           "peak_device_bytes": r.get("peak_device_bytes"), "error": r.get("error")}
                    pot = r.get("pot")
                    if pot:
                        row["cycles"] = pot["cycles"]
                        row["needle_kept"] = pot.get("watch", {}).get("kept_fraction")
                    results.append(row)
                    print(f"{n_tokens:>6} {depth:4.1f} {method:>9}  {'yes' if row['correct'] else 'no ':>3}  "
                          f"{(row['answer'] or row['error'] or '').strip()[:40]!r}", file=sys.stderr, flush=True)

    print("\n| length | depth | method | correct | needle kept | cycles | TTFT s | peak MiB | answer |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---|")
    for r in results:
        kept = "" if r.get("needle_kept") is None else f"{100 * r['needle_kept']:.0f}%"
        peak = "" if not r["peak_device_bytes"] else f"{r['peak_device_bytes'] / 2**20:.0f}"
        ttft = "" if r["ttft_s"] is None else f"{r['ttft_s']:.1f}"
        ans = (r["answer"] or r["error"] or "").strip().replace("|", "/").replace("\n", " ")[:30]
        print(f"| {r['prompt_tokens'] or r['length']} | {r['depth']} | {r['method']} | {'yes' if r['correct'] else 'no'} "
              f"| {kept} | {r.get('cycles', '')} | {ttft} | {peak} | {ans} |")
    summary = {}
    for r in results:
        s = summary.setdefault(r["method"], [0, 0])
        s[0] += r["correct"]
        s[1] += 1
    print("\n" + ", ".join(f"{m}: {c}/{n} correct" for m, (c, n) in summary.items()))
    out = {"pot": a.pot, "keep": a.keep, "seed": a.seed, "results": results,
           "summary": {m: {"correct": c, "cases": n} for m, (c, n) in summary.items()}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
