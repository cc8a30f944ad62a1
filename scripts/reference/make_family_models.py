#!/usr/bin/env python3
"""Writes small, real-shaped GGUF files of the qwen2, qwen3, phi3 and Llama-3.2 families.

No weights of these families can be downloaded here, so infinipot checks exact agreement
with llama.cpp on files made by this script (scripts/reference/make_family_fixtures.py runs
llama.cpp on them). The weights are random but the tensor names, shapes, metadata keys and
tokenizers are those llama.cpp's loaders read (src/models/{qwen2,qwen3,phi3,llama}.cpp of
ggml-org/llama.cpp@0c1e57098, the commit vendored by llama-cpp-python 0.3.36).

Output: <out>/<family>-<type>.gguf for family in qwen2 qwen3 phi3 llama32 and type in
f16 q8_0 q4_k, 12 files. The same --seed gives byte-identical files (with the same numpy
and gguf package versions: numpy's PCG64 generator, gguf-py's Q8_0 quantizer and
GGUFWriter's layout); each family draws its float32 weights from its own stream, so the
three weight types of a family hold the same weights, differently rounded.

Common shape: n_embd 256, n_layer 4, n_head 4, n_ff 768, RMSNorm everywhere, SwiGLU FFN,
no tensor bias other than qwen2's q/k/v biases. Every row length is a multiple of 256, so
every 2-D matrix can be Q4_K.

  family   arch   head_dim n_head_kv rope  theta  eps   ctx_train  output   extra
  qwen2    qwen2   64       2       NEOX   1e6    1e-6  32768      tied     attn_{q,k,v}.bias [n_out] F32
  qwen3    qwen3   128      2       NEOX   1e6    1e-6  40960      tied     attn_{q,k}_norm [128] F32 (RMSNorm
                                                                           per head, before RoPE, same eps);
                                                                           n_head*head_dim = 512 != n_embd;
                                                                           qwen3.attention.{key,value}_length 128
  phi3     phi3    64       4 (MHA) NEOX   1e4    1e-5  4096       untied   attn_qkv [n_embd, n_embd + 2*kv_dim]
                                                                           (rows q|k|v), ffn_up [n_embd, 2*n_ff]
                                                                           (rows gate|up), no ffn_gate
  llama32  llama   64       2       NORM   5e5    1e-5  131072     tied     rope_freqs.weight [32] F32, Llama-3
                                                                           factors (factor 32, low 1, high 4,
                                                                           original context 8192)

"tied" = no output.weight: llama.cpp reuses token_embd.weight as the output matrix. The
rope type is llama.cpp's llama_model_rope_type(): NORM rotates pairs (2i, 2i+1), NEOX pairs
(i, i + head_dim/2); theta_i = pos * base^(-2i/head_dim) / rope_freqs[i] where a factor
tensor exists. Attention scale is 1/sqrt(head_dim) for all four (phi3 scales Q before the
product, the same thing). The eps key is <arch>.attention.layer_norm_rms_epsilon for all.

phi3 sliding window: the file carries phi3.attention.sliding_window = 2047 as the real
Phi-3-mini-4k-instruct GGUF does (its config.json "sliding_window": 2047), but llama.cpp at
this commit IGNORES it: llama_model_phi3::load_arch_hparams reads the key, logs "Phi SWA is
currently disabled - results might be suboptimal", and sets swa_type = NONE, n_swa = 0,
swa pattern 1, so every layer attends causally to the whole context. (With n_ctx <= 2048 a
2047-token window would change nothing anyway, since a window of 2047 masks only keys more
than 2047 positions back.) No rope_factors_long/short tensors are written (the 4k model has
none; phi3.rope.scaling.original_context_length = 4096 = context_length), so llama.cpp uses
plain RoPE with no factors.

Weight types: f16 = every 2-D matrix F16 (as convert_hf_to_gguf --outtype f16); q8_0 =
every 2-D matrix Q8_0, token_embd included (as llama-quantize Q8_0); q4_k = every 2-D
matrix Q4_K, token_embd and phi3's output included (as llama-quantize --pure Q4_K_M; the
non-pure Q4_K_M mix would put Q6_K in output/attn_v/ffn_down). Norm weights, biases and
rope_freqs are F32 in all files. Q4_K blocks come from quantize_q4_k() below (a simple
min/max quantizer, not llama.cpp's search; every block is checked to dequantize, with
gguf.quants.dequantize, to exactly the values it was built for).

Tokenizers (real vocabularies taken from the two models in models/):
  qwen2, qwen3  SmolLM2's GPT-2 byte-level BPE (49,152 tokens, 48,900 merges), pre "qwen2";
                <|endoftext|> 0, <|im_start|> 1, <|im_end|> 2 are already CONTROL tokens
                there; bos = pad = <|endoftext|>, eos = <|im_end|>, add_bos false (as Qwen2.5
                and Qwen3 GGUFs); ChatML chat template.
  llama32       the same BPE vocab, pre "llama-bpe", plus Llama 3's 256 special tokens
                appended as CONTROL at 49152.. in Llama 3's order (<|begin_of_text|> 49152,
                <|end_of_text|> 49153, <|start_header_id|> 49158, <|end_header_id|> 49159,
                <|eot_id|> 49161, ...): 49,408 tokens; bos <|begin_of_text|>, eos <|eot_id|>,
                add_bos true; Llama 3.2's chat template (shortened, no tool calling).
                Note SmolLM2's own <|endoftext|>/<|im_end|> (0, 2) stay in the vocab, and
                llama.cpp adds them to its end-of-generation set by their text.
  phi3          SentencePiece ("llama" model, pre "default") derived from Gemma 3's vocab:
                <unk> 0 (UNKNOWN), <s> 1, </s> 2 (CONTROL), <0x00>..<0xFF> 3..258 (BYTE),
                30,741 highest-scored multi-character pieces then Gemma's 1,000 most frequent
                single characters (NORMAL, Gemma's scores), 32,000 in all as Llama 2 / Phi-3;
                then Phi-3's added tokens 32000..32010 (<|endoftext|>, <|assistant|>,
                <|placeholder1..4|>, <|system|>, <|end|>, <|placeholder5|>, <|placeholder6|>,
                <|user|>; CONTROL, score -1000, as convert_hf_to_gguf makes them from
                "special": true) and [PAD32011]..[PAD32063] (UNUSED, score -10000):
                32,064 tokens, as Phi-3-mini's vocab_size. bos <s>, eos <|endoftext|>,
                pad <|endoftext|>, unk <unk>, add_bos false; Phi-3's chat template.

Weight scales are chosen so llama.cpp's logits are peaked (see make_family_fixtures.py's
report of the mean top-1 probability) and greedy continuations vary: token_embd rows have
norm EMBD_NORM, the layers' outputs outweigh the embedding in the residual stream, norm
weights are 1 + 0.1 N(0,1).

Usage: scripts/reference/make_family_models.py [--seed N] [--out DIR] [--only NAME ...]
Prints "<path> <sha256>" per file.
"""
import argparse
import hashlib
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_SEED = 51
SMOLLM2 = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA3 = os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf")

