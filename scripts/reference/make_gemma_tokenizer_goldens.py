#!/usr/bin/env python3
"""Golden token ids for infinipot's SentencePiece tokenizer on Gemma 3 270M, from llama.cpp.

Writes two fixtures, both tokenized by llama-cpp-python's vocab-only model exactly as
llama_tokenize(text, add_special, parse_special) does:

  tests/fixtures/gemma3_tokenizer_goldens.json: named cases, one per line,
    {"model", "model_sha256", "llama_cpp_version", "generator",
     "cases": [{"name", "text" | "bytes_hex", "parse_special", "add_bos", "ids", "decoded"}]}
    The SmolLM2 corpus (make_tokenizer_goldens.py) plus Gemma-specific cases: leading and
    repeated spaces, newline and tab runs (user-defined tokens in Gemma's vocabulary), HTML tags,
    <start_of_turn> text with and without special parsing, literal "<0x41>", characters only
    byte fallback can spell. "decoded" is llama.cpp's detokenization of "ids" (specials not
    rendered), as UTF-8 with invalid bytes replaced, plus "decoded_hex" when that lost bytes.

  tests/fixtures/gemma3_tokenizer_random.json: the random cross-check,
    {"seed", "count", ..., "cases": [[parse_special (0/1), text, [ids]], ...]}
    COUNT strings drawn by random_strings(SEED) below (mixed scripts, whitespace runs, digits,
    emoji, special-token texts, rare code points); odd-numbered strings are tokenized with
    special parsing, even ones without; no BOS.

Usage: scripts/reference/make_gemma_tokenizer_goldens.py [MODEL] [--count N] [--seed S]
  MODEL defaults to models/gemma-3-270m-q4_k_m.gguf (scripts/fetch-model.sh gemma3). Needs
  `import llama_cpp` (scripts/reference/build-llama-cpp.sh installs it).
"""
import argparse
import hashlib
import json
import pathlib
import random
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_tokenizer_goldens import CORPUS as SMOLLM_CORPUS  # noqa: E402

GEMMA_TURN = ("<start_of_turn>user\nWhat is 2+2? Answer briefly.<end_of_turn>\n"
              "<start_of_turn>model\n2 + 2 = 4.<end_of_turn>\n")

# (name, text or bytes, parse_special, add_bos)
GEMMA_CASES = [
    ("g_hello_bos", "Hello world", True, True),
    ("g_empty_bos", "", True, True),
    ("g_leading_space", " Hello", True, False),
    ("g_leading_spaces3", "   Hello", True, False),
    ("g_double_space", "Hello  world", True, False),
    ("g_many_spaces", "a" + " " * 17 + "b" + " " * 40, True, False),
    ("g_only_spaces", " " * 9, True, False),
    ("g_newline", "line one\nline two", True, False),
    ("g_newline_runs", "a\n\nb\n\n\nc\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nd", True, False),
    ("g_newline_runs_no_special", "a\n\nb\n\n\nc\n\n\n\n", False, False),
    ("g_tabs", "\tindented\t\ttwice\t\t\t\tfour", True, False),
    ("g_space_newline_mix", " \n \n\t \n  x  \n", True, False),
    ("g_crlf", "one\r\ntwo\r\n\r\n", True, False),
    ("g_digits", "0 1 12 123 1234 12345 3.14159 1,000,000 2024-03-15", True, False),
    ("g_unicode_accents", "caf\u00e9 na\u00efve Z\u00fcrich \u00c5ngstr\u00f6m", True, False),
    ("g_emoji", "\U0001F600\U0001F355\U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F1EB\U0001F1F7", True, False),
    ("g_cjk", "\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406 \u3053\u3093\u306b\u3061\u306f \uc548\ub155\ud558\uc138\uc694", True, False),
    ("g_byte_fallback", "\ue000\uf8ff\U000F0000\U0010FFFD\u0378\U0001FAE8 x", True, False),
    ("g_control_chars", "\x00\x01\x07\x1b[0m\x7f end", True, False),
    ("g_turns", GEMMA_TURN, True, False),
    ("g_turns_no_special", GEMMA_TURN, False, False),
    ("g_turns_bos", GEMMA_TURN, True, True),
    ("g_start_of_turn_alone", "<start_of_turn>", True, False),
    ("g_start_of_turn_alone_no_special", "<start_of_turn>", False, False),
    ("g_specials_adjacent", "<bos><eos><start_of_turn><end_of_turn>x<pad>", True, False),
    ("g_specials_adjacent_no_special", "<bos><eos><start_of_turn><end_of_turn>x<pad>", False, False),
    ("g_unused_token_text", "<unused0> <unused98> <mask> [multimodal]", True, False),
    ("g_html_user_defined", "<div><span>hi</span></div><br/> </li></ul>", False, False),
    ("g_byte_token_text", "<0x41><0x0A> <0xZZ>", True, False),
    ("g_space_after_special", "<start_of_turn> user", True, False),
    ("g_lookalikes", "<start_of_turn <start_of_turn|> <END_OF_TURN> < start_of_turn>", True, False),
    ("g_code", "def f(x):\n    return x * 2  # twice\n\n\nprint(f(21))\n", True, False),
    ("g_long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis" * 3, True, False),
    ("g_long_a", "a" * 2000, True, False),
    ("g_marker_in_text", "\u2581already\u2581escaped \u2581", True, False),
    ("g_invalid_utf8", b"\xff\xfe hi \xc3 \xe2\x82 \x80", True, False),
    ("g_invalid_lead_swallows", b"a\xf8bcd e", True, False),
]

