#!/usr/bin/env python3
"""Writes tests/fixtures/family_reference.json and family_tokenizer_goldens.json: llama.cpp on
the qwen2 / qwen3 / phi3 / Llama-3.2 GGUF files of scripts/reference/make_family_models.py.

Reference: llama.cpp ggml-org/llama.cpp@0c1e57098, through the python package llama_cpp and
the llama-perplexity binary of scripts/reference/build-llama-cpp.sh (run it first; with
TARGETS it must include llama-perplexity). Settings mirror make_logits_fixture.py: n_ctx 512,
n_batch 512, n_threads 2, logits_all, f16 KV cache, flash attention off; each prompt is
evaluated in one batch from an empty context.

family_reference.json holds, per model file (12: 4 families x f16/q8_0/q4_k):
  file, family, arch, weight_type, seed, sha256, bytes, n_vocab
                 make_family_models.py --seed <seed> rewrites the file byte for byte (same
                 numpy and gguf versions, recorded under "generator_env"): a test can
                 regenerate it and check the sha256 before comparing.
  mean_top1_prob mean over all prompt positions of softmax(row).max() (how peaked the
                 logits are; 1/n_vocab would be uniform)
  perplexity     llama-perplexity on data/perplexity.txt, every window of 128 tokens (see
                 PPL_CHUNKS): ctx, chunks, ppl, err (its +/-),
                 mean_nll = ln(ppl); llama-perplexity's defaults otherwise (batch 2048,
                 only the second half of each chunk scored, BOS put first in each chunk
                 when the vocab's add_bos_token is true: llama32 only)
  prompts        three: "chat" (the file's own chat template, rendered with jinja2, one
                 system and one user turn, add_generation_prompt), "prose", "code"
                 (make_logits_fixture.py's texts). For each:
    text, add_bos  tokenized with llama_tokenize(add_special=add_bos, parse_special=true);
                 add_bos = the vocab's add_bos_token, except for a chat text that already
                 starts with the BOS text (llama32's template writes it)
    tokens       the prompt's token ids
    top_ids/top_logits  per position i, the 16 largest logits of the row that predicts
                 token i+1, ids sorted by logit descending (stable), 4 decimals
    logsumexp    per position, log(sum(exp(row))) over the full row
    last_top_ids/last_top_logits  the 64 largest logits of the last position's row
                 (the full row is not stored, to keep the fixture small)
    greedy       32 greedy (argmax) tokens, each decoded one at a time (batch 1), not
                 stopped at end-of-generation tokens
    greedy_text  their detokenized text (informational)

family_tokenizer_goldens.json: every case of tests/fixtures/tokenizer_goldens.json (same
names, texts, parse_special) tokenized with add_special=false by the vocab-only llama.cpp
model of qwen2-f16 (pre "qwen2", BPE), llama32-f16 (pre "llama-bpe", BPE) and phi3-f16
(SentencePiece, pre "default", add_space_prefix true by llama.cpp's default for "llama"
vocabs). qwen3's tokenizer is qwen2's (same vocab, merges and pre); the script checks the
ids are identical and does not store them twice. Through llama_cpp, not the llama-tokenize
binary: the same llama_tokenize() call, without a process per text.

--numpy-check also runs a float64 numpy forward pass (written from the description in
make_family_models.py's docstring) on every file's dequantized weights and reports its max
|logit difference| and argmax agreement with llama.cpp: evidence that the semantics stated
there (rope types, fused splits, QK-norm, tied output) are what llama.cpp computes. The
numbers go into family_reference.json under "numpy_check". The numpy pass rounds matmul
inputs as ggml's CPU backend does (F16 for F16 weights, Q8_0 blocks for Q8_0, Q8_K for
Q4_K) and the K/V/Q/softmax to F16; with that, the f16 files agree to < 0.04 in every logit,
the q8_0/q4_k files to ~0.7/~1.1 (the emulation of ggml's activation quantization is not
exact: that residue is rounding, not a semantic difference; argmax agrees on 94-99% rows).

--redo-perplexity measures llama-perplexity again (flash attention off, the whole text) for
every model of an existing fixture, and with --with-f32 its "f32_weights" entry, leaving the
rest as it is.

--add-f32-weights adds, to each quantized model of an existing family_reference.json (the
rest of the file is left as it is), "f32_weights": llama.cpp on the same weights dequantized
to F32 (llama-quantize --allow-requantize FILE OUT F32; llama-quantize must be built): its
"perplexity" and "prompts" (as above, without text, greedy_text). With F32 weights llama.cpp
multiplies in fp32, so the quantized files can be held to the F16 files' bounds against it
(with quantized weights llama.cpp rounds each product's input to 8 bits first).

Usage: scripts/reference/make_family_fixtures.py [--models DIR] [--seed N] [--numpy-check]
       scripts/reference/make_family_fixtures.py --add-f32-weights | --redo-perplexity [--with-f32] [--models DIR]
  DIR defaults to build/family-models (generated there first when files are missing).
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import make_family_models as fm  # noqa: E402
from make_logits_fixture import LLAMA_CPP_COMMIT, fmt, r4  # noqa: E402

TOP_K = 16
LAST_TOP_K = 64
GREEDY = 32
PPL_CTX = 128
# Perplexity reads the whole text (213 windows, ~13.6K tokens scored): on these random
# networks llama.cpp's 8-bit rounding of each product's input moves a 16-window estimate by up
# to ~1.5%, in either direction, and the whole text averages that down.
PPL_CHUNKS = None            # None: every window of the text
PROSE = ("Once upon a time, in a small village by the sea, there lived an old fisherman who "
         "knew every rock and current along the coast. Every morning before dawn, he")
CODE = ("def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n"
        "    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n\ndef factorial(n):\n")
CHAT = [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France? Answer in one sentence."}]


def llama_bin():
    out = os.environ.get("LLAMA_BIN")
    if out:
        return out
    return subprocess.run([os.path.join(HERE, "build-llama-cpp.sh"), "noamx", "--no-python"],
                          check=True, stdout=subprocess.PIPE, text=True).stdout.strip()


def render_chat(template, bos, eos):
    import jinja2

    env = jinja2.Environment(loader=jinja2.BaseLoader())
    return env.from_string(template).render(messages=CHAT, add_generation_prompt=True,
                                            bos_token=bos, eos_token=eos)


def row_stats(rows, k):
    top_ids, top_logits, lse, pmax = [], [], [], []
    for row in rows:
        idx = np.argsort(-row, kind="stable")[:k]
        top_ids.append([int(i) for i in idx])
        top_logits.append([r4(row[i]) for i in idx])
        r64 = row.astype(np.float64)
        m = float(r64.max())
        s = float(np.exp(r64 - m).sum())
        lse.append(r4(m + math.log(s)))
        pmax.append(1.0 / s)
    return top_ids, top_logits, lse, pmax


def perplexity(bindir, path, chunks=PPL_CHUNKS):
    """llama-perplexity on data/perplexity.txt: `chunks` windows of PPL_CTX, or all (None)."""
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
    cmd = [os.path.join(bindir, "llama-perplexity"), "-m", path, "-f",
           os.path.join(ROOT, "data", "perplexity.txt"), "-c", str(PPL_CTX), "-t", "2",
           "-fa", "off"]  # as the logits: flash attention off
    if chunks is not None:
        cmd += ["--chunks", str(chunks)]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env, errors="replace")
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", res.stdout)
    n = re.search(r"calculating perplexity over (\d+) chunks", res.stdout)
    if res.returncode != 0 or not m or not n:
        sys.stderr.write(res.stdout[-3000:])
        raise RuntimeError(f"llama-perplexity failed on {path}")
    ppl, err = float(m.group(1)), float(m.group(2))
    return {"ctx": PPL_CTX, "chunks": int(n.group(1)), "threads": 2, "flash_attn": False, "ppl": ppl,
            "err": err, "mean_nll": round(math.log(ppl), 6)}


# ---- numpy reference forward (semantics check) --------------------------------------------
def _rms(x, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def _rope(x, pos, base, neox, factors):
    """x [T, H, D]; ggml's rope: theta_i = pos * base^(-2i/D) / factors[i]."""
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    if factors is not None:
        inv = inv / factors
    ang = pos[:, None, None] * inv[None, None, :]
    c, s = np.cos(ang), np.sin(ang)
    if neox:
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def _act_round(x, wtype):
    """x as ggml's CPU matmul sees it: converted to the weight type's vec_dot type."""
    if wtype == "F16":
        return x.astype(np.float16).astype(np.float64)
    if wtype not in ("Q8_0", "Q4_K"):
        return x
    blk = 32 if wtype == "Q8_0" else 256  # Q8_0 blocks; Q8_K blocks for Q4_K
    b = x.astype(np.float32).reshape(-1, blk)
    amax = np.abs(b).max(axis=1, keepdims=True)
    if wtype == "Q8_0":
        d = (amax / 127).astype(np.float16).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(amax > 0, np.rint(b * np.where(d > 0, 1 / (amax / 127), 0)), 0)
    else:  # Q8_K: iscale = -127/max by signed max, d = 1/iscale (float32)
        idx = np.abs(b).argmax(axis=1)
        smax = b[np.arange(len(b)), idx][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            iscale = np.where(amax > 0, -127.0 / smax, 0).astype(np.float32)
            q = np.minimum(127, np.rint(iscale * b))
            d = np.where(amax > 0, 1 / iscale, 0).astype(np.float32)
    return (q * d).reshape(x.shape).astype(np.float64)


def numpy_logits(path, tokens, emulate=True):
    """float64 forward; emulate: round matmul inputs and the KV cache as ggml's CPU does."""
    import gguf
    from gguf.quants import dequantize

    r = gguf.GGUFReader(path)
    wt = {t.name: t.tensor_type.name for t in r.tensors}

    def mm(x, name):  # x @ W[name].T with ggml's input rounding
        return (_act_round(x, wt[name]) if emulate else x) @ W[name].T

    def f16(x):
        return x.astype(np.float16).astype(np.float64) if emulate else x

    def val(key):
        f = r.fields[key]
        v = f.parts[f.data[0]]
        return bytes(v).decode() if f.types[0] == gguf.GGUFValueType.STRING else v.tolist()[0]

    arch = val("general.architecture")
    W = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64).reshape(
        [int(n) for n in reversed(t.shape)]) for t in r.tensors}
    n_head = val(f"{arch}.attention.head_count")
    n_kv = val(f"{arch}.attention.head_count_kv")
    eps = val(f"{arch}.attention.layer_norm_rms_epsilon")
    base = val(f"{arch}.rope.freq_base")
    n_layer = val(f"{arch}.block_count")
    n_embd = val(f"{arch}.embedding_length")
    hd = val(f"{arch}.attention.key_length") if f"{arch}.attention.key_length" in r.fields \
        else n_embd // n_head
    neox = arch != "llama"
    factors = W.get("rope_freqs.weight")
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)
    mask = np.triu(np.full((T, T), -np.inf), 1)
    x = W["token_embd.weight"][tokens]
    for il in range(n_layer):
        p = f"blk.{il}."
        h = _rms(x, eps) * W[p + "attn_norm.weight"]
        if p + "attn_qkv.weight" in W:
            qkv = mm(h, p + "attn_qkv.weight")
            q, k, v = np.split(qkv, [n_head * hd, n_head * hd + n_kv * hd], axis=1)
        else:
            q, k, v = (mm(h, p + f"attn_{t}.weight") for t in "qkv")
            if p + "attn_q.bias" in W:
                q, k, v = (q + W[p + "attn_q.bias"], k + W[p + "attn_k.bias"],
                           v + W[p + "attn_v.bias"])
        q, k, v = q.reshape(T, n_head, hd), k.reshape(T, n_kv, hd), v.reshape(T, n_kv, hd)
        if p + "attn_q_norm.weight" in W:
            q = _rms(q, eps) * W[p + "attn_q_norm.weight"]
            k = _rms(k, eps) * W[p + "attn_k_norm.weight"]
        q, k = _rope(q, pos, base, neox, factors), _rope(k, pos, base, neox, factors)
        k, v = f16(k), f16(v)  # f16 KV cache; ggml rounds Q and the softmax to F16 too
        q = f16(q)
        rep = n_head // n_kv
        att = np.empty((T, n_head, hd))
        for hh in range(n_head):
            s = q[:, hh] @ k[:, hh // rep].T / math.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, hh] = f16(s / s.sum(axis=1, keepdims=True)) @ v[:, hh // rep]
        x = x + mm(att.reshape(T, -1), p + "attn_output.weight")
        h = _rms(x, eps) * W[p + "ffn_norm.weight"]
        if p + "ffn_gate.weight" in W:
            g, u = mm(h, p + "ffn_gate.weight"), mm(h, p + "ffn_up.weight")
        else:
            g, u = np.split(mm(h, p + "ffn_up.weight"), 2, axis=1)
        x = x + mm(g / (1 + np.exp(-g)) * u, p + "ffn_down.weight")
    x = _rms(x, eps) * W["output_norm.weight"]
    return mm(x, "output.weight" if "output.weight" in W else "token_embd.weight")


# ---- main ------------------------------------------------------------------------------------
def model_fixture(llm, path, name, seed, sha, ppl, numpy_check):
    fam = name.rsplit("-", 1)[0]
    meta = llm.metadata
    add_bos = bool(llm._model.add_bos_token())  # llama.cpp's, after its pre-type overrides
    bos_text = llm._model.token_get_text(llm.token_bos())
    chat = render_chat(meta["tokenizer.chat_template"], bos_text,
                       llm._model.token_get_text(llm.token_eos()))
    prompts, pmax_all, check = [], [], {"max_abs_diff": 0.0, "argmax_agree": 0, "rows": 0}
    for pname, text in (("chat", chat), ("prose", PROSE), ("code", CODE)):
        bos = add_bos and not text.startswith(bos_text)
        toks = llm.tokenize(text.encode("utf-8"), add_bos=bos, special=True)
        llm.reset()
        llm.eval(toks)
        rows = np.array(llm.scores[: len(toks), :], dtype=np.float32)
        top_ids, top_logits, lse, pmax = row_stats(rows, TOP_K)
        pmax_all += pmax
        last_ids, last_logits, _, _ = row_stats(rows[-1:], LAST_TOP_K)
        if numpy_check:
            ref = numpy_logits(path, toks)
            check["max_abs_diff"] = max(check["max_abs_diff"], float(np.abs(ref - rows).max()))
            check["argmax_agree"] += int((ref.argmax(1) == rows.argmax(1)).sum())
            check["rows"] += len(toks)
        greedy = []
        nxt = int(np.argmax(rows[-1]))
        for _ in range(GREEDY):
            greedy.append(nxt)
            llm.eval([nxt])
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1, :]))
        prompts.append({
            "name": pname, "text": text, "add_bos": bos, "tokens": [int(t) for t in toks],
            "top_ids": top_ids, "top_logits": top_logits, "logsumexp": lse,
            "last_top_ids": last_ids[0], "last_top_logits": last_logits[0], "greedy": greedy,
            "greedy_text": llm.detokenize(greedy, special=True).decode("utf-8", errors="replace"),
        })
    out = {"file": os.path.basename(path), "family": fam, "arch": meta["general.architecture"],
           "weight_type": name.rsplit("-", 1)[1], "seed": seed, "sha256": sha,
           "bytes": os.path.getsize(path), "n_vocab": llm.n_vocab(),
           "mean_top1_prob": round(float(np.mean(pmax_all)), 4), "perplexity": ppl,
           "prompts": prompts}
    if numpy_check:
        check["max_abs_diff"] = round(check["max_abs_diff"], 4)
        out["numpy_check"] = check
    return out


