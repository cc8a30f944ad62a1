#!/usr/bin/env python3
"""Read once, ask many: one long document read through the pot, then asked many questions.

What it measures. It builds a deterministic document of about 32K SmolLM2 tokens (the town
chronicle of scripts/make-document.py, 140 years) with K invented facts (10 by default,
e.g. "The harbour archivist's locker number is 4821.") placed at spread depths (seeded). It
starts its own `infinipot serve` on a free loopback port, then:

  read       POST /v1/documents {"text": DOC}: the wall time of the call and what it returns
             (id, tokens, distillations, read_s).
  q1..qK     one streaming chat completion per fact, with the extension field
             "document": ID (the openai client's extra_body), temperature 0, max_tokens 24,
             stream_options.include_usage. TTFT is measured here, from sending the request to
             the first non-empty content delta.
  baseline   the whole document plus the first question in one user message, without a
             document id: a fresh read, whose TTFT includes reading the whole document.

It stops the server with SIGTERM at the end, also on an error.

    scripts/bench-documents.py --json /tmp/bench-documents.json            # full size
    scripts/bench-documents.py --years 18 --questions 3 --json /tmp/s.json  # quick smoke run

Output: a markdown table on stdout and, with --json, a record with
  machine      cpu (from /proc/cpuinfo), cores, the server's device line, build (`--version`)
  model, model_bytes, pot, device_mem, years, seed, max_tokens
  document     chars, tokens (the server's count), and each fact's depth (fraction of chars)
  rows         one per step: step, wall_s (the call's whole time), ttft_s (client-side; for the
               read, the wall time), prompt_tokens, cached_tokens
               (usage.prompt_tokens_details.cached_tokens), own_tokens (prompt_tokens -
               cached_tokens: what this request read), completion_tokens, reply, expected,
               recalled (the expected answer is in the reply, case and commas ignored), and
               for the read: id, tokens, distillations, read_s.
"""
import argparse
import http.client
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

import openai

from serve_process import ROOT, Server, add_server_args, machine_info


# (statement, question, values): "num:LO:HI" draws a number, a list is picked from.
FACTS = [
    ("The harbour archivist's locker number is {v}.",
     "What is the harbour archivist's locker number? Answer with the number only.", "num:1000:9999"),
    ("The lighthouse keeper's dog was named {v}.",
     "What was the lighthouse keeper's dog named? Answer with the name only.",
     ["Biscuit", "Juniper", "Pepper", "Marlowe", "Thistle"]),
    ("The password of the smugglers' guild was {v}.",
     "What was the password of the smugglers' guild? Answer with the word only.",
     ["marigold", "bluefinch", "nightjar", "quicksilver", "larkspur"]),
    ("The largest bell cast at the foundry on the eastern cliff weighed {v} pounds.",
     "How many pounds did the largest bell cast at the foundry on the eastern cliff weigh? "
     "Answer with the number only.", "num:1000:9999"),
    ("The vicar's favourite colour was {v}.",
     "What was the vicar's favourite colour? Answer with the colour only.",
     ["turquoise", "vermilion", "ochre", "lavender", "crimson"]),
    ("The combination of the safe in the customs house was {v}.",
     "What was the combination of the safe in the customs house? Answer with the number only.",
     "num:10000:99999"),
    ("The ferryman's cat was called {v}.",
     "What was the ferryman's cat called? Answer with the name only.",
     ["Mackerel", "Nutmeg", "Pudding", "Sixpence", "Barnaby"]),
    ("The telescope of the observatory on Gull Point was kept in crate number {v}.",
     "In which crate number was the telescope of the observatory on Gull Point kept? "
     "Answer with the number only.", "num:1000:9999"),
    ("The apothecary kept exactly {v} jars of honey in her cellar.",
     "How many jars of honey did the apothecary keep in her cellar? Answer with the number only.",
     "num:1000:9999"),
    ("The town's first postmistress was born in {v}.",
     "Where was the town's first postmistress born? Answer with the city only.",
     ["Trondheim", "Genoa", "Marseille", "Dubrovnik", "Rotterdam"]),
]


