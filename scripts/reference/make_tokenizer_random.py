#!/usr/bin/env python3
"""The random tokenizer cross-check for every vocabulary but Gemma 3's, from llama.cpp.

Writes tests/fixtures/tokenizer_random.json: COUNT random strings, each tokenized by
llama.cpp's llama_tokenize (through llama-cpp-python's vocab-only model, add_special=false,
parse_special on odd-numbered strings) with four vocabularies:

  smollm2    models/SmolLM2-135M-Instruct.Q4_1.gguf: GPT-2 byte-level BPE, pre "smollm"
  qwen2      qwen2-f16.gguf of make_family_models.py: the same BPE, pre "qwen2" (qwen3-f16
             has the same vocabulary and pre: checked to tokenize every string as qwen2)
  llama-bpe  llama32-f16.gguf: the same BPE plus Llama 3's 256 specials, pre "llama-bpe"
  phi3       phi3-f16.gguf: SentencePiece ("llama" model, pre "default")

{"generator", "llama_cpp_commit", "seed", "count", "call",
 "vocabs": [{"name", "file", "sha256"}, ...],
 "cases": [[parse_special (0/1), text, ids_<vocabs[0]>, ids_<vocabs[1]>, ...], ...]}
A later vocabulary's ids are null where they equal the first's (smollm2's), as the three BPE
vocabularies' mostly do: the fixture is 1.4 MB smaller for it.

The strings come from make_gemma_tokenizer_goldens.random_strings (mixed scripts, whitespace
runs, digits, emoji, rare code points), with this file's SPECIALS in place of Gemma's: the
special-token texts of all four vocabularies and near misses, so each vocabulary also sees
the others' specials as plain text. Gemma 3's own cross-check is gemma3_tokenizer_random.json.

Usage: scripts/reference/make_tokenizer_random.py [--models DIR] [--count N] [--seed S]
  DIR (default build/family-models) holds the generated files; missing ones are generated.
  Needs `import llama_cpp` (scripts/reference/build-llama-cpp.sh installs it).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import make_family_models as fm  # noqa: E402
from make_gemma_tokenizer_goldens import random_strings, write_lines  # noqa: E402
from make_logits_fixture import LLAMA_CPP_COMMIT  # noqa: E402

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>",
            "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_7|>",
            "<|python_tag|>", "<|user|>", "<|assistant|>", "<|end|>", "<|system|>",
            "<|placeholder3|>", "<s>", "</s>", "<unk>", "<repo_name>", "<file_sep>",
            "<|im_start", "im_end|>", "<|User|>", "< |end|>", "<0x41>", "\u2581", "[PAD32050]"]
VOCABS = [("smollm2", os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")),
          ("qwen2", "qwen2-f16"), ("llama-bpe", "llama32-f16"), ("phi3", "phi3-f16")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "family-models"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tokenizer_random.json"))
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--count", type=int, default=12000)
    a = ap.parse_args()

    from llama_cpp import Llama  # imported late so --help works without it

    generated = [f for _, f in VOCABS[1:]] + ["qwen3-f16"]
    missing = [n for n in generated if not os.path.exists(os.path.join(a.models, n + ".gguf"))]
    if missing:
        fm.generate(a.models, fm.DEFAULT_SEED, missing)
    path_of = {n: (f if os.path.isabs(f) else os.path.join(a.models, f + ".gguf")) for n, f in VOCABS}
    path_of["qwen3"] = os.path.join(a.models, "qwen3-f16.gguf")
    toks = {n: Llama(model_path=p, vocab_only=True, verbose=False) for n, p in path_of.items()}

    rows, tokens = [], {n: 0 for n, _ in VOCABS}
    for i, text in enumerate(random_strings(a.seed, a.count, SPECIALS)):
        parse_special = i % 2 == 1
        raw = text.encode("utf-8")
        ids = {n: [int(t) for t in tok.tokenize(raw, add_bos=False, special=parse_special)]
               for n, tok in toks.items()}
        if ids["qwen3"] != ids["qwen2"]:
            raise AssertionError(f"qwen3 and qwen2 tokenize random string {i} differently")
        for n, _ in VOCABS:
            tokens[n] += len(ids[n])
        first = ids[VOCABS[0][0]]
        rows.append([int(parse_special), text, first] +
                    [None if ids[n] == first else ids[n] for n, _ in VOCABS[1:]])

    header = {"generator": "scripts/reference/make_tokenizer_random.py",
              "llama_cpp_commit": LLAMA_CPP_COMMIT, "seed": a.seed, "count": a.count,
              "call": "llama_tokenize(add_special=false, parse_special=row[0])",
              "vocabs": [{"name": n, "file": os.path.basename(path_of[n]), "sha256": fm.file_sha256(path_of[n])}
                         for n, _ in VOCABS],
              "same_as_first": "null ids: the same as the first vocabulary's",
              "note": "qwen3-f16 tokenizes every string as qwen2 (checked)"}
    write_lines(a.out, header, rows)
    print(f"{len(rows)} random strings -> {a.out} ({os.path.getsize(a.out):,} bytes); tokens "
          + ", ".join(f"{n} {c:,}" for n, c in tokens.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
