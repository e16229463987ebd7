#!/usr/bin/env python3
"""Writes a random-weight DeepseekV3ForCausalLM checkpoint (HF safetensors, BF16) with
DeepSeek-V3's attention shape: 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128,
qk_rope 64, v_head_dim 128. A narrow hidden size (2048), few layers (all MoE) and small experts keep it
under 1 GB. Its MLA attention costs per token are those of the real model's layers, so
`densa bench offline` on it shows what the absorbed products cost end to end
(docs/performance/llamacpp.md, "BF16 and F16 weights on AMX tiles").

Standard library only (no numpy or torch): every tensor is a block of 65,536 random normal
values at the tensor's scale (1/sqrt(cols); norms 1 +- 0.2), repeated to fill it. That is
enough for speed: the bytes streamed and the work done are those of the shapes. Routing and
outputs are not meaningful.

  python3 bench/mla_shape_model.py OUT_DIR [--layers N]
"""
import argparse
import json
import math
import os
import random
import struct

BLOCK = 65536


def bf16_block(rng, scale, mean=0.0):
    out = bytearray(2 * BLOCK)
    for i in range(BLOCK):
        bits = struct.unpack("<I", struct.pack("<f", mean + scale * rng.gauss(0.0, 1.0)))[0]
        bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
        struct.pack_into("<H", out, 2 * i, (bits >> 16) & 0xFFFF)
    return bytes(out)


def config(layers):
    return {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": 1024,
        "hidden_size": 2048, "intermediate_size": 1024, "moe_intermediate_size": 256,
        "num_hidden_layers": layers, "num_nextn_predict_layers": 0, "num_attention_heads": 128,
        "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 8, "routed_scaling_factor": 2.5,
        "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "qk_nope_head_dim": 128, "topk_method": "noaux_tc", "n_group": 4, "topk_group": 2,
        "num_experts_per_tok": 2, "moe_layer_freq": 1, "first_k_dense_replace": 0, "norm_topk_prob": True,
        "scoring_func": "sigmoid", "hidden_act": "silu", "max_position_embeddings": 4096, "rms_norm_eps": 1e-06,
        "tie_word_embeddings": False, "rope_theta": 10000.0, "rope_interleave": True,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024,
                         "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
        "attention_bias": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
    }


def shapes(cfg):
    H, V, nh = cfg["hidden_size"], cfg["vocab_size"], cfg["num_attention_heads"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kvr, qr = cfg["kv_lora_rank"], cfg["q_lora_rank"]
    out = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H], "lm_head.weight": [V, H]}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = [H]
        out[p + "post_attention_layernorm.weight"] = [H]
        a = p + "self_attn."
        out[a + "q_a_proj.weight"] = [qr, H]
        out[a + "q_a_layernorm.weight"] = [qr]
        out[a + "q_b_proj.weight"] = [nh * (nope + rope), qr]
        out[a + "kv_a_proj_with_mqa.weight"] = [kvr + rope, H]
        out[a + "kv_a_layernorm.weight"] = [kvr]
        out[a + "kv_b_proj.weight"] = [nh * (nope + vd), kvr]
        out[a + "o_proj.weight"] = [H, nh * vd]
        m = p + "mlp."
        if i < cfg["first_k_dense_replace"]:
            I = cfg["intermediate_size"]
            out.update({m + "gate_proj.weight": [I, H], m + "up_proj.weight": [I, H], m + "down_proj.weight": [H, I]})
            continue
        E, I = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
        out[m + "gate.weight"] = [E, H]
        out[m + "gate.e_score_correction_bias"] = [E]
        for e in range(E):
            x = f"{m}experts.{e}."
            out.update({x + "gate_proj.weight": [I, H], x + "up_proj.weight": [I, H], x + "down_proj.weight": [H, I]})
        S = I * cfg["n_shared_experts"]
        s = m + "shared_experts."
        out.update({s + "gate_proj.weight": [S, H], s + "up_proj.weight": [S, H], s + "down_proj.weight": [H, S]})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=4)
    a = ap.parse_args()
    cfg = config(a.layers)
    rng = random.Random(20261201)
    blocks = {}

    def block_for(name, shape):
        if len(shape) == 1:
            key = ("bias", 0.1, 0.0) if name.endswith("bias") else ("norm", 0.2, 1.0)
        else:
            key = ("mat", 1.0 / math.sqrt(shape[1]), 0.0)
        if key not in blocks:
            blocks[key] = bf16_block(rng, key[1], key[2])
        return blocks[key]

    tensors = shapes(cfg)
    header, offset = {}, 0
    for name in sorted(tensors):
        n = 2 * math.prod(tensors[name])
        header[name] = {"dtype": "BF16", "shape": tensors[name], "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in sorted(tensors):
            n = 2 * math.prod(tensors[name])
            b = block_for(name, tensors[name])
            f.write((b * (n // len(b) + 1))[:n])
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    print(f"wrote {a.out}: {offset / 2 / 1e6:.0f}M parameters, {offset / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
