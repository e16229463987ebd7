#!/usr/bin/python3
"""PyTorch reference for the GQA-attention MoE families qwen3_moe, qwen2_moe and glm4_moe.

Builds a tiny random-weight checkpoint per architecture with the real models' config.json keys
and Hugging Face tensor names, and golden logits + greedy continuations for the prompts of
ref_io.PROMPTS. Written from the published architecture descriptions (HF model cards and
config documentation); fp32 compute on BF16-rounded weights, no KV cache.

Regenerate (deterministic, fixed seeds; needs only torch + numpy):
  /usr/bin/python3 tests/reference/moe_gqa_reference.py --out tests/data/reference
"""
import argparse
import os

import torch

import ref_io
from ref_layers import (causal_gqa_attention, moe_experts, rmsnorm, route_sigmoid_grouped,
                        route_softmax_topk, rope_rotate_half, swiglu)

NUM_GREEDY = 8

COMMON = {
    "vocab_size": 1024, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 16, "hidden_act": "silu", "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
}

CONFIGS = {
    # Qwen3-30B-A3B layout: per-head q/k RMSNorm, softmax top-k renormalised, no shared expert.
    # Layer 1 is listed in mlp_only_layers to exercise a dense layer between MoE layers.
    "qwen3_moe": dict(COMMON, **{
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "num_hidden_layers": 3, "intermediate_size": 128, "moe_intermediate_size": 32,
        "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True,
        "decoder_sparse_step": 1, "mlp_only_layers": [1], "attention_bias": False,
        "rope_theta": 1000000.0, "sliding_window": None, "use_sliding_window": False,
    }),
    # Qwen1.5-MoE-A2.7B layout: q/k/v bias, softmax top-k not renormalised, one shared expert
    # scaled by sigmoid(shared_expert_gate(x)).
    "qwen2_moe": dict(COMMON, **{
        "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
        "num_hidden_layers": 2, "intermediate_size": 128, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64, "num_experts": 8, "num_experts_per_tok": 2,
        "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "rope_theta": 1000000.0, "use_sliding_window": False,
    }),
    # GLM-4.5 layout: partial RoPE (half of head_dim), q/k/v bias, q/k norm, sigmoid routing
    # with e_score_correction_bias and grouped top-k, routed_scaling_factor, one shared
    # expert, first layer dense.
    "glm4_moe": dict(COMMON, **{
        "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe",
        "num_hidden_layers": 3, "intermediate_size": 128, "moe_intermediate_size": 32,
        "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2,
        "first_k_dense_replace": 1, "n_group": 4, "topk_group": 2, "norm_topk_prob": True,
        "routed_scaling_factor": 2.5, "partial_rotary_factor": 0.5, "attention_bias": True,
        "use_qk_norm": True, "rope_theta": 1000000.0, "num_nextn_predict_layers": 0,
    }),
}


def num_experts(cfg):
    return cfg.get("n_routed_experts", cfg.get("num_experts", 0))


def is_moe_layer(cfg, i):
    if cfg["model_type"] == "glm4_moe":
        return i >= cfg["first_k_dense_replace"]
    return i not in cfg["mlp_only_layers"] and (i + 1) % cfg["decoder_sparse_step"] == 0