def tokenizer_goldens(models_dir, shas):
    from llama_cpp import Llama

    src = json.load(open(os.path.join(ROOT, "tests", "fixtures", "tokenizer_goldens.json"),
                         encoding="utf-8"))
    vocabs = {"qwen2": "qwen2-f16", "qwen3": "qwen3-f16", "llama-bpe": "llama32-f16",
              "phi3": "phi3-f16"}
    toks = {k: Llama(model_path=os.path.join(models_dir, f + ".gguf"), vocab_only=True,
                     verbose=False) for k, f in vocabs.items()}
    cases = []
    for c in src["cases"]:
        raw = bytes.fromhex(c["bytes_hex"]) if "bytes_hex" in c else c["text"].encode("utf-8")
        ids = {k: [int(i) for i in t.tokenize(raw, add_bos=False, special=c["parse_special"])]
               for k, t in toks.items()}
        if ids.pop("qwen3") != ids["qwen2"]:
            raise AssertionError(f"qwen3 and qwen2 tokenize {c['name']} differently")
        case = {k: c[k] for k in ("name", "text", "bytes_hex", "parse_special") if k in c}
        case["ids"] = ids
        cases.append(case)
    doc = {"generator": "scripts/reference/make_family_fixtures.py",
           "llama_cpp_commit": LLAMA_CPP_COMMIT,
           "texts": "tests/fixtures/tokenizer_goldens.json (its cases, same order)",
           "call": "llama_tokenize(add_special=false, parse_special=case.parse_special)",
           "vocabs": {k: {"file": f + ".gguf", "sha256": shas[f]} for k, f in vocabs.items()
                      if k != "qwen3"},
           "note": "qwen3-f16 tokenizes every case as qwen2 (checked)"}
    return doc, cases


