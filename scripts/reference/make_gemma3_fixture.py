#!/usr/bin/env python3
"""Writes tests/fixtures/gemma3_reference.json: llama.cpp's view of Gemma 3 270M (base model).

Reference: llama.cpp, the same build two ways (scripts/reference/build-llama-cpp.sh noamx):
  - the python package llama_cpp for logits: n_ctx 512, n_batch 512, n_threads 2,
    logits_all, f16 KV cache, flash attention off; each prompt tokenized with add_bos=True
    (the model's add_bos_token) and special=False, evaluated in one batch;
  - the llama-completion program for the greedy continuation, exactly as a user runs it on a
    base model (no chat template): -p TEXT -n 32 --temp 0 --top-k 1 -no-cnv
    --no-display-prompt -c 512 -t 2. The python greedy path (argmax, batch-1 decode) also
    records each step's margin between the first and second logit.
Greedy text can only be compared exactly up to the first near-tie: llama.cpp's own two paths
disagree on three of the eight prompts, each time at a step whose top two logits are within
a few hundredths. So each prompt records tie_free_prefix, the text of its greedy tokens before
the first step with a margin below MIN_MARGIN (llama-completion's text must start with it),
and "exact" when no step is a near-tie and both paths agree. The test requires our `run` to
start with every tie_free_prefix, checks every step teacher-forced (allowing a near-tie), and
counts the prompts printed identically over all 32 tokens.
  - llama-perplexity on data/perplexity.txt (scripts/reference/llama_perplexity.sh 512:
    20 windows of 512 tokens, second half of each scored, BOS in place of each window's
    first token), on the GGUF itself ("perplexity") and on its weights dequantized to F32 by
    llama-quantize --allow-requantize ... F32 ("perplexity_f32_weights"). llama.cpp quantizes
    activations to 8 bits before each quantized product (Q8_0/Q8_K); with F32 weights it
    multiplies in fp32, as infinipot does, so that figure isolates the forward pass.

For every prompt the fixture holds:
  text, tokens   the prompt and its token ids (BOS first)
  top_ids/top_logits  for every position i, the 16 largest logits of the row predicting
                 token i+1 (ids sorted by logit, descending), rounded to 4 decimals
  logsumexp      for every position, log(sum(exp(row))) over the full 262,144-entry row
  greedy         the 32 greedy continuation tokens (python path), greedy_text their text
  margins        per greedy step, top-1 minus top-2 logit (python path)
  tie_free_prefix  text of the greedy tokens before the first margin < MIN_MARGIN
  exact          every margin >= MIN_MARGIN and completion == greedy_text
  completion     llama-completion's output for the prompt, without trailing newlines (must
                 equal greedy_text without them)

Usage: scripts/reference/make_gemma3_fixture.py [--model PATH] [--out PATH] [--bin DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_logits_fixture import ROOT, LLAMA_CPP_COMMIT, r4, fmt, file_sha256, row_stats  # noqa: E402

TOP_K = 16
GREEDY = 32
CTX = 512
MIN_MARGIN = 0.25

PROMPTS = [
    ("capital", "The capital of France is"),
    ("prose",
     "Once upon a time, in a small village by the sea, there lived an old fisherman who "
     "knew every rock and current along the coast. Every morning before dawn, he"),
    ("code",
     "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
     "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\ndef factorial(n):\n"),
    ("armstrong", "In 1969, Neil Armstrong became the first person to"),
    ("water", "Water boils at a temperature of"),
    ("colors", "The three primary colors are"),
    ("photosynthesis", "Photosynthesis is the process by which"),
    ("fox", "The quick brown fox jumps over the lazy dog. The quick brown fox"),
]


def completion(bin_dir, model, text):
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    out = subprocess.run([os.path.join(bin_dir, "llama-completion"), "-m", model, "-p", text, "-n", str(GREEDY),
                          "--temp", "0", "--top-k", "1", "-s", "1", "-no-cnv", "--no-display-prompt",
                          "-c", str(CTX), "-t", "2"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                         env=env, check=True)
    # llama-completion ends its output with newlines of its own: compared without trailing ones.
    return out.stdout.decode("utf-8", errors="replace").rstrip("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "gemma3_reference.json"))
    ap.add_argument("--bin", default=os.path.expanduser("~/.cache/infinipot/llama.cpp/build-noamx/bin"))
    ap.add_argument("--perplexity-line", help="reuse this output line of llama_perplexity.sh 512 instead of "
                    "running it again")
    ap.add_argument("--perplexity-f32-line", help="the same for the F32-dequantized weights")
    a = ap.parse_args()

    # OpenMP's spinning barriers make llama.cpp many times slower on a busy shared machine
    # (docs/benchmarks.md); passive waiting changes the run time only.
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    model_sha = file_sha256(a.model)
    llm = Llama(model_path=a.model, n_ctx=CTX, n_batch=CTX, n_ubatch=CTX, n_threads=2, n_threads_batch=2,
                logits_all=True, flash_attn=False, seed=0, verbose=False)
    prompts = []
    for name, text in PROMPTS:
        toks = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        llm.reset()
        llm.eval(toks)
        rows = np.array(llm.scores[: len(toks), :], dtype=np.float32)
        top_ids, top_logits, lse = row_stats(rows, TOP_K)
        greedy, margins = [], []
        row = rows[-1]
        for _ in range(GREEDY):
            two = np.argsort(-row, kind="stable")[:2]
            nxt = int(two[0])
            greedy.append(nxt)
            margins.append(r4(row[two[0]] - row[two[1]]))
            if nxt == llm.token_eos():
                break
            llm.eval([nxt])
            row = np.array(llm.scores[llm.n_tokens - 1, :], dtype=np.float32)
        greedy_text = llm.detokenize(greedy).decode("utf-8", errors="replace")
        done = completion(a.bin, a.model, text)
        exact = min(margins) >= MIN_MARGIN and done == greedy_text.rstrip("\n")
        first_tie = next((i for i, m in enumerate(margins) if m < MIN_MARGIN), len(margins))
        prefix = llm.detokenize(greedy[:first_tie]).decode("utf-8", errors="replace")
        if not done.startswith(prefix.rstrip("\n")):
            sys.exit(f"{name}: llama-completion's text {done!r} does not start with the tie-free prefix {prefix!r}")
        prompts.append({"name": name, "text": text, "tokens": [int(t) for t in toks], "top_ids": top_ids,
                        "top_logits": top_logits, "logsumexp": lse, "greedy": greedy,
                        "greedy_text": greedy_text, "margins": margins, "completion": done, "tie_free_prefix": prefix, "exact": exact})
        print(f"{name}: {len(toks)} tokens, min margin {min(margins):.3f}, exact {exact}, greedy: {greedy_text!r}"
              + ("" if done == greedy_text.rstrip("\n") else f", llama-completion: {done!r}"), file=sys.stderr)

    def llama_perplexity(model, line):
        line = line or subprocess.run(
            [os.path.join(HERE, "llama_perplexity.sh"), str(CTX)], check=True,
            env=dict(os.environ, MODEL=model, LLAMA_BIN=a.bin), stdout=subprocess.PIPE).stdout.decode().strip()
        m = re.match(r"ctx=(\d+) chunks=(\d+) ppl=([0-9.]+) err=([0-9.]+) seconds=(\d+)", line)
        if not m:
            sys.exit(f"unexpected llama_perplexity.sh output: {line!r}")
        return {"ctx": int(m[1]), "chunks": int(m[2]), "ppl": float(m[3]), "err": float(m[4]), "seconds": int(m[5]),
                "command": f"MODEL={os.path.basename(model)} scripts/reference/llama_perplexity.sh {CTX}"}

    perplexity = llama_perplexity(a.model, a.perplexity_line)
    print(f"perplexity: {perplexity}", file=sys.stderr)
    f32_line = a.perplexity_f32_line
    f32_model = os.path.join(ROOT, "build", "reference", "gemma3-f32-weights.gguf")
    if not f32_line:
        subprocess.run([os.path.join(a.bin, "llama-quantize"), "--allow-requantize", a.model, f32_model, "F32"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    perplexity_f32 = llama_perplexity(f32_model, f32_line)
    perplexity_f32["weights"] = "llama-quantize --allow-requantize <model> <out> F32 (TARGETS=llama-quantize)"
    print(f"perplexity, F32 weights: {perplexity_f32}", file=sys.stderr)

    info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
    fixture = {
        "generator": "scripts/reference/make_gemma3_fixture.py",
        "reference": {"implementation": "llama.cpp", "llama_cpp_commit": LLAMA_CPP_COMMIT,
                      "llama_cpp_python": llama_cpp.__version__,
                      "build": "scripts/reference/build-llama-cpp.sh noamx (CPU, AMX off)", "system_info": info},
        "model": {"file": os.path.basename(a.model), "sha256": model_sha, "n_vocab": llm.n_vocab()},
        "settings": {"n_ctx": CTX, "n_threads": 2, "flash_attn": False, "kv_cache": "f16", "add_bos": True,
                     "special": False, "top_k": TOP_K, "greedy_tokens": GREEDY, "decimals": 4,
                     "min_margin": MIN_MARGIN,
                     "row_meaning": "row i holds the logits predicting token i+1"},
        "perplexity": perplexity,
        "perplexity_f32_weights": perplexity_f32,
        "prompts": prompts,
    }
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(fmt(fixture) + "\n")
    print(f"{a.out}: {os.path.getsize(a.out):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
