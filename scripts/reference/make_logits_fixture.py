#!/usr/bin/env python3
"""Writes tests/fixtures/smollm2_logits.json: llama.cpp's logits for 3 fixed prompts.

Reference: llama.cpp via the python package llama_cpp (llama-cpp-python, pinned in
scripts/reference/build-llama-cpp.sh; run that first, it installs the package against the
AMX-off build). Settings: n_ctx 512, n_batch 512, n_threads 2, logits_all, f16 KV cache,
flash attention off; each prompt tokenized with add_bos=False, special=True and evaluated in
one batch from an empty context.

For every prompt the fixture holds:
  tokens         the prompt's token ids
  top_ids/top_logits  for every position i, the 16 largest logits of the row that predicts
                 token i+1 (ids sorted by logit, descending), rounded to 4 decimals
  logsumexp      for every position, log(sum(exp(row))) over the full 49,152-entry row
  last_logits    the full row of the last prompt position, rounded to 4 decimals
  greedy         24 greedy (argmax) continuation tokens, each decoded one at a time (batch 1);
                 not stopped at <|im_end|> (id 2), so they may run past the end of a turn
  greedy_text    their detokenized text (informational)

Usage: scripts/reference/make_logits_fixture.py [--out PATH] [--model PATH]
"""
import argparse
import hashlib
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA_CPP_COMMIT = "0c1e57098"  # vendored by llama-cpp-python 0.3.36
TOP_K = 16
GREEDY = 24
DECIMALS = 4

PROMPTS = [
    ("chatml",
     "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
     "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France? Answer in one "
     "sentence.<|im_end|>\n<|im_start|>assistant\n"),
    ("prose",
     "Once upon a time, in a small village by the sea, there lived an old fisherman who "
     "knew every rock and current along the coast. Every morning before dawn, he"),
    ("code",
     "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
     "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\ndef factorial(n):\n"),
]


def r4(x):
    v = round(float(x), DECIMALS)
    return 0.0 if v == 0 else v  # no "-0.0"


def file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def row_stats(rows, top_k):
    """Per logits row: the top_k token ids (stable order), their logits and the log-sum-exp."""
    import numpy as np

    top_ids, top_logits, lse = [], [], []
    for row in rows:
        idx = np.argsort(-row, kind="stable")[:top_k]
        top_ids.append([int(i) for i in idx])
        top_logits.append([r4(row[i]) for i in idx])
        m = float(row.max())
        lse.append(r4(m + math.log(float(np.exp(row.astype(np.float64) - m).sum()))))
    return top_ids, top_logits, lse


def fmt(obj, indent=0):
    """JSON with dicts indented and lists of numbers/strings kept on one line."""
    pad = " " * indent
    if isinstance(obj, dict):
        items = [f'{pad} {json.dumps(k)}: {fmt(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and isinstance(obj[0], (dict, list)):
        return "[\n" + ",\n".join(pad + " " + fmt(v, indent + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models",
                                                    "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures",
                                                  "smollm2_logits.json"))
    a = ap.parse_args()

    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    model_sha = file_sha256(a.model)
    llm = Llama(model_path=a.model, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2,
                n_threads_batch=2, logits_all=True, flash_attn=False, seed=0, verbose=False)
    n_vocab = llm.n_vocab()
    prompts = []
    for name, text in PROMPTS:
        toks = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(toks)
        rows = np.array(llm.scores[: len(toks), :], dtype=np.float32)
        top_ids, top_logits, lse = row_stats(rows, TOP_K)
        last = [r4(v) for v in rows[-1]]
        greedy = []
        nxt = int(np.argmax(rows[-1]))
        for _ in range(GREEDY):
            greedy.append(nxt)
            llm.eval([nxt])
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1, :]))
        prompts.append({
            "name": name,
            "text": text,
            "tokens": [int(t) for t in toks],
            "top_ids": top_ids,
            "top_logits": top_logits,
            "logsumexp": lse,
            "last_logits": last,
            "greedy": greedy,
            "greedy_text": llm.detokenize(greedy, special=True).decode("utf-8", errors="replace"),
        })
        print(f"{name}: {len(toks)} tokens, greedy: {prompts[-1]['greedy_text']!r}",
              file=sys.stderr)

    info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
    fixture = {
        "generator": "scripts/reference/make_logits_fixture.py",
        "reference": {
            "implementation": "llama.cpp",
            "llama_cpp_commit": LLAMA_CPP_COMMIT,
            "llama_cpp_python": llama_cpp.__version__,
            "build": "scripts/reference/build-llama-cpp.sh noamx (CPU, AMX off)",
            "system_info": info,
        },
        "model": {"file": os.path.basename(a.model), "sha256": model_sha, "n_vocab": n_vocab},
        "settings": {"n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "n_threads": 2,
                     "flash_attn": False, "kv_cache": "f16", "add_bos": False,
                     "special": True, "top_k": TOP_K, "greedy_tokens": GREEDY,
                     "decimals": DECIMALS,
                     "row_meaning": "row i holds the logits predicting token i+1"},
        "prompts": prompts,
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(fmt(fixture) + "\n")
    print(f"{a.out}: {os.path.getsize(a.out):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