def _fixture_file(models_dir, m):
    """The generated file a fixture model was made on (generated again when missing or changed)."""
    src = os.path.join(models_dir, m["file"])
    if not os.path.exists(src) or fm.file_sha256(src) != m["sha256"]:
        fm.generate(models_dir, m["seed"], [m["file"][:-5]])
    return src


def _f32_copy(bindir, src, dst):
    """src's weights dequantized to F32, as llama-quantize writes them."""
    subprocess.run([os.path.join(bindir, "llama-quantize"), "--allow-requantize", src, dst, "F32"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return dst


def _rewrite(path, fixture):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(fmt(fixture) + "\n")


def redo_perplexity(path, models_dir, with_f32):
    """Measures every model's perplexity of the fixture at path again (flash attention off;
    the whole text); with_f32: the "f32_weights" entries' too."""
    import tempfile

    fixture = json.load(open(path, encoding="utf-8"))
    bindir = llama_bin()
    with tempfile.TemporaryDirectory() as tmp:
        for m in fixture["models"]:
            src = _fixture_file(models_dir, m)
            before = m["perplexity"]["ppl"]
            m["perplexity"] = perplexity(bindir, src)
            line = f"{m['file']}: ppl {before:.5g} -> {m['perplexity']['ppl']:.5g}"
            if with_f32 and "f32_weights" in m:
                f32 = _f32_copy(bindir, src, os.path.join(tmp, "f32.gguf"))
                before = m["f32_weights"]["perplexity"]["ppl"]
                m["f32_weights"]["perplexity"] = perplexity(bindir, f32)
                os.remove(f32)
                line += f"; F32 weights {before:.5g} -> {m['f32_weights']['perplexity']['ppl']:.5g}"
            print(line, file=sys.stderr)
    _rewrite(path, fixture)


def add_f32_weights(path, models_dir):
    """Adds "f32_weights" to every quantized model of the fixture at path."""
    import tempfile

    from llama_cpp import Llama

    fixture = json.load(open(path, encoding="utf-8"))
    bindir = llama_bin()
    with tempfile.TemporaryDirectory() as tmp:
        for m in fixture["models"]:
            if m["weight_type"] == "f16":
                continue
            f32 = _f32_copy(bindir, _fixture_file(models_dir, m), os.path.join(tmp, m["file"][:-5] + "-f32.gguf"))
            llm = Llama(model_path=f32, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2,
                        n_threads_batch=2, logits_all=True, flash_attn=False, seed=0, verbose=False)
            got = model_fixture(llm, f32, m["file"][:-5], m["seed"], "", perplexity(bindir, f32), False)
            del llm
            os.remove(f32)
            m["f32_weights"] = {
                "how": "llama-quantize --allow-requantize <file> <out> F32, then as the file",
                "perplexity": got["perplexity"],
                "prompts": [{k: v for k, v in p.items() if k not in ("text", "greedy_text")}
                            for p in got["prompts"]]}
            print(f"{m['file']}: F32 weights ppl {got['perplexity']['ppl']:.4g} "
                  f"(quantized {m['perplexity']['ppl']:.4g})", file=sys.stderr)
    _rewrite(path, fixture)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "family-models"))
    ap.add_argument("--seed", type=int, default=fm.DEFAULT_SEED)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures",
                                                  "family_reference.json"))
    ap.add_argument("--tok-out", default=os.path.join(ROOT, "tests", "fixtures",
                                                      "family_tokenizer_goldens.json"))
    ap.add_argument("--numpy-check", action="store_true")
    ap.add_argument("--only", nargs="*", help="model names (qwen2-f16) to run; no JSON written")
    ap.add_argument("--add-f32-weights", action="store_true",
                    help="add llama.cpp on the dequantized weights to the quantized models of --out")
    ap.add_argument("--redo-perplexity", action="store_true",
                    help="measure llama-perplexity again for every model of --out (flash attention off)")
    ap.add_argument("--with-f32", action="store_true",
                    help="with --redo-perplexity: the f32_weights entries' perplexity too")
    a = ap.parse_args()
    if a.redo_perplexity:
        return redo_perplexity(a.out, a.models, a.with_f32)
    if a.add_f32_weights:
        return add_f32_weights(a.out, a.models)

    import llama_cpp
    from llama_cpp import Llama

    names = a.only or fm.model_names()
    missing = [n for n in names if not os.path.exists(os.path.join(a.models, n + ".gguf"))]
    if missing:
        fm.generate(a.models, a.seed, missing)
    shas = {n: fm.file_sha256(os.path.join(a.models, n + ".gguf")) for n in names}
    bindir = llama_bin()
    models = []
    for name in names:
        path = os.path.join(a.models, name + ".gguf")
        llm = Llama(model_path=path, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=2,
                    n_threads_batch=2, logits_all=True, flash_attn=False, seed=0, verbose=False)
        m = model_fixture(llm, path, name, a.seed, shas[name], perplexity(bindir, path),
                          a.numpy_check)
        del llm
        models.append(m)
        greedy = m["prompts"][1]["greedy"]
        print(f"{name}: mean_top1_prob {m['mean_top1_prob']} ppl {m['perplexity']['ppl']:.4g} "
              f"greedy(prose) {len(set(greedy))} distinct of {len(greedy)}"
              + (f" numpy {m['numpy_check']}" if a.numpy_check else ""), file=sys.stderr)
    if a.only:
        return

    import gguf

    info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()
    fixture = {
        "generator": "scripts/reference/make_family_fixtures.py",
        "models_generator": f"scripts/reference/make_family_models.py --seed {a.seed}",
        "generator_env": {"numpy": np.__version__, "gguf": getattr(gguf, "__version__", None)
                          or _dist_version("gguf")},
        "reference": {"implementation": "llama.cpp", "llama_cpp_commit": LLAMA_CPP_COMMIT,
                      "llama_cpp_python": llama_cpp.__version__,
                      "build": "scripts/reference/build-llama-cpp.sh noamx (CPU, AMX off)",
                      "system_info": info},
        "settings": {"n_ctx": 512, "n_batch": 512, "n_ubatch": 512, "n_threads": 2,
                     "flash_attn": False, "kv_cache": "f16", "special": True, "top_k": TOP_K,
                     "last_top_k": LAST_TOP_K, "greedy_tokens": GREEDY, "decimals": 4,
                     "row_meaning": "row i holds the logits predicting token i+1",
                     "perplexity_text": "data/perplexity.txt"},
        "models": models,
    }
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(fmt(fixture) + "\n")
    print(f"{a.out}: {os.path.getsize(a.out):,} bytes", file=sys.stderr)

    doc, cases = tokenizer_goldens(a.models, shas)
    header = json.dumps(doc, ensure_ascii=False)[:-1]
    with open(a.tok_out, "w", encoding="utf-8", newline="\n") as f:
        f.write(header + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print(f"{a.tok_out}: {len(cases)} cases, {os.path.getsize(a.tok_out):,} bytes",
          file=sys.stderr)


def _dist_version(name):
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