EMBD_NORM = 6.0   # L2 norm of a token_embd / output row: sets the logits' spread
QK_GAIN = 1.3     # std of a q or k element (before bias / QK-norm / RoPE)
OUT_GAIN = 1.5    # std scale of attn_output and ffn_down outputs
BIAS_STD = 0.3    # qwen2 q/k/v biases

# SentencePiece / llama.cpp token types
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

QWEN_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if loop.first and message['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
QWEN3_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}")
LLAMA32_CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}"
    "{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{{- 'Cutting Knowledge Date: December 2023\\n' }}"
    "{{- 'Today Date: 26 Jul 2024\\n\\n' }}"
    "{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
    "message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}")
PHI3_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
    "{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}")

# name -> shape and metadata. n_embd 256, n_layer 4, n_head 4, n_ff 768 for all.
FAMILIES = {
    "qwen2": dict(arch="qwen2", stream=1, head_dim=64, n_head_kv=2, rope_base=1.0e6,
                  eps=1e-6, ctx=32768, tied=True, qkv_bias=True, tokenizer="qwen2",
                  template=QWEN_CHAT_TEMPLATE),
    "qwen3": dict(arch="qwen3", stream=2, head_dim=128, n_head_kv=2, rope_base=1.0e6,
                  eps=1e-6, ctx=40960, tied=True, qk_norm=True, tokenizer="qwen2",
                  template=QWEN3_CHAT_TEMPLATE),
    "phi3": dict(arch="phi3", stream=3, head_dim=64, n_head_kv=4, rope_base=1.0e4,
                 eps=1e-5, ctx=4096, tied=False, fused=True, tokenizer="phi3",
                 template=PHI3_CHAT_TEMPLATE),
    "llama32": dict(arch="llama", stream=4, head_dim=64, n_head_kv=2, rope_base=5.0e5,
                    eps=1e-5, ctx=131072, tied=True, rope_freqs=True, tokenizer="llama-bpe",
                    template=LLAMA32_CHAT_TEMPLATE),
}
N_EMBD, N_LAYER, N_HEAD, N_FF = 256, 4, 4, 768
WEIGHT_TYPES = ["f16", "q8_0", "q4_k"]