def build_document(years, k, seed):
    """The chronicle with k facts, one in each k-th of its year entries. Returns (text, facts)."""
    tmp = tempfile.mkdtemp(prefix="bench-doc-")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-document.py"), "--out", tmp,
                    "--years", str(years)], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(tmp, "long_document.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for name in os.listdir(tmp):
        os.remove(os.path.join(tmp, name))
    os.rmdir(tmp)
    bodies = [i + 2 for i, line in enumerate(lines) if re.fullmatch(r"The Year \d+", line)]
    rng = random.Random(seed)  # only .random(): the same sequence on every Python 3
    base = "\n".join(lines)
    facts = []
    for i, (statement, question, values) in enumerate(FACTS[:k]):
        while True:
            if isinstance(values, str):
                _, lo, hi = values.split(":")
                v = str(int(lo) + int(rng.random() * (int(hi) - int(lo) + 1)))
            else:
                v = values[int(rng.random() * len(values))]
            # unique: the doc writes numbers from 1,000 up with commas, so 4-5 digits never clash
            if not re.search(r"(?<![\w,])" + re.escape(v) + r"(?![\w,])", base) and \
                    all(v != f["expected"] for f in facts):
                break
        depth = (i + 0.15 + 0.7 * rng.random()) / k
        facts.append({"statement": statement.format(v=v), "question": question, "expected": v,
                      "line": bodies[min(len(bodies) - 1, int(depth * len(bodies)))]})
    for f in facts:
        sents = lines[f["line"]].split(". ")
        sents.insert(len(sents) // 2, f["statement"].rstrip("."))
        lines[f["line"]] = ". ".join(sents)
    text = "\n".join(lines)
    for f in facts:
        assert text.count(f["statement"]) == 1
        f["depth"] = round(text.index(f["statement"]) / len(text), 3)
        del f["line"]
    return text, facts


def ask(client, model, messages, max_tokens, document=None):
    """One streaming chat completion; returns its row (times measured here)."""
    extra = {"document": document} if document else None
    t0 = time.perf_counter()
    ttft, parts, usage = None, [], None
    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens, temperature=0,
                                            stream=True, stream_options={"include_usage": True}, extra_body=extra)
    for ch in stream:
        if ch.choices and ch.choices[0].delta.content:
            if ttft is None:
                ttft = time.perf_counter() - t0
            parts.append(ch.choices[0].delta.content)
        if ch.usage:
            usage = ch.usage
    total = time.perf_counter() - t0
    cached = (usage.prompt_tokens_details.cached_tokens or 0) if usage and usage.prompt_tokens_details else 0
    return {"wall_s": round(total, 3), "ttft_s": None if ttft is None else round(ttft, 3),
            "prompt_tokens": usage.prompt_tokens if usage else None, "cached_tokens": cached,
            "own_tokens": usage.prompt_tokens - cached if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None, "reply": "".join(parts)}


def recalled(reply, expected):
    text = reply.lower().replace(",", "")
    if expected.isdigit():
        return re.search(r"(?<!\d)" + expected + r"(?!\d)", text) is not None
    return expected.lower() in text


def table(rows):
    out = ["| step | wall s | TTFT s | own tokens | cached tokens | recalled | reply |",
           "|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        rec = "" if "recalled" not in r else ("yes" if r["recalled"] else "no")
        reply = r.get("reply", "").replace("|", "\\|").replace("\n", " ").strip()[:48]
        if r["step"].startswith("read"):
            reply = f"{r['id']}: {r['tokens']} tokens, {r['distillations']} distillations, read_s {r['read_s']:.2f}"
        fmt = lambda x: "" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))
        out.append(f"| {r['step']} | {fmt(r['wall_s'])} | {fmt(r['ttft_s'])} | {fmt(r.get('own_tokens'))} | "
                   f"{fmt(r.get('cached_tokens'))} | {rec} | {reply} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_args(ap)
    ap.add_argument("--years", type=int, default=140, help="chronicle years (140: about 32K SmolLM2 tokens)")
    ap.add_argument("--questions", type=int, default=10, choices=range(1, len(FACTS) + 1), metavar="K")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--no-baseline", action="store_true", help="skip the fresh-read baseline request")
    ap.add_argument("--json", help="write the record here")
    a = ap.parse_args()

    text, facts = build_document(a.years, a.questions, a.seed)
    args = ["-m", a.model, "--pot", str(a.pot)] + (["--device-mem", a.device_mem] if a.device_mem else [])
    t_start = time.perf_counter()
    srv = Server(a.bin, args)
    rows, code = [], None
    try:
        info = machine_info(a.bin, srv.line)
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none", max_retries=0, timeout=3600)
        model = client.models.list().data[0].id
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=7200)
        t0 = time.perf_counter()
        conn.request("POST", "/v1/documents", json.dumps({"text": text}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        wall = time.perf_counter() - t0
        conn.close()
        if resp.status != 200:
            raise RuntimeError(f"POST /v1/documents: {resp.status} {body[:500]!r}")
        doc = json.loads(body)
        rows.append({"step": "read (POST /v1/documents)", "wall_s": round(wall, 3), "ttft_s": round(wall, 3),
                     "own_tokens": doc["tokens"], "cached_tokens": 0, **{k: doc.get(k) for k in
                                                                         ("id", "tokens", "distillations", "read_s")}})
        for i, f in enumerate(facts):
            r = ask(client, model, [{"role": "user", "content": f["question"]}], a.max_tokens, doc["id"])
            rows.append({"step": f"q{i + 1}", "depth": f["depth"], "expected": f["expected"], **r,
                         "recalled": recalled(r["reply"], f["expected"])})
            print(f"q{i + 1}: ttft {r['ttft_s']} s, {r['reply']!r}", file=sys.stderr)
        if not a.no_baseline:
            f = facts[0]
            r = ask(client, model, [{"role": "user", "content": text + "\n\n" + f["question"]}], a.max_tokens)
            rows.append({"step": "baseline (q1, whole document in the message)", "depth": f["depth"],
                         "expected": f["expected"], **r, "recalled": recalled(r["reply"], f["expected"])})
    finally:
        code = srv.stop()
    if code != 0:
        print(f"serve exited with {code} after SIGTERM; its log:\n" + "".join(srv.log[-20:]), file=sys.stderr)
    asked = [r for r in rows if r["step"].startswith("q")]
    record = {"bench": "documents", "machine": info, "model": os.path.abspath(a.model),
              "model_bytes": os.path.getsize(a.model), "pot": a.pot, "device_mem": a.device_mem, "years": a.years,
              "seed": a.seed, "max_tokens": a.max_tokens,
              "document": {"chars": len(text), "tokens": doc["tokens"],
                           "facts": [{k: f[k] for k in ("depth", "expected", "question")} for f in facts]},
              "recalled": sum(r["recalled"] for r in asked), "asked": len(asked), "rows": rows,
              "serve_exit": code, "elapsed_s": round(time.perf_counter() - t_start, 1)}
    print(f"{info['build']} on {info['cpu']} ({info['cores']} cores), device {info['device']}")
    print(f"model {os.path.basename(a.model)}, pot {a.pot}, document {doc['tokens']} tokens, "
          f"recalled {record['recalled']}/{len(asked)}\n")
    print(table(rows))
    if a.json:
        with open(a.json, "w") as out:
            json.dump(record, out, indent=1)
            out.write("\n")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
