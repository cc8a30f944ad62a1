#!/usr/bin/env python3
"""Golden token ids for infinipot's tokenizer, from llama.cpp (an independent implementation).

Tokenizes a varied corpus with llama-cpp-python's vocab-only model, exactly as
llama_tokenize(text, add_special=false, parse_special=...) does, and writes
tests/fixtures/tokenizer_goldens.json:

  {"model": <file name>, "model_sha256": ..., "llama_cpp_version": ..., "pre_variants": [...],
   "cases": [{"name": ..., "text": ... | "bytes_hex": ..., "parse_special": bool, "ids": [...],
              "variants": {<pre>: [...], ...}}]}

"bytes_hex" replaces "text" for inputs that are not valid UTF-8 (JSON cannot hold them).
"ids" use the model as it is (tokenizer.ggml.pre = "smollm"). "variants" are the same cases
tokenized with the model's vocabulary but another pre-tokenizer (a vocab-only copy of the
GGUF with tokenizer.ggml.pre replaced), so the gpt2, llama3 and default cascades are checked
against llama.cpp too.

Usage: scripts/reference/make_tokenizer_goldens.py [MODEL] [--out PATH]
  MODEL defaults to models/SmolLM2-135M-Instruct.Q4_1.gguf. Needs `import llama_cpp`
  (scripts/reference/build-llama-cpp.sh installs it).
"""
import argparse
import hashlib
import json
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]


def long_paragraph():
    """About 5 KB of ordinary prose with numbers and punctuation."""
    sentences = [
        "The history of computing is a story of abstraction layered upon abstraction.",
        "In 1945, John von Neumann described a machine that stored its program in memory;",
        "by 1971 a single chip held 2,300 transistors, and by 2023 more than 100 billion.",
        "Each generation of engineers took the tools of the last and built something taller.",
        "Compilers turned mathematics into machine code, operating systems turned hardware into",
        "processes, and networks turned isolated machines into a planet-wide conversation.",
        "Today's language models read text as tokens: fragments of words, numbers and symbols.",
        "A tokenizer that disagrees with the model's training by even one id can degrade output",
        "in ways that are subtle (a missing space) or severe (a broken special token).",
        "That is why we compare, token for token, against an independent implementation.",
    ]
    out = []
    i = 0
    while sum(len(s) + 1 for s in out) < 5000:
        out.append(sentences[i % len(sentences)])
        if i % 7 == 6:
            out.append("\n\n")
        i += 1
    return " ".join(out)


CHATML = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
          "<|im_end|>\n<|im_start|>user\nWhat is 2+2? Answer briefly.<|im_end|>\n"
          "<|im_start|>assistant\n2 + 2 = 4.<|im_end|>\n<|im_start|>assistant\n")

