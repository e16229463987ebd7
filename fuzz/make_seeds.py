#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (committed; rerun to regenerate).

Seeds are small valid (and a few near-valid) inputs, so the fuzzers start from inputs that
reach deep into each parser. Binary formats are written here from their specs; the
SentencePiece seed and the config.json seeds are the fixture models' own files
(/work/shared/models, or DENSA_MODELS_DIR).
"""
import json
import random
import os
import shutil
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.environ.get("DENSA_MODELS_DIR", "/work/shared/models")


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ---- GGUF (v3): header, metadata, tensor infos, aligned data ----
def gguf_str(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    if t == 8:
        return gguf_str(v)
    if t == 9:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, i) for i in items)
    fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}[t]
    return struct.pack("<" + fmt, v)


def gguf(meta, tensors, version=3, align=32):
    # tensors: (name, ggml_type, dims, nbytes)
    h = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(meta))
    for k, t, v in meta:
        h += gguf_str(k) + struct.pack("<I", t) + gguf_value(t, v)
    off = 0
    infos = b""
    for name, gt, dims, nbytes in tensors:
        infos += gguf_str(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", gt, off)
        off += (nbytes + align - 1) // align * align
    h += infos
    h += b"\0" * ((-len(h)) % align)
    data = bytes((i * 7) & 0xFF for i in range(off))
    return h + data


def gguf_seeds():
    meta = [("general.architecture", 8, "llama"), ("llama.block_count", 4, 2), ("llama.embedding_length", 4, 8),
            ("general.alignment", 4, 32), ("x.f32", 6, 1.5), ("x.f64", 12, -2.25), ("x.bool", 7, 1),
            ("x.i8", 1, -3), ("x.u16", 2, 7), ("x.i16", 3, -7), ("x.u64", 10, 1 << 40), ("x.i64", 11, -(1 << 40)),
            ("tokenizer.ggml.tokens", 9, (8, ["<unk>", "<s>", "</s>", "\u2581a", "b"])),
            ("tokenizer.ggml.scores", 9, (6, [0.0, 0.0, 0.0, -1.0, -2.0])),
            ("tokenizer.ggml.token_type", 9, (5, [2, 3, 3, 1, 1])),
            ("x.nested", 9, (9, [(4, [1, 2]), (8, ["a"])]))]
    tensors = [("tok_embeddings.weight", 0, [8, 5], 160), ("a.f16", 1, [8, 2], 32), ("a.q8_0", 8, [32, 2], 68),
               ("a.q4_0", 2, [32, 1], 18), ("a.bf16", 30, [4], 8), ("a.q4_K", 12, [256], 144)]
    out("gguf", "full_v3.gguf", gguf(meta, tensors))
    out("gguf", "v2_one_tensor.gguf", gguf(meta[:2], tensors[:1], version=2))
    out("gguf", "no_tensors.gguf", gguf(meta[:4], []))
    out("gguf", "align64.gguf", gguf([("general.alignment", 4, 64)], tensors[:2], align=64))


# ---- safetensors: u64 header length, JSON header, data ----
def safetensors(entries, meta=None):
    header = {}
    off = 0
    for name, dtype, shape, nbytes in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
        off += nbytes
    if meta is not None:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + bytes((i * 13) & 0xFF for i in range(off))


def safetensors_seeds():
    out("safetensors", "two.safetensors",
        safetensors([("a", "F32", [2, 3], 24), ("b", "BF16", [4], 8)], {"format": "pt"}))
    out("safetensors", "dtypes.safetensors",
        safetensors([("f16", "F16", [2], 4), ("fp8", "F8_E4M3", [3], 3), ("i8", "I8", [1], 1),
                     ("u8", "U8", [1, 1], 1), ("i32", "I32", [1], 4), ("f64", "F64", [1], 8),
                     ("scalar", "F32", [], 4), ("empty", "F32", [0, 4], 0)]))


def config_seeds():
    for m in sorted(os.listdir(MODELS)):
        p = os.path.join(MODELS, m, "hf", "config.json")
        if os.path.exists(p):
            shutil.copy(p, os.path.join(HERE, "corpus", "model_config", m + ".json"))
    base = {"vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 64, "rms_norm_eps": 1e-6, "rope_theta": 1e6,
            "max_position_embeddings": 128, "bos_token_id": 1, "eos_token_id": [2, 3], "head_dim": 8}
    moe = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16}
    cfgs = {
        "qwen3_moe": {"architectures": ["Qwen3MoeForCausalLM"], **moe, "norm_topk_prob": True,
                      "decoder_sparse_step": 1, "mlp_only_layers": [0]},
        "qwen2_moe": {"architectures": ["Qwen2MoeForCausalLM"], **moe, "shared_expert_intermediate_size": 32},
        "glm4_moe": {"architectures": ["Glm4MoeForCausalLM"], "n_routed_experts": 8, "num_experts_per_tok": 2,
                     "moe_intermediate_size": 16, "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 2,
                     "topk_group": 1, "routed_scaling_factor": 2.5, "partial_rotary_factor": 0.5,
                     "use_qk_norm": True, "attention_bias": True},
        "deepseek_v3": {"architectures": ["DeepseekV3ForCausalLM"], "q_lora_rank": 16, "kv_lora_rank": 16,
                        "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "n_routed_experts": 8,
                        "num_experts_per_tok": 2, "moe_intermediate_size": 16, "n_shared_experts": 1,
                        "n_group": 2, "topk_group": 1, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
                        "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 64,
                                         "beta_fast": 32, "beta_slow": 1, "mscale": 1, "mscale_all_dim": 1}},
    }
    for name, extra in cfgs.items():
        out("model_config", name + ".json", json.dumps({**base, **extra}, indent=1))


def sentencepiece_seeds():
    shutil.copy(os.path.join(MODELS, "tokenizer", "tokenizer.model"),
                os.path.join(HERE, "corpus", "sentencepiece", "fixture_tokenizer.model"))


def openai_seeds():
    # First byte: 0 completions, 1 chat.
    bodies = {
        "completion": (0, {"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.7,
                           "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 42, "n": 2, "stop": ["\n", "end"],
                           "logprobs": 2, "echo": True, "stream": True, "stream_options": {"include_usage": True},
                           "ignore_eos": False}),
        "completion_ids": (0, {"prompt": [[1, 2, 3], "text", [4]], "max_completion_tokens": 3, "stop": "x"}),
        "chat": (1, {"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                                                {"role": "assistant", "content": None}],
                     "logprobs": True, "top_logprobs": 3, "max_tokens": 4, "densa_timing": True,
                     "densa_kv_integrity": False}),
    }
    for name, (kind, body) in bodies.items():
        out("openai_request", name, bytes([kind]) + json.dumps(body).encode())


def kv_seeds():
    # kv_wire: 16 bytes of expectations (transfer id, page idx/count, tag, page bytes), then a
    # message: the 48-byte header and a payload (its digest is not computed here).
    payload = bytes(range(64))
    expect = struct.pack("<IIII", 77, (0 << 16) | 1, 5, 64)
    hdr = struct.pack("<IHHQIIIIQQ", 0x4B56444E, 1, 0, 77, 0, 2, 5, 4, 0x1122334455667788, 64)
    out("kv_wire", "page", expect + hdr + payload)
    out("kv_wire", "header_only", expect + hdr)
    fp8 = {"model_fingerprint": "0000000000001234", "num_layers": 2, "num_kv_heads": 2, "head_dim": 8,
           "page_size": 4, "dtype": "fp8_e4m3", "scale_mode": "static", "page_bytes": 256,
           "static_scales": [0.5, 1, 2, 0.25, 1, 1, 1, 1]}
    out("kv_layout", "fp8_static.json", json.dumps(fp8))
    out("kv_layout", "fp8_dynamic.json", json.dumps({**fp8, "scale_mode": "dynamic", "static_scales": []}))
    out("kv_layout", "bf16.json", json.dumps({**fp8, "dtype": "bf16", "scale_mode": "none"}))
    out("kv_layout", "f32.json", json.dumps({**fp8, "dtype": "f32", "scale_mode": "none"}))
    # MLA + DSA pages: a latent row of 12 and index keys of 4 per (layer, slot).
    latent = {**fp8, "num_kv_heads": 0, "head_dim": 0, "latent_dim": 12, "index_dim": 4, "static_scales": []}
    out("kv_layout", "latent_bf16.json", json.dumps({**latent, "dtype": "bf16", "scale_mode": "none"}))
    out("kv_layout", "latent_fp8_dynamic.json", json.dumps({**latent, "scale_mode": "dynamic"}))


def sse_seeds():
    # First byte seeds the chunking.
    out("sse_framer", "events", b"\x07" + b"data: {\"a\":1}\n\nevent: x\r\ndata: 1\r\ndata: 2\r\n\r\n: comment\n\ndata: [DONE]\n\n")
    out("sse_framer", "partial", b"\x00data: a\ndata: b\n\ndata: unfinished")


# ---- Tokenizers: a byte-level BPE learnt from the fixture corpus ----
DATA = os.environ.get("DENSA_DATA_DIR", "/work/shared/data")
TEMPLATES = os.path.join(os.path.dirname(MODELS), "templates")
SEP = b"\n=====\n"  # fuzz::kPartSeparator


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def learn_bpe(n_merges=120):
    """(tokens in id order as byte strings, merges as byte-string pairs) from the corpus."""
    with open(os.path.join(DATA, "tinystories", "valid.txt"), "rb") as f:
        text = f.read(20000)
    words = {}
    for w in text.split():
        key = tuple(bytes([b]) for b in b" " + w)
        words[key] = words.get(key, 0) + 1
    tokens = [bytes([b]) for b in range(256)]
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = max(sorted(pairs), key=lambda p: pairs[p])
        merges.append(best)
        tokens.append(best[0] + best[1])
        nw = {}
        for w, c in words.items():
            out_w, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out_w.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out_w.append(w[i])
                    i += 1
            nw[tuple(out_w)] = nw.get(tuple(out_w), 0) + c
        words = nw
    return tokens, merges


QWEN2_PAT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""


def tokenizer_seeds():
    tokens, merges = learn_bpe()
    b2u = bytes_to_unicode()
    bl = lambda b: "".join(b2u[x] for x in b)
    vocab = {bl(t): i for i, t in enumerate(tokens)}
    n = len(tokens)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    added = [{"id": n + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": c.startswith("<|")} for i, c in enumerate(specials)]
    qwen = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "NFC"},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": QWEN2_PAT}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": [bl(a) + " " + bl(b) for a, b in merges]}}
    cfg = {"add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>",
           "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}
    gen = {"eos_token_id": [n + 2, n], "bos_token_id": n}
    out("hf_tokenizer", "qwen_style", json.dumps(qwen).encode() + SEP + json.dumps(cfg).encode() + SEP +
        json.dumps(gen).encode())
    # Llama 3 style: pair merges, a TemplateProcessing post-processor adding bos, Digits.
    llama = json.loads(json.dumps(qwen))
    llama["normalizer"] = None
    llama["model"]["merges"] = [[bl(a), bl(b)] for a, b in merges]
    llama["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Digits", "individual_digits": False})
    llama["post_processor"] = {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [], "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [n]}}}
    cfg2 = {"bos_token": {"content": "<|endoftext|>"}, "eos_token": "<|im_end|>", "add_bos_token": True,
            "chat_template": [{"name": "default", "template": "{{ bos_token }}{{ messages[0].content }}"},
                              {"name": "tool_use", "template": "{{ tools|tojson }}"}]}
    out("hf_tokenizer", "llama3_style", json.dumps(llama).encode() + SEP + json.dumps(cfg2).encode() + SEP +
        b'{"eos_token_id": 257}' + SEP + b"{{ messages|length }}")
    # SentencePiece-as-BPE (Mistral / Llama 2 style): Metaspace pieces, byte fallback tokens.
    sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        sp_vocab["<0x%02X>" % b] = len(sp_vocab)
    sp_merges = []
    for a, b in merges[:60]:
        sa, sb = a.decode("latin-1").replace(" ", "\u2581"), b.decode("latin-1").replace(" ", "\u2581")
        for t in (sa, sb, sa + sb):
            if t not in sp_vocab:
                sp_vocab[t] = len(sp_vocab)
        sp_merges.append(sa + " " + sb)
    sp = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                            "normalized": False, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
          "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                             {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
          "pre_tokenizer": None,
          "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                       {"Sequence": {"id": "A", "type_id": 0}}],
                             "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1]}}},
          "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                       {"type": "ByteFallback"}, {"type": "Fuse"},
                                                       {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
          "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                    "vocab": sp_vocab, "merges": sp_merges}}
    out("hf_tokenizer", "sentencepiece_bpe", json.dumps(sp).encode() + SEP +
        json.dumps({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True, "add_eos_token": False}).encode())
    # Metaspace + Whitespace / Lowercase / Strip / NFKC parts, no config files.
    ms = json.loads(json.dumps(sp))
    ms["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
                                                            {"type": "Strip", "strip_left": True, "strip_right": True}]}
    ms["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
    ms["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}
    ms["post_processor"] = {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1],
                            "trim_offsets": True, "add_prefix_space": False}
    out("hf_tokenizer", "metaspace", json.dumps(ms).encode())

    # tiktoken: the same ranks as base64 lines, Kimi's added_tokens_decoder.
    import base64
    ranks = b"".join(base64.b64encode(t) + b" " + str(i).encode() + b"\n" for i, t in enumerate(tokens))
    kimi = {"added_tokens_decoder": {str(n): {"content": "[BOS]", "special": True},
                                     str(n + 1): {"content": "[EOS]", "special": True},
                                     str(n + 2): {"content": "<|im_end|>", "special": True, "lstrip": False,
                                                  "rstrip": False, "single_word": False, "normalized": False},
                                     str(n + 5): {"content": "<think>", "special": False}},
            "bos_token": "[BOS]", "eos_token": "<|im_end|>", "add_bos_token": False}
    out("tiktoken", "kimi_style", ranks + SEP + json.dumps(kimi).encode())
    out("tiktoken", "ranks_only", ranks)

    # GGUF gpt2 vocabularies, one per pre type, and a llama (SentencePiece) one.
    toks = [bl(t) for t in tokens] + specials
    types = [1] * n + [3, 3, 3, 4, 4]
    mg = [bl(a) + " " + bl(b) for a, b in merges]
    for pre in ["qwen2", "llama-bpe", "deepseek-v3", "kimi-k2", "glm4"]:
        meta = [("general.architecture", 8, "qwen3"), ("tokenizer.ggml.model", 8, "gpt2"), ("tokenizer.ggml.pre", 8, pre),
                ("tokenizer.ggml.tokens", 9, (8, toks)), ("tokenizer.ggml.merges", 9, (8, mg)),
                ("tokenizer.ggml.token_type", 9, (5, types)), ("tokenizer.ggml.bos_token_id", 4, n),
                ("tokenizer.ggml.eos_token_id", 4, n + 2), ("tokenizer.ggml.eot_token_id", 4, n + 2),
                ("tokenizer.ggml.add_bos_token", 7, 1 if pre == "llama-bpe" else 0),
                ("tokenizer.chat_template", 8, "{{ messages[0].content }}")]
        out("gguf_vocab", "gpt2_" + pre + ".gguf", gguf(meta, []))
    sp_toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + \
        [t.decode("latin-1").replace(" ", "\u2581") for t in tokens[256:]]
    meta = [("tokenizer.ggml.model", 8, "llama"), ("tokenizer.ggml.tokens", 9, (8, sp_toks)),
            ("tokenizer.ggml.scores", 9, (6, [0.0] * 259 + [-float(i) for i in range(len(sp_toks) - 259)])),
            ("tokenizer.ggml.token_type", 9, (5, [2, 3, 3] + [6] * 256 + [1] * (len(sp_toks) - 259))),
            ("tokenizer.ggml.bos_token_id", 4, 1), ("tokenizer.ggml.eos_token_id", 4, 2),
            ("tokenizer.ggml.unknown_token_id", 4, 0), ("tokenizer.ggml.add_bos_token", 7, 1)]
    out("gguf_vocab", "llama_sentencepiece.gguf", gguf(meta, []))


# ---- Jinja: the real chat templates, hostile templates, the fixture conversations ----
def jinja_seeds():
    with open(os.path.join(HERE, "..", "tests", "text", "data", "chat_conversations.json")) as f:
        convs = json.load(f)
    names = sorted(x for x in os.listdir(TEMPLATES) if x.endswith(".jinja"))
    for i, name in enumerate(names):
        with open(os.path.join(TEMPLATES, name), "rb") as f:
            src = f.read()
        vars_ = convs[i % len(convs)]["vars"]
        out("jinja", name, src + SEP + json.dumps(vars_).encode())
    for i, c in enumerate(convs):
        out("chat_template", c["name"], bytes([i % len(names), i & 3]) + json.dumps(c["vars"]).encode())
    # Hostile: each must stop at a limit (or give an error) under the engine's default limits.
    d = "{#defaults#}"
    hostile = {
        "recursive_macro": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "mutual_recursion": "{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}{{ a(n) }}{% endmacro %}{{ a(1) }}",
        "recursive_loop": "{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}",
        "string_times_huge": "{{ 'a' * 10**9 }}",
        "list_times_huge": "{{ ([1, 2] * 10**9) | length }}",
        "range_huge": "{% for i in range(10**10) %}{% endfor %}",
        "range_huge_list": "{{ range(10**10) | list | length }}",
        "range_int64": "{{ range(-9223372036854775807, 9223372036854775807) | length }}",
        "nested_loops": "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        "string_doubling": "{% set ns = namespace(v='ab') %}{% for i in range(64) %}{% set ns.v = ns.v ~ ns.v %}{% endfor %}{{ ns.v | length }}",
        "list_doubling": "{% set ns = namespace(v=[1]) %}{% for i in range(64) %}{% set ns.v = ns.v + ns.v %}{% endfor %}{{ ns.v | length }}",
        "list_nesting": "{% set ns = namespace(v=[]) %}{% for i in range(100000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v | tojson }}",
        "dict_nesting": "{% set ns = namespace(v={}) %}{% for i in range(100000) %}{% set ns.v = {'k': ns.v} %}{% endfor %}{{ ns.v }}",
        "deep_parens": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
        "deep_lists": "{{ " + "[" * 5000 + "]" * 5000 + " }}",
        "deep_ifs": "{% if true %}" * 3000 + "x" + "{% endif %}" * 3000,
        "deep_filters": "{{ 'a'" + " | upper" * 10000 + " }}",
        "long_concat": "{{ 'a'" + " ~ 'a'" * 10000 + " }}",
        "unary_chain": "{{ " + "not " * 5000 + "true }}",
        "minus_chain": "{{ " + "-" * 5000 + "1 }}",
        "int_overflow": "{{ 9223372036854775807 + 1 }} {{ -9223372036854775807 - 2 }} {{ 9223372036854775807 * 2 }}",
        "int_pow": "{{ 2 ** 63 }} {{ 10 ** 10 ** 10 }} {{ (-2) ** 64 }} {{ 2 ** -1 }}",
        "int_div": "{{ (-9223372036854775807 - 1) // -1 }} {{ (-9223372036854775807 - 1) % -1 }} {{ 1 // 0 }}",
        "float_to_int": "{{ (1e300 * 1e300) | int }} {{ 1e30 | int }} {{ (0.0 / 1) | int }} {{ 'nan' | float | int }}",
        "huge_indent": "{{ ('a\\n' * 1000) | indent(10**8) }}",
        "huge_center": "{{ 'a' | center(10**9) }}",
        "huge_format": "{{ '%0999999999d' % 1 }} {{ '{:>999999999}'.format(1) }}",
        "huge_slices": "{{ 'abc'[::-9223372036854775807] }} {{ [1, 2][-9223372036854775807:9223372036854775807] }} {{ 'ab'[::0] }}",
        "odd_filter_args": "{{ [1, 2, 3] | batch(0) | list }} {{ [1] | slice(0) | list }} {{ 'a b' | wordwrap(0) }} {{ 1.5 | round(-400) }} {{ 'abc' | truncate(-5) }}",
        "join_huge": "{{ range(3000000) | join(',') | length }}",
        "tojson_huge": "{{ range(3000000) | list | tojson | length }}",
        "replace_growth": "{% set ns = namespace(v='a') %}{% for i in range(40) %}{% set ns.v = ns.v | replace('a', 'aa') %}{% endfor %}{{ ns.v | length }}",
        "messages_tojson": "{{ messages | tojson(indent=100000) }}",
    }
    # In the corpus under the fuzzer's small limits (fast); in regressions/ under the defaults,
    # which the replays prove hold (2M steps take seconds under ASan: too slow to fuzz from).
    deep_vars = {"messages": [{"role": "user", "content": json.loads("[" * 400 + "]" * 400)}]}
    hostile["deep_vars"] = "{{ messages | tojson }}"
    for name, src in hostile.items():
        data = src.encode() + (SEP + json.dumps(deep_vars).encode() if name == "deep_vars" else b"")
        out("jinja", "hostile_" + name, data)
        reg = os.path.join(HERE, "regressions", "jinja", "defaults_" + name)
        with open(reg, "wb") as f:
            f.write(d.encode() + data)
    out("chat_template", "hostile_deep_vars", b"\x00\x01" + json.dumps(deep_vars).encode())
    huge = {"messages": [{"role": "user", "content": "x" * 5000}] * 4, "tools": [{"type": "function",
            "function": {"name": "f" * 1000, "parameters": {"type": "object"}}}] * 20}
    out("chat_template", "many_big_messages", b"\x05\x03" + json.dumps(huge).encode())


# ---- Grammars: byte 0 the front end (0 JSON Schema, 1 regex, 2 GBNF), byte 1 the token seed ----
GBNF_JSON = r"""root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
"""


def grammar_seeds():
    schemas = {
        "weather": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 20},
                                                     "days": {"type": "integer", "minimum": 1, "maximum": 14},
                                                     "units": {"enum": ["c", "f"]}},
                    "required": ["city"], "additionalProperties": False},
        "nested": {"type": "object", "properties": {
            "items": {"type": "array", "items": {"anyOf": [{"type": "number"}, {"type": "null"},
                                                           {"$ref": "#/$defs/pt"}]}, "minItems": 1, "maxItems": 4},
            "flag": {"type": "boolean"}, "tag": {"const": "x\u00e9"}, "re": {"type": "string", "pattern": "^[a-z]{2,4}\\d$"}},
            "$defs": {"pt": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                             "required": ["x", "y"]}}},
        "recursive": {"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}},
        "any": {},
        "format": {"type": "object", "properties": {"d": {"type": "string", "format": "date"},
                                                    "e": {"type": "string", "format": "email"},
                                                    "u": {"type": "string", "format": "uuid"}}},
        "oneof_allof": {"oneOf": [{"type": "string", "enum": ["a", "b"]}, {"allOf": [{"type": "integer"}, {"minimum": 3}]}]},
    }
    for name, sc in schemas.items():
        out("grammar", "schema_" + name, b"\x00\x05" + json.dumps(sc).encode())
    regexes = {"date": r"\d{4}-\d{2}-\d{2}", "alt": r"^(foo|bar(baz)?)+[^a-c\s]{1,3}.?$",
               "unicode": "[\u00e0-\u00ff\u4e00-\u9fff]+\\u{1F600}?", "classes": r"[\w\-.]+@[\w-]+\.(com|org)",
               "counted": r"(?:ab){2,5}x{3}\x41\n*?", "named": r"(?<year>\d{2})[\D\S\W]"}
    for name, rx in regexes.items():
        out("grammar", "regex_" + name, b"\x01\x09" + rx.encode())
    gbnfs = {
        "json": GBNF_JSON,
        "arith": 'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= num | "(" expr ")"\nnum ::= [0-9]+ # digits\n',
        "unicode": 'root ::= ("\u00e9" | [\u4e00-\u9fff] | "\\U0001F600" | .)+ "\\n"?\n',
        "list": 'root ::= item{1,3} ("," item){0,}\nitem ::= [a-z-]+ | "yes" | "no"\n',
    }
    for name, g in gbnfs.items():
        out("grammar", "gbnf_" + name, b"\x02\x11" + g.encode())


# ---- Chat output parsing: byte 0 tool parser, byte 1 reasoning parser (bit 7: opened in the
# prompt), byte 2 the chunk seed (indexes: chat_parse.cpp's tool_parser_names /
# reasoning_parser_names order; one past the end is none) ----
def chat_parse_seeds():
    tools = ["kimi_k2", "glm45", "glm4_moe", "glm46", "glm47", "deepseek_v3", "deepseek_v31", "hermes", "qwen3",
             "qwen25", "qwen3_coder"]
    reasoning = ["qwen3", "deepseek_r1", "deepseek_v31", "deepseek_v3", "glm45", "glm4_moe", "kimi_k2"]
    think = "<think>Let me check the weather.\n</think>\n\n"
    tb, te = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
    cb, ce, sep = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>", "<\uff5ctool\u2581sep\uff5c>"
    samples = {
        "kimi_k2": ("kimi_k2", think + "Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                    "<|tool_call_argument_begin|>{\"city\": \"Z\u00fcrich\", \"days\": 2}<|tool_call_end|>"
                    "<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{\"query\": \"x\"}<|tool_call_end|>"
                    "<|tool_calls_section_end|>"),
        "glm45": ("glm45", think + "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
                  "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call><tool_call>search\n<arg_key>tags</arg_key>"
                  "<arg_value>[\"a\"]</arg_value></tool_call>"),
        "deepseek_v3": ("deepseek_v3", tb + cb + "function" + sep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + ce + te),
        "deepseek_v31": ("deepseek_v31", "I will call it.</think>Ok" + tb + cb + "get_weather" + sep + "{\"city\": \"Rome\"}" + ce + te),
        "hermes": ("hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"units\": \"c\"}}\n</tool_call>\n"
                   "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"</tool_call>\"}}\n</tool_call>"),
        "qwen3": ("qwen3", think + "<tool_call>\n{\"arguments\": {\"city\": \"Lima\"}, \"name\": \"get_weather\"}\n</tool_call>"),
        "qwen3_coder": ("qwen3_coder", "Calling.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                        "<parameter=days>\n7\n</parameter>\n</function>\n</tool_call>"),
        "truncated": ("kimi_k2", "Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                      "<|tool_call_argument_begin|>{\"city\": \"Z\u00fc"),
    }
    rmap = {"kimi_k2": "kimi_k2", "glm45": "glm45", "deepseek_v3": "deepseek_v3", "deepseek_v31": "deepseek_v31",
            "hermes": "qwen3", "qwen3": "qwen3", "qwen3_coder": "qwen3", "truncated": "kimi_k2"}
    for i, (name, (parser, text)) in enumerate(samples.items()):
        r = reasoning.index(rmap[name])
        if name == "deepseek_v31":
            r |= 0x80  # the prompt opened the reasoning
        out("chat_parse", name, bytes([tools.index(parser), r, i * 37 % 256]) + text.encode())
    out("chat_parse", "plain_none", bytes([len(tools), len(reasoning), 3]) + b"Just text <tool_ca with \xff bytes")


def affine_rows_seeds():
    # (name, block elements, block bytes, offsets of its f16 scales; None: MXFP4's E8M0 byte)
    formats = [("q4_1", 32, 20, [0, 2]), ("q5_0", 32, 22, [0]), ("q5_1", 32, 24, [0, 2]), ("q2_K", 256, 84, [80, 82]),
               ("q3_K", 256, 110, [108]), ("q4_K", 256, 144, [0, 2]), ("q5_K", 256, 176, [0, 2]),
               ("q6_K", 256, 210, [208]), ("iq4_nl", 32, 18, [0]), ("iq4_xs", 256, 136, [0]), ("mxfp4", 32, 17, None)]
    rng = random.Random(35)
    for i, (name, elems, nbytes, scales) in enumerate(formats):
        for flags in (0, 1, 3):
            rows = 1 + ((flags >> 1) & 1)
            blob = bytearray()
            for _ in range(rows * 256 // elems):
                b = bytearray(rng.getrandbits(8) for _ in range(nbytes))
                if scales is None:
                    b[0] = rng.randrange(110, 130)  # E8M0 exponents near 1
                else:
                    for off in scales:
                        b[off:off + 2] = struct.pack("<e", rng.uniform(-0.02, 0.02))
                blob += b
            out("affine_rows", "%s_flags%d" % (name, flags), bytes([i, flags]) + bytes(blob))
    out("affine_rows", "short", bytes([5, 0, 1, 2, 3]))


def main():
    for t in ["gguf", "safetensors", "model_config", "sentencepiece", "openai_request", "kv_wire", "kv_layout",
              "sse_framer", "hf_tokenizer", "tiktoken", "gguf_vocab", "jinja", "chat_template", "grammar", "chat_parse",
              "affine_rows"]:
        os.makedirs(os.path.join(HERE, "corpus", t), exist_ok=True)
        os.makedirs(os.path.join(HERE, "regressions", t), exist_ok=True)
    gguf_seeds()
    safetensors_seeds()
    config_seeds()
    sentencepiece_seeds()
    openai_seeds()
    kv_seeds()
    sse_seeds()
    tokenizer_seeds()
    jinja_seeds()
    grammar_seeds()
    chat_parse_seeds()
    affine_rows_seeds()


if __name__ == "__main__":
    sys.exit(main())