# ---- Q4_K ------------------------------------------------------------------------------
def quantize_q4_k(x):
    """float32 [rows, cols] (cols % 256 == 0) -> (uint8 [rows, cols/256*144], intended f32).

    ggml's block_q4_K: f16 d, f16 dmin, 12 bytes of 6-bit (scale, min) pairs for the 8
    sub-blocks of 32, 128 bytes of 4-bit quants; value = d*sc[j]*q - dmin*m[j]. Per
    sub-block: min clipped to <= 0, scale = (max - min)/15, both rounded to 6 bits of the
    block's d/dmin. The second result is what ggml dequantizes each block to.
    """
    rows, cols = x.shape
    b = x.astype(np.float32).reshape(-1, 8, 32)
    neg_min = -np.minimum(b.min(axis=2), 0.0)                     # [n, 8] >= 0
    scale = (b.max(axis=2) + neg_min) / 15.0                       # [n, 8] >= 0
    d16 = (scale.max(axis=1) / 63.0).astype(np.float16)
    dmin16 = (neg_min.max(axis=1) / 63.0).astype(np.float16)
    d = d16.astype(np.float32)[:, None]
    dmin = dmin16.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d > 0, np.clip(np.rint(scale / d), 0, 63), 0).astype(np.uint8)
        m = np.where(dmin > 0, np.clip(np.rint(neg_min / dmin), 0, 63), 0).astype(np.uint8)
        step = (d * sc.astype(np.float32))[:, :, None]              # as ggml: d1 = d * sc
        low = (dmin * m.astype(np.float32))[:, :, None]            #          m1 = dmin * m
        q = np.where(step > 0, np.clip(np.rint((b + low) / step), 0, 15), 0).astype(np.uint8)
    intended = (step * q.astype(np.float32) - low).reshape(rows, cols)

    n = b.shape[0]
    scales = np.zeros((n, 12), dtype=np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((m[:, 4:8] & 0x0F) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(n, 128)   # chunk c: subs 2c | 2c+1
    blocks = np.concatenate([d16.reshape(n, 1).view(np.uint8), dmin16.reshape(n, 1).view(np.uint8),
                             scales, qs], axis=1)
    return blocks.reshape(rows, cols // 256 * 144), intended


def encode(x, wtype):
    """(array for GGUFWriter.add_tensor, raw_dtype or None) of a 2-D float32 matrix."""
    import gguf
    from gguf.quants import dequantize, quantize

    if wtype == "f16":
        return x.astype(np.float16), None
    if wtype == "q8_0":
        return quantize(x, gguf.GGMLQuantizationType.Q8_0), gguf.GGMLQuantizationType.Q8_0
    blocks, intended = quantize_q4_k(x)
    back = dequantize(blocks, gguf.GGMLQuantizationType.Q4_K)
    if not np.array_equal(back, intended):
        raise AssertionError("Q4_K blocks do not dequantize to their intended values")
    return blocks, gguf.GGMLQuantizationType.Q4_K


# ---- tokenizers ----------------------------------------------------------------------------
def _array(reader, key):
    import gguf

    f = reader.fields[key]
    if f.types[1] == gguf.GGUFValueType.STRING:
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    return [f.parts[i].tolist()[0] for i in f.data]


def llama3_specials():
    """Llama 3's 256 special tokens in id order (128000.. in the real vocab)."""
    named = {0: "<|begin_of_text|>", 1: "<|end_of_text|>", 4: "<|finetune_right_pad_id|>",
             6: "<|start_header_id|>", 7: "<|end_header_id|>", 8: "<|eom_id|>",
             9: "<|eot_id|>", 10: "<|python_tag|>"}
    out, reserved = [], 0
    for i in range(256):
        if i in named:
            out.append(named[i])
        else:
            out.append(f"<|reserved_special_token_{reserved}|>")
            reserved += 1
    return out


def bpe_vocab(pre):
    """SmolLM2's byte-level BPE vocab with the family's pre-tokenizer and special tokens."""
    import gguf

    r = gguf.GGUFReader(SMOLLM2)
    tokens = _array(r, "tokenizer.ggml.tokens")
    types = _array(r, "tokenizer.ggml.token_type")
    merges = _array(r, "tokenizer.ggml.merges")
    if pre == "qwen2":
        ids = {t: tokens.index(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")}
        assert all(types[i] == CONTROL for i in ids.values())
        special = dict(bos=ids["<|endoftext|>"], eos=ids["<|im_end|>"],
                       pad=ids["<|endoftext|>"], add_bos=False)
    else:
        base = len(tokens)
        extra = llama3_specials()
        tokens = tokens + extra
        types = types + [CONTROL] * len(extra)
        special = dict(bos=base + extra.index("<|begin_of_text|>"),
                       eos=base + extra.index("<|eot_id|>"), pad=None, add_bos=True)
    return dict(model="gpt2", pre=pre, tokens=tokens, types=types, merges=merges,
                scores=None, unk=None, **special)


def spm_vocab():
    """A Phi-3-like 32,064-token SentencePiece vocab from Gemma 3's pieces."""
    import gguf

    r = gguf.GGUFReader(GEMMA3)
    g_tokens = _array(r, "tokenizer.ggml.tokens")
    g_types = _array(r, "tokenizer.ggml.token_type")
    g_scores = _array(r, "tokenizer.ggml.scores")
    normal = [i for i in range(len(g_tokens)) if g_types[i] == NORMAL]
    normal.sort(key=lambda i: (-g_scores[i], i))
    n_single = 1000
    n_multi = 32000 - 3 - 256 - n_single
    multi = [i for i in normal if len(g_tokens[i]) > 1][:n_multi]
    single = [i for i in normal if len(g_tokens[i]) == 1][:n_single]

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256
    scores = [0.0, 0.0, 0.0] + [0.0] * 256
    for i in multi + single:
        tokens.append(g_tokens[i])
        types.append(NORMAL)
        scores.append(float(g_scores[i]))
    assert len(tokens) == 32000 and len(set(tokens)) == 32000
    added = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>",
             "<|placeholder3|>", "<|placeholder4|>", "<|system|>", "<|end|>",
             "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]
    tokens += added
    types += [CONTROL] * len(added)
    scores += [-1000.0] * len(added)
    while len(tokens) < 32064:
        tokens.append(f"[PAD{len(tokens)}]")
        types.append(UNUSED)
        scores.append(-10000.0)
    return dict(model="llama", pre="default", tokens=tokens, types=types, merges=None,
                scores=scores, unk=0, bos=1, eos=32000, pad=32000, add_bos=False)


def add_tokenizer(w, vocab, template):
    w.add_tokenizer_model(vocab["model"])
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    if vocab["scores"] is not None:
        w.add_token_scores(vocab["scores"])
    w.add_token_types(vocab["types"])
    if vocab["merges"] is not None:
        w.add_token_merges(vocab["merges"])
    w.add_bos_token_id(vocab["bos"])
    w.add_eos_token_id(vocab["eos"])
    if vocab["unk"] is not None:
        w.add_unk_token_id(vocab["unk"])
    if vocab["pad"] is not None:
        w.add_pad_token_id(vocab["pad"])
    w.add_add_bos_token(vocab["add_bos"])
    w.add_add_eos_token(False)
    w.add_chat_template(template)


# ---- weights ---------------------------------------------------------------------------------
def llama3_rope_factors(head_dim, base, factor=32.0, low=1.0, high=4.0, orig_ctx=8192):
    """convert_hf_to_gguf's rope_freqs for rope_type "llama3" (Llama 3.2: factor 32)."""
    out = []
    for i in range(0, head_dim, 2):
        freq = 1.0 / (base ** (i / head_dim))
        wavelen = 2 * math.pi / freq
        if wavelen < orig_ctx / high:
            out.append(1.0)
        elif wavelen > orig_ctx / low:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def family_weights(fam, n_vocab, seed):
    """Ordered list of (name, float32 array, is_matrix); numpy shapes are [rows, row_len]."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, fam["stream"]]))
    hd, n_kv = fam["head_dim"], fam["n_head_kv"]
    n_q, n_kvd = N_HEAD * hd, n_kv * hd

    def mat(rows, cols, std):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(std))

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    out = [("token_embd.weight", mat(n_vocab, N_EMBD, EMBD_NORM / math.sqrt(N_EMBD)), True)]
    if fam.get("rope_freqs"):
        out.append(("rope_freqs.weight", llama3_rope_factors(hd, fam["rope_base"]), False))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        out.append((p + "attn_norm.weight", norm(N_EMBD), False))
        wq = mat(n_q, N_EMBD, QK_GAIN / math.sqrt(N_EMBD))
        wk = mat(n_kvd, N_EMBD, QK_GAIN / math.sqrt(N_EMBD))
        wv = mat(n_kvd, N_EMBD, 1.0 / math.sqrt(N_EMBD))
        if fam.get("fused"):
            out.append((p + "attn_qkv.weight", np.concatenate([wq, wk, wv], axis=0), True))
        else:
            out += [(p + "attn_q.weight", wq, True), (p + "attn_k.weight", wk, True),
                    (p + "attn_v.weight", wv, True)]
        if fam.get("qkv_bias"):
            for t, n in (("q", n_q), ("k", n_kvd), ("v", n_kvd)):
                out.append((p + f"attn_{t}.bias",
                            BIAS_STD * rng.standard_normal(n, dtype=np.float32), False))
        if fam.get("qk_norm"):
            out += [(p + "attn_q_norm.weight", norm(hd), False),
                    (p + "attn_k_norm.weight", norm(hd), False)]
        out.append((p + "attn_output.weight", mat(N_EMBD, n_q, OUT_GAIN / math.sqrt(n_q)), True))
        out.append((p + "ffn_norm.weight", norm(N_EMBD), False))
        gate = mat(N_FF, N_EMBD, 1.0 / math.sqrt(N_EMBD))
        up = mat(N_FF, N_EMBD, 1.0 / math.sqrt(N_EMBD))
        if fam.get("fused"):
            out.append((p + "ffn_up.weight", np.concatenate([gate, up], axis=0), True))
        else:
            out += [(p + "ffn_gate.weight", gate, True), (p + "ffn_up.weight", up, True)]
        out.append((p + "ffn_down.weight", mat(N_EMBD, N_FF, 2 * OUT_GAIN / math.sqrt(N_FF)), True))
    out.append(("output_norm.weight", norm(N_EMBD), False))
    if not fam["tied"]:
        out.append(("output.weight", mat(n_vocab, N_EMBD, EMBD_NORM / math.sqrt(N_EMBD)), True))
    return out


FILE_TYPES = {"f16": 1, "q8_0": 7, "q4_k": 15}  # llama_ftype: MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_K_M


def write_model(path, name, wtype, seed, vocabs):
    import gguf

    fam = FAMILIES[name]
    arch = fam["arch"]
    vocab = vocabs[fam["tokenizer"]]
    n_vocab = len(vocab["tokens"])
    hd = fam["head_dim"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"infinipot-{name}-tiny-{wtype}")
    w.add_file_type(FILE_TYPES[wtype])
    if wtype != "f16":
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(fam["ctx"])
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(fam["n_head_kv"])
    w.add_rope_freq_base(fam["rope_base"])
    w.add_layer_norm_rms_eps(fam["eps"])
    if arch in ("qwen3", "llama"):
        w.add_key_length(hd)
        w.add_value_length(hd)
    if arch in ("phi3", "llama"):
        w.add_rope_dimension_count(hd)
    if arch == "llama":
        w.add_vocab_size(n_vocab)
    if arch == "phi3":
        w.add_rope_scaling_orig_ctx_len(fam["ctx"])
        w.add_sliding_window(2047)
    add_tokenizer(w, vocab, fam["template"])
    for tname, data, is_matrix in family_weights(fam, n_vocab, seed):
        if is_matrix:
            arr, raw = encode(data, wtype)
            w.add_tensor(tname, arr, raw_dtype=raw)  # uint8 blocks: shape from the byte shape
        else:
            w.add_tensor(tname, data.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_names():
    return [f"{fam}-{wt}" for fam in FAMILIES for wt in WEIGHT_TYPES]


def generate(out_dir, seed, only=None):
    """Writes the files; returns [(name, path, sha256)]."""
    os.makedirs(out_dir, exist_ok=True)
    vocabs = {}
    done = []
    for fam in FAMILIES:
        for wt in WEIGHT_TYPES:
            name = f"{fam}-{wt}"
            if only and name not in only and fam not in only:
                continue
            tok = FAMILIES[fam]["tokenizer"]
            if tok not in vocabs:
                vocabs[tok] = spm_vocab() if tok == "phi3" else bpe_vocab(tok)
            path = os.path.join(out_dir, name + ".gguf")
            write_model(path, fam, wt, seed, vocabs)
            done.append((name, path, file_sha256(path)))
    return done


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "family-models"))
    ap.add_argument("--only", nargs="*", help="file names (qwen2-f16) or families (qwen2)")
    a = ap.parse_args()
    for name, path, sha in generate(a.out, a.seed, a.only):
        print(f"{path} {sha}")
        print(f"{name}: {os.path.getsize(path):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