# (name, text or bytes, parse_special)
CORPUS = [
    # English prose
    ("prose_hello", "Hello world! 123", True),
    ("prose_fox", "The quick brown fox jumps over the lazy dog.", True),
    ("prose_quotes", "She said, \u201cIt\u2019s fine\u2014really.\u201d Then (quietly) left; nobody noticed...", True),
    ("prose_case", "HELLO World hello hElLo", True),
    ("prose_contractions", "don't I'M they'll we've she'd it's you're", True),
    ("prose_contractions_upper", "DON'T Can't WON'T y'all rock'n'roll 'tis", True),
    ("prose_apostrophes", "Bob's 'quoted' word's ' s 'S 'LL 'Re", True),
    ("prose_curly_apostrophe", "don\u2019t won\u2019t it\u2019s", True),
    ("prose_url_email", "See https://example.com/path?q=1&b=two#frag or mail me@example.org.", True),
    # code
    ("code_python", "def fib(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
                    "    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b  # step\n"
                    "    return a\n\nprint(f\"{fib(10)=}\")\n", True),
    ("code_cpp", "#include <vector>\ntemplate <typename T>\nstd::vector<T> twice(const std::vector<T>& v) {\n"
                 "\tstd::vector<T> out;\n\tfor (auto& x : v) out.push_back(x * 2);  // double\n"
                 "\treturn out;\n}\nint main() { return twice<int>({1, 2})->size() != 2; }\n", True),
    ("code_json", "{\"name\": \"infinipot\", \"version\": [0, 1, 2], \"nested\": {\"ok\": true, "
                  "\"pi\": 3.14, \"none\": null}, \"list\": [{}, [], \"\"]}", True),
    ("code_shell", "for f in *.txt; do grep -n \"foo\" \"$f\" | awk '{print $1}'; done 2>&1 >/dev/null && echo ok || exit 1", True),
    ("code_html", "<div class=\"x\" id='y'>&amp; &lt;tag&gt; <br/></div>", True),
    ("code_markdown", "# Title\n\n- item one\n- item **two**\n\n```python\nprint('hi')\n```\n", True),
    ("code_indent", "        deeply:\n            indented:\n                - yes\n", True),
    # numbers
    ("num_int", "1234567", True),
    ("num_pi", "3.14159", True),
    ("num_commas", "1,000,000", True),
    ("num_dates", "2024-03-15, 15/03/2024, March 15th, 2024 at 10:30:45", True),
    ("num_phone", "+1 (555) 123-4567, +44 20 7946 0958", True),
    ("num_misc", "0x1F 0b1010 1e-9 -42 +7 v1.2.3 H2O COVID-19 abc123def", True),
    ("num_unicode", "\u0663\u0664\u0665 \u096a\u096b\u096c \u2460\u2461\u2462 \u216b \u00bd \u00b2\u00b3", True),
    # whitespace
    ("ws_trailing", "trailing spaces   ", True),
    ("ws_newlines3", "\n\n\n", True),
    ("ws_space_tab_newline", " \t \n", True),
    ("ws_tabs", "a\tb\t\tc\t", True),
    ("ws_crlf", "line1\r\nline2\r\n\r\n", True),
    ("ws_leading", "  leading spaces", True),
    ("ws_around_newline", "word  \n  word", True),
    ("ws_unicode", "\u00a0non\u00a0breaking\u2003em space\u3000ideographic\u2028line\u0085nel", True),
    ("ws_four_spaces", "    ", True),
    ("ws_spaces_then_digit", "a   1  b", True),
    ("ws_newline_letter", "\nx\n\ny \n z", True),
    # accents
    ("accents", "caf\u00e9 na\u00efve Z\u00fcrich r\u00e9sum\u00e9 fa\u00e7ade", True),
    ("accents_combining", "cafe\u0301 n\u0303o e\u0308\u0301", True),
    ("accents_more", "\u00c5ngstr\u00f6m \u00d8re \u0141\u00f3d\u017a \u0130stanbul stra\u00dfe", True),
    # scripts
    ("cjk_chinese", "\u6211\u7231\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff01", True),
    ("cjk_japanese", "\u3053\u3093\u306b\u3061\u306f\u3001\u4e16\u754c\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3001\u6f22\u5b57\u3002", True),
    ("korean", "\uc548\ub155\ud558\uc138\uc694, \uc138\uacc4! \ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8\uc785\ub2c8\ub2e4.", True),
    ("arabic", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645\u060c \u0643\u064a\u0641 \u062d\u0627\u0644\u0643\u061f", True),
    ("hindi", "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e\u0964 \u092f\u0939 \u0939\u093f\u0902\u0926\u0940 \u0939\u0948\u0964", True),
    ("cyrillic_greek", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5", True),
    ("thai_hebrew", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01 \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", True),
    ("mixed_scripts", "Hello\u4e16\u754c\u041f\u0440\u0438\u0432\u0435\u0442123\u0645\u0631\u062d\u0628\u0627 na\u00efve\U0001F600caf\u00e9", True),
    # emoji
    ("emoji_simple", "I love \U0001F355 and \U0001F389!", True),
    ("emoji_zwj_family", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family", True),
    ("emoji_rainbow_flag", "\U0001F3F3\ufe0f\u200d\U0001F308", True),
    ("emoji_flags", "\U0001F1EB\U0001F1F7\U0001F1E9\U0001F1EA\U0001F1EF\U0001F1F5", True),
    ("emoji_skin_keycap", "\U0001F44D\U0001F3FD \U0001F44B\U0001F3FF 1\ufe0f\u20e3 #\ufe0f\u20e3", True),
    # math
    ("math_symbols", "\u2200x\u2208\u211d: x\u00b2\u22650, \u2211_{i=1}^{n} i = n(n+1)/2, \u221a2 \u2248 1.414, \u221e \u2260 \u2205", True),
    ("math_greek", "\u03b1+\u03b2=\u03b3; \u2202f/\u2202x; \u222b\u2080\u00b9 f(x) dx <= 10^-3", True),
    # special tokens
    ("chatml_full", CHATML, True),
    ("chatml_no_parse_special", CHATML, False),
    ("special_endoftext", "<|endoftext|>", True),
    ("special_endoftext_no_parse", "<|endoftext|>", False),
    ("special_adjacent", "<|im_start|><|im_end|><|endoftext|>x<|im_end|>", True),
    ("special_starcoder", "<filename>main.py<file_sep><gh_stars>10<jupyter_code>x = 1", True),
    ("special_in_words", "abc<|im_end|>def <|im_start|> ghi", True),
    ("lookalike_no_bar", "<|im_start without the bar", True),
    ("lookalike_variants", "<|im_start| <im_start> |im_start|> < |im_start| > <|IM_START|> <|im_end", True),
    ("lookalike_nested", "<<|im_end|>> <|<|im_start|>|>", True),
    # long words
    ("long_aaaa", "a" * 3000, True),
    ("long_words", "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilisticexpialidocious "
                   "Donaudampfschifffahrtsgesellschaftskapit\u00e4n", True),
    ("long_hex", "".join("%08x" % ((i * 2654435761) & 0xFFFFFFFF) for i in range(64)), True),
    ("long_punct", "!!!!!!!!!!????????........========----------~~~~~~~~", True),
    ("long_paragraph", long_paragraph(), True),
    # edge cases
    ("empty", "", True),
    ("single_space", " ", True),
    ("single_char", "a", True),
    ("control_chars", "\x00 nul\x01\x02\x1b[0m\x7f", True),
    ("replacement_bom", "\ufeffBOM and \ufffd replacement", True),
    ("zero_width", "a\u200bb\u200cc\u200dd\u2060e", True),
    ("private_unassigned", "\ue000\uf8ff \u0378 \U000F0000\U0010FFFD x\U000E0001", True),
    ("newer_unicode_letters", "a\U00031350b x\U0002EBF0y \U00011F04z", True),
    # invalid UTF-8 (llama.cpp: each bad byte becomes U+FFFD)
    ("invalid_ff_fe", b"\xff\xfe hello", True),
    ("invalid_truncated", b"abc\xe2\x82", True),
    ("invalid_continuation", b"\x80\x80abc \xbf", True),
    ("invalid_overlong", b"\xc0\xaf \xe0\x80\xaf x", True),
    ("invalid_surrogate", b"a\xed\xa0\x80b", True),
    ("invalid_latin1", b"caf\xe9 cr\xe8me br\xfbl\xe9e", True),
]


# tokenizer.ggml.pre values llama.cpp maps to the other cascades infinipot implements.
PRE_VARIANTS = ["gpt-2", "llama-bpe", "default"]


def write_pre_variant(src, dst, pre):
    """Vocab-only copy of src's metadata with tokenizer.ggml.pre = pre (no tensors)."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    reader = GGUFReader(src)
    writer = GGUFWriter(dst, arch=None)
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # header fields the writer produces itself
        vtype = field.types[0]
        if key == "tokenizer.ggml.pre":
            writer.add_string(key, pre)
        elif vtype == GGUFValueType.ARRAY:
            if field.types[1] == GGUFValueType.STRING:
                vals = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
            else:
                vals = [field.parts[i].tolist()[0] for i in field.data]
            writer.add_array(key, vals)
        elif vtype == GGUFValueType.STRING:
            writer.add_string(key, bytes(field.parts[field.data[0]]).decode())
        else:
            writer.add_key_value(key, field.parts[field.data[0]].tolist()[0], vtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", default=str(REPO / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/tokenizer_goldens.json"))
    args = ap.parse_args()

    import llama_cpp  # imported late so --help works without it

    model = pathlib.Path(args.model)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    llm = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
    variants = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_VARIANTS:
            path = pathlib.Path(tmp) / f"{pre}.gguf"
            write_pre_variant(str(model), str(path), pre)
            variants[pre] = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)

    names = set()
    cases = []
    for name, text, parse_special in CORPUS:
        assert name not in names, name
        names.add(name)
        raw = text if isinstance(text, bytes) else text.encode("utf-8")
        ids = llm.tokenize(raw, add_bos=False, special=parse_special)
        case = {"name": name}
        if isinstance(text, bytes):
            case["bytes_hex"] = raw.hex()
        else:
            case["text"] = text
        case["parse_special"] = parse_special
        case["ids"] = [int(i) for i in ids]
        case["variants"] = {pre: [int(i) for i in v.tokenize(raw, add_bos=False, special=parse_special)]
                            for pre, v in variants.items()}
        cases.append(case)

    doc = {
        "model": model.name,
        "model_sha256": sha,
        "llama_cpp_version": getattr(llama_cpp, "__version__", "unknown"),
        "generator": "scripts/reference/make_tokenizer_goldens.py",
        "pre_variants": PRE_VARIANTS,
        "cases": cases,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # One case per line keeps the file reviewable and diffs small.
    header = json.dumps({k: v for k, v in doc.items() if k != "cases"}, ensure_ascii=False)[:-1]
    with open(out, "w", encoding="utf-8") as f:
        f.write(header + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    print(f"{len(cases)} cases -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