# Pieces random strings are built from: real words (so merges go deep), whitespace runs, digits,
# punctuation, other scripts, emoji, special-token texts and code points the vocabulary lacks.
WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
         "which but have an they you were her she there been one all we their has would when "
         "model token tokenizer memory budget device kernel infinite pot catalyst novelty "
         "compression gemma llama sentence piece attention window sliding global local "
         "international understanding responsibilities extraordinary").split()
PUNCT = list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`")
SCRIPTS = ["\u00e9\u00e8\u00ea\u00fc\u00f6\u00e4\u00df\u00e7\u00f1", "\u043f\u0440\u0438\u0432\u0435\u0442\u043c\u0438\u0440",
           "\u03b1\u03b2\u03b3\u03b4\u03bb\u03c0", "\u0645\u0631\u062d\u0628\u0627", "\u0928\u092e\u0938\u094d\u0924\u0947",
           "\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406\u4eca\u5929\u5929\u6c14", "\u3053\u3093\u306b\u3061\u306f\u30ab\u30bf\u30ab\u30ca",
           "\uc548\ub155\ud558\uc138\uc694", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u05e9\u05dc\u05d5\u05dd"]
EMOJI = ["\U0001F600", "\U0001F355", "\U0001F389", "\U0001F44D\U0001F3FD", "\u2764\ufe0f",
         "\U0001F468\u200d\U0001F469\u200d\U0001F467", "\U0001F1EB\U0001F1F7", "1\ufe0f\u20e3"]
SPECIALS = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>",
            "<unused7>", "[multimodal]", "<div>", "</span>", "<0x41>", "\u2581"]
RARE = ["\ue000", "\uf8ff", "\U000F0000", "\u0378", "\U0001FAE8", "\x01", "\x7f", "\ufeff", "\u200b"]


def random_strings(seed, count, specials=SPECIALS):
    """The random cross-check's inputs: a pure function of (seed, count, specials), Python's
    Mersenne Twister; the C++ tests read the strings from the fixture rather than regenerating
    them. make_tokenizer_random.py draws the other vocabularies' strings with their specials."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            kind = rng.random()
            if kind < 0.40:
                w = rng.choice(WORDS)
                parts.append(w.capitalize() if rng.random() < 0.2 else w.upper() if rng.random() < 0.05 else w)
            elif kind < 0.55:
                parts.append(rng.choice([" ", "  ", "   ", "\n", "\n\n", "\t", " \n", "\r\n", " " * rng.randint(4, 20),
                                         "\n" * rng.randint(3, 8), "\t\t"]))
            elif kind < 0.63:
                parts.append(str(rng.randint(0, 10 ** rng.randint(1, 9))))
            elif kind < 0.71:
                parts.append("".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 3))))
            elif kind < 0.81:
                s = rng.choice(SCRIPTS)
                i = rng.randrange(len(s))
                parts.append(s[i:i + rng.randint(1, 6)])
            elif kind < 0.87:
                parts.append(rng.choice(EMOJI))
            elif kind < 0.93:
                parts.append(rng.choice(specials))
            elif kind < 0.97:
                parts.append(rng.choice(RARE))
            else:
                parts.append("".join(chr(rng.randint(0x20, 0x7e)) for _ in range(rng.randint(1, 8))))
            if rng.random() < 0.5:
                parts.append(" ")
        out.append("".join(parts))
    return out


def write_lines(path, header, rows):
    """header's fields, then "cases" with one JSON row per line (reviewable, small diffs)."""
    head = json.dumps(header, ensure_ascii=False)[:-1]
    with open(path, "w", encoding="utf-8") as f:
        f.write(head + ', "cases": [\n')
        f.write(",\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows))
        f.write("\n]}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=str(REPO / "models/gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--out-dir", default=str(REPO / "tests/fixtures"))
    ap.add_argument("--seed", type=int, default=20260225)
    ap.add_argument("--count", type=int, default=12000)
    args = ap.parse_args()

    import llama_cpp  # imported late so --help works without it

    model = pathlib.Path(args.model)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    llm = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
    common = {"model": model.name, "model_sha256": sha,
              "llama_cpp_version": getattr(llama_cpp, "__version__", "unknown"),
              "generator": "scripts/reference/make_gemma_tokenizer_goldens.py"}
    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    cases, names = [], set()
    corpus = [(n, t, p, False) for n, t, p in SMOLLM_CORPUS] + GEMMA_CASES
    for name, text, parse_special, add_bos in corpus:
        assert name not in names, name
        names.add(name)
        raw = text if isinstance(text, bytes) else text.encode("utf-8")
        ids = [int(i) for i in llm.tokenize(raw, add_bos=add_bos, special=parse_special)]
        case = {"name": name}
        if isinstance(text, bytes):
            case["bytes_hex"] = raw.hex()
        else:
            case["text"] = text
        case.update({"parse_special": parse_special, "add_bos": add_bos, "ids": ids})
        decoded = llm.detokenize(ids, special=False)
        case["decoded"] = decoded.decode("utf-8", errors="replace")
        if case["decoded"].encode("utf-8") != decoded:
            case["decoded_hex"] = decoded.hex()
        cases.append(case)
    path = out_dir / "gemma3_tokenizer_goldens.json"
    write_lines(path, common, cases)
    print(f"{len(cases)} cases -> {path}", file=sys.stderr)

    rows = []
    for i, text in enumerate(random_strings(args.seed, args.count)):
        parse_special = i % 2 == 1
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=parse_special)
        rows.append([int(parse_special), text, [int(t) for t in ids]])
    path = out_dir / "gemma3_tokenizer_random.json"
    write_lines(path, {**common, "seed": args.seed, "count": args.count}, rows)
    print(f"{len(rows)} random strings, {sum(len(r[2]) for r in rows)} tokens -> {path} "
          f"({path.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