def make_weights(cfg, seed):
    """Random weights, scaled so logits have real margins and routing varies across tokens."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, std=1.0, mean=0.0):
        return ref_io.bf16_round(mean + std * torch.randn(*shape, generator=g))

    H, V, D = cfg["hidden_size"], cfg["vocab_size"], cfg["head_dim"]
    Hq, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    I, Ie, E = cfg["intermediate_size"], cfg["moe_intermediate_size"], num_experts(cfg)
    t = {"model.embed_tokens.weight": randn(V, H),
         "model.norm.weight": randn(H, std=0.1, mean=1.0),
         "lm_head.weight": randn(V, H, std=0.5)}
    qkv_bias = cfg["model_type"] == "qwen2_moe" or cfg.get("attention_bias", False)
    qk_norm = cfg["model_type"] == "qwen3_moe" or cfg.get("use_qk_norm", False)

    def mlp(prefix, width):
        t[prefix + "gate_proj.weight"] = randn(width, H, std=H ** -0.5)
        t[prefix + "up_proj.weight"] = randn(width, H, std=H ** -0.5)
        t[prefix + "down_proj.weight"] = randn(H, width, std=width ** -0.5)

    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = randn(H, std=0.1, mean=1.0)
        t[p + "post_attention_layernorm.weight"] = randn(H, std=0.1, mean=1.0)
        for name, rows in (("q", Hq * D), ("k", Hkv * D), ("v", Hkv * D)):
            t[p + "self_attn.%s_proj.weight" % name] = randn(rows, H, std=H ** -0.5)
            if qkv_bias:
                t[p + "self_attn.%s_proj.bias" % name] = randn(rows, std=0.2)
        t[p + "self_attn.o_proj.weight"] = randn(H, Hq * D, std=(Hq * D) ** -0.5)
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = randn(D, std=0.1, mean=1.0)
            t[p + "self_attn.k_norm.weight"] = randn(D, std=0.1, mean=1.0)
        if not is_moe_layer(cfg, i):
            mlp(p + "mlp.", I)
            continue
        t[p + "mlp.gate.weight"] = randn(E, H, std=2.0 * H ** -0.5)
        for e in range(E):
            mlp(p + "mlp.experts.%d." % e, Ie)
        if cfg["model_type"] == "qwen2_moe":
            mlp(p + "mlp.shared_expert.", cfg["shared_expert_intermediate_size"])
            t[p + "mlp.shared_expert_gate.weight"] = randn(1, H, std=H ** -0.5)
        if cfg["model_type"] == "glm4_moe":
            mlp(p + "mlp.shared_experts.", Ie * cfg["n_shared_experts"])
            t[p + "mlp.gate.e_score_correction_bias"] = (0.05 * torch.randn(E, generator=g)).float()
    return t


def forward(cfg, t, ids):
    """fp32 logits [len(ids), vocab] and, per MoE layer, the chosen experts [len(ids), top_k]
    plus the smallest gap between the k-th and (k+1)-th selection score."""
    mt = cfg["model_type"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    Hq, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    rot = int(D * cfg.get("partial_rotary_factor", 1.0))
    T = len(ids)
    pos = torch.arange(T)
    x = t["model.embed_tokens.weight"][torch.tensor(ids)]
    routing = {}
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        h = rmsnorm(x, t[p + "input_layernorm.weight"], eps)
        qkv = []
        for name, heads in (("q", Hq), ("k", Hkv), ("v", Hkv)):
            y = h @ t[p + "self_attn.%s_proj.weight" % name].T
            if p + "self_attn.%s_proj.bias" % name in t:
                y = y + t[p + "self_attn.%s_proj.bias" % name]
            y = y.view(T, heads, D)
            if name != "v" and p + "self_attn.%s_norm.weight" % name in t:
                y = rmsnorm(y, t[p + "self_attn.%s_norm.weight" % name], eps)
            if name != "v":
                y = rope_rotate_half(y, pos, theta, rot)
            qkv.append(y)
        a = causal_gqa_attention(*qkv, scale=D ** -0.5).reshape(T, Hq * D)
        x = x + a @ t[p + "self_attn.o_proj.weight"].T

        h = rmsnorm(x, t[p + "post_attention_layernorm.weight"], eps)
        if not is_moe_layer(cfg, i):
            x = x + swiglu(h, t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"],
                           t[p + "mlp.down_proj.weight"])
            continue
        logits = h @ t[p + "mlp.gate.weight"].T
        k = cfg["num_experts_per_tok"]
        if mt == "glm4_moe":
            idx, w = route_sigmoid_grouped(logits, t[p + "mlp.gate.e_score_correction_bias"], k,
                                           cfg["n_group"], cfg["topk_group"], cfg["norm_topk_prob"],
                                           cfg["routed_scaling_factor"])
            score = torch.sigmoid(logits) + t[p + "mlp.gate.e_score_correction_bias"]
        else:
            idx, w = route_softmax_topk(logits, k, cfg["norm_topk_prob"])
            score = torch.softmax(logits, dim=-1)
        srt = torch.sort(score, dim=-1, descending=True).values
        routing[i] = {"selected": torch.sort(idx, dim=-1).values.tolist(),
                      "min_gap": float((srt[:, k - 1] - srt[:, k]).min())}
        E = num_experts(cfg)
        experts = [(t[p + "mlp.experts.%d.gate_proj.weight" % e], t[p + "mlp.experts.%d.up_proj.weight" % e],
                    t[p + "mlp.experts.%d.down_proj.weight" % e]) for e in range(E)]
        y = moe_experts(h, idx, w, experts)
        if mt == "qwen2_moe":
            s = "mlp.shared_expert."
            gate = torch.sigmoid(h @ t[p + "mlp.shared_expert_gate.weight"].T)
            y = y + gate * swiglu(h, t[p + s + "gate_proj.weight"], t[p + s + "up_proj.weight"],
                                  t[p + s + "down_proj.weight"])
        if mt == "glm4_moe":
            s = "mlp.shared_experts."
            y = y + swiglu(h, t[p + s + "gate_proj.weight"], t[p + s + "up_proj.weight"],
                           t[p + s + "down_proj.weight"])
        x = x + y
    x = rmsnorm(x, t["model.norm.weight"], eps)
    return x @ t["lm_head.weight"].T, routing


def generate(arch, out_root, seed):
    cfg = CONFIGS[arch]
    out = os.path.join(out_root, arch)
    ref_io.write_config(out, cfg)
    t = make_weights(cfg, seed)
    stored = {k: (v.to(torch.bfloat16) if v.dtype == torch.float32 and "correction_bias" not in k else v)
              for k, v in t.items()}
    ref_io.write_safetensors(os.path.join(out, "model.safetensors"), stored, {"format": "pt"})
    # Self-check: what we wrote reads back to the values the forward uses.
    back = ref_io.read_safetensors(os.path.join(out, "model.safetensors"))
    assert all(torch.equal(back[k].float(), t[k]) for k in t)

    records = []
    with torch.no_grad():
        for _, prompt_ids in ref_io.PROMPTS:
            greedy, logits, margin, routing = ref_io.greedy_golden(
                lambda ids: forward(cfg, t, ids), prompt_ids, NUM_GREEDY)
            records.append({"prompt_ids": prompt_ids, "greedy_ids": greedy, "logits": logits,
                            "min_margin": margin,
                            "router": {str(l): r for l, r in routing.items()}})
    ref_io.write_golden(out, arch, records, {"seed": seed, "weights": "BF16 values, fp32 compute",
                                             "prompts_text": [p for p, _ in ref_io.PROMPTS]})
    used = sorted({e for r in records for lr in r["router"].values() for row in lr["selected"] for e in row})
    print("%s: %d tensors, greedy %s, min margin %.3f, experts used %s" %
          (arch, len(t), [r["greedy_ids"] for r in records], min(r["min_margin"] for r in records), used))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "data", "reference"))
    ap.add_argument("--arch", action="append", choices=sorted(CONFIGS))
    args = ap.parse_args()
    torch.manual_seed(0)
    for n, arch in enumerate(args.arch or ["qwen3_moe", "qwen2_moe", "glm4_moe"]):
        generate(arch, args.out, seed=1000 + n)


if __name__ == "__main__":
    main()
