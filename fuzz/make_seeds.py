#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ (committed; rerun to regenerate).

Seeds are small valid (and a few near-valid) inputs, so the fuzzers start from inputs that
reach deep into each parser. Binary formats are written here from their specs; the
SentencePiece seed and the config.json seeds are the fixture models' own files
(/work/shared/models, or DENSA_MODELS_DIR).
"""
import json
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


def sse_seeds():
    # First byte seeds the chunking.
    out("sse_framer", "events", b"\x07" + b"data: {\"a\":1}\n\nevent: x\r\ndata: 1\r\ndata: 2\r\n\r\n: comment\n\ndata: [DONE]\n\n")
    out("sse_framer", "partial", b"\x00data: a\ndata: b\n\ndata: unfinished")


def main():
    for t in ["gguf", "safetensors", "model_config", "sentencepiece", "openai_request", "kv_wire", "kv_layout",
              "sse_framer"]:
        os.makedirs(os.path.join(HERE, "corpus", t), exist_ok=True)
        os.makedirs(os.path.join(HERE, "regressions", t), exist_ok=True)
    gguf_seeds()
    safetensors_seeds()
    config_seeds()
    sentencepiece_seeds()
    openai_seeds()
    kv_seeds()
    sse_seeds()


if __name__ == "__main__":
    sys.exit(main())
