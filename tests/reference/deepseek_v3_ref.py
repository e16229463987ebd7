#!/usr/bin/python3
"""PyTorch reference for the deepseek_v3 architecture (DeepSeek-V3, Kimi K2).

Written from the published architecture description (DeepSeek-V3 technical report and the
Hugging Face config/tensor naming), not from densa's C++ code. It

  1. builds a tiny random-weight checkpoint with the real config.json keys and the real HF
     safetensors tensor names (BF16, < 1 MB),
  2. runs the model in float64 on the BF16 weights in the *simple* MLA form (decompress K and V
     from the latent with kv_b_proj, then ordinary causal attention per head; HF's form), and
  3. writes golden logits (teacher-forced, at a subset of positions), greedy continuations and
     the experts chosen per MoE layer.

Regenerate (deterministic; needs only Debian python3-torch + numpy):

    /usr/bin/python3 tests/reference/deepseek_v3_ref.py            # both variants
    /usr/bin/python3 tests/reference/deepseek_v3_ref.py --check    # also print self-checks

Outputs: tests/data/reference/deepseek_v3/ (q_lora_rank 32, 3 layers) and
tests/data/reference/deepseek_v3_no_q_lora/ (q_lora_rank null, 2 layers).

Architecture as implemented here:
  * MLA. q = q_b_proj(rmsnorm(q_a_proj(x), q_a_layernorm)) (or q_proj(x) when q_lora_rank is
    null), per head [q_nope | q_pe]. kv_a_proj_with_mqa(x) = [c_kv (kv_lora_rank) | k_pe
    (qk_rope_head_dim)]; c_kv = rmsnorm(c_kv, kv_a_layernorm); kv_b_proj(c_kv) per head
    [k_nope | v]; k_pe is one RoPE key shared by all heads. The cache of a real server holds
    [c_kv | k_pe] per token per layer (kv_lora_rank + qk_rope_head_dim values).
  * RoPE on q_pe / k_pe is interleaved in the checkpoint: HF de-interleaves the rope dims
    (x.view(d/2, 2).transpose) and then applies rotate-half; i.e. pair (2i, 2i+1) is rotated by
    angle pos * inv_freq[i]. Done here exactly the HF way.
  * YaRN (rope_scaling type yarn): inv_freq blends interpolated (base^(-2i/d) / factor) and
    extrapolated frequencies with a linear ramp between the correction dims of beta_fast and
    beta_slow over original_max_position_embeddings; cos/sin are multiplied by
    mscale(factor, mscale) / mscale(factor, mscale_all_dim); the softmax scale is
    (qk_nope + qk_rope)^-0.5 * mscale(factor, mscale_all_dim)^2, mscale(s, m) = 0.1 m ln s + 1.
  * MoE (noaux_tc): s = sigmoid(x . gate^T); choice = s + e_score_correction_bias; group score =
    sum of the top-2 choice values in each of n_group groups; keep topk_group groups; top-k
    experts by choice within them; weights = s (no bias) of those experts, divided by their sum
    (+1e-20) when norm_topk_prob, times routed_scaling_factor; plus the shared experts (one
    SwiGLU of width moe_intermediate_size * n_shared_experts). Layers < first_k_dense_replace
    use a dense SwiGLU of width intermediate_size.
"""
import argparse
import json
import math
import os

import numpy as np
import torch

import ref_io

torch.set_default_dtype(torch.float64)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_ROOT = os.path.normpath(os.path.join(HERE, "..", "data", "reference"))


def base_config():
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": 1024,
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 3,
        "num_nextn_predict_layers": 0,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "n_shared_experts": 1,
        "n_routed_experts": 8,
        "routed_scaling_factor": 2.5,
        "kv_lora_rank": 32,
        "q_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "v_head_dim": 16,
        "qk_nope_head_dim": 16,
        "topk_method": "noaux_tc",
        "n_group": 4,
        "topk_group": 2,
        "num_experts_per_tok": 2,
        "moe_layer_freq": 1,
        "first_k_dense_replace": 1,
        "norm_topk_prob": True,
        "scoring_func": "sigmoid",
        "hidden_act": "silu",
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": False,
        "rope_theta": 10000.0,
        "rope_interleave": True,
        "rope_scaling": {
            "type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 64,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            # != mscale so that both the cos/sin factor and the softmax-scale factor matter.
            "mscale_all_dim": 0.8,
        },
        "attention_bias": False,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "torch_dtype": "bfloat16",
    }


VARIANTS = {
    "deepseek_v3": dict(seed=20261130),
    "deepseek_v3_no_q_lora": dict(seed=20261202, q_lora_rank=None, num_hidden_layers=2),
}


# ---------------------------------------------------------------- weights and safetensors

def make_weights(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    nh = cfg["num_attention_heads"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kvr, qr = cfg["kv_lora_rank"], cfg["q_lora_rank"]
    w = {}

    def mat(name, rows, cols, gain=1.0):
        w[name] = torch.randn(rows, cols, generator=g) * (gain / math.sqrt(cols))

    def norm(name, n):
        w[name] = 1.0 + 0.2 * torch.randn(n, generator=g)

    w["model.embed_tokens.weight"] = torch.randn(V, H, generator=g)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm.weight", H)
        norm(p + "post_attention_layernorm.weight", H)
        a = p + "self_attn."
        if qr:
            mat(a + "q_a_proj.weight", qr, H)
            norm(a + "q_a_layernorm.weight", qr)
            mat(a + "q_b_proj.weight", nh * (nope + rope), qr, 1.5)
        else:
            mat(a + "q_proj.weight", nh * (nope + rope), H, 1.5)
        mat(a + "kv_a_proj_with_mqa.weight", kvr + rope, H, 1.5)
        norm(a + "kv_a_layernorm.weight", kvr)
        mat(a + "kv_b_proj.weight", nh * (nope + vd), kvr)
        mat(a + "o_proj.weight", H, nh * vd)
        m = p + "mlp."
        if i < cfg["first_k_dense_replace"]:
            I = cfg["intermediate_size"]
            mat(m + "gate_proj.weight", I, H)
            mat(m + "up_proj.weight", I, H)
            mat(m + "down_proj.weight", H, I)
            continue
        E, I = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
        mat(m + "gate.weight", E, H, 2.0)
        w[m + "gate.e_score_correction_bias"] = 0.1 * torch.randn(E, generator=g)
        for e in range(E):
            x = f"{m}experts.{e}."
            mat(x + "gate_proj.weight", I, H)
            mat(x + "up_proj.weight", I, H)
            mat(x + "down_proj.weight", H, I)
        S = I * cfg["n_shared_experts"]
        mat(m + "shared_experts.gate_proj.weight", S, H)
        mat(m + "shared_experts.up_proj.weight", S, H)
        mat(m + "shared_experts.down_proj.weight", H, S)
    norm("model.norm.weight", H)
    mat("lm_head.weight", V, H, 3.0)
    # The checkpoint stores BF16; the reference computes on exactly those values.
    return {k: v.to(torch.bfloat16) for k, v in w.items()}


# ---------------------------------------------------------------- model (float64)

def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def yarn_get_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_correction_dim(num_rotations, dim, base, max_pos):
    return (dim * math.log(max_pos / (num_rotations * 2 * math.pi))) / (2 * math.log(base))


def rope_tables(cfg, positions):
    """cos, sin: [len(positions), rope_dim] in HF's rotate-half order, YaRN scaled."""
    d, base = cfg["qk_rope_head_dim"], cfg["rope_theta"]
    rs = cfg.get("rope_scaling")
    exponents = torch.arange(0, d, 2, dtype=torch.float64) / d
    inv_freq = 1.0 / (base ** exponents)
    attn_factor = 1.0
    if rs:
        f = rs["factor"]
        extra = inv_freq
        inter = 1.0 / (f * base ** exponents)
        low = max(math.floor(yarn_correction_dim(rs["beta_fast"], d, base, rs["original_max_position_embeddings"])), 0)
        high = min(math.ceil(yarn_correction_dim(rs["beta_slow"], d, base, rs["original_max_position_embeddings"])), d - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
        extra_mask = 1.0 - ramp
        inv_freq = inter * (1 - extra_mask) + extra * extra_mask
        attn_factor = yarn_get_mscale(f, rs.get("mscale", 1)) / yarn_get_mscale(f, rs.get("mscale_all_dim", 0))
    t = torch.tensor(positions, dtype=torch.float64)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos() * attn_factor, emb.sin() * attn_factor


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], -1)


def apply_rope_interleaved(x, cos, sin):
    """x: [s, heads, d] in the checkpoint's interleaved order; cos/sin [s, d]. HF form."""
    s, nh, d = x.shape
    x = x.view(s, nh, d // 2, 2).transpose(3, 2).reshape(s, nh, d)
    return x * cos[:, None, :] + rotate_half(x) * sin[:, None, :]


def softmax_scale(cfg):
    scale = (cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]) ** -0.5
    rs = cfg.get("rope_scaling")
    if rs and rs.get("mscale_all_dim", 0):
        m = yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])
        scale = scale * m * m
    return scale


class Model:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = {k: v.to(torch.float64) for k, v in weights.items()}

    def linear(self, x, name):
        return x @ self.w[name].T

    def attention(self, i, x, cos, sin):
        c, w = self.cfg, self.w
        nh, nope, rope, vd = c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        kvr, eps = c["kv_lora_rank"], c["rms_norm_eps"]
        a = f"model.layers.{i}.self_attn."
        s = x.shape[0]
        if c["q_lora_rank"]:
            q = self.linear(rmsnorm(self.linear(x, a + "q_a_proj.weight"), w[a + "q_a_layernorm.weight"], eps),
                            a + "q_b_proj.weight")
        else:
            q = self.linear(x, a + "q_proj.weight")
        q = q.view(s, nh, nope + rope)
        q_nope, q_pe = q[..., :nope], q[..., nope:]
        kv_a = self.linear(x, a + "kv_a_proj_with_mqa.weight")
        c_kv = rmsnorm(kv_a[:, :kvr], w[a + "kv_a_layernorm.weight"], eps)
        k_pe = kv_a[:, kvr:].view(s, 1, rope)
        kv = self.linear(c_kv, a + "kv_b_proj.weight").view(s, nh, nope + vd)
        k_nope, v = kv[..., :nope], kv[..., nope:]
        q_pe = apply_rope_interleaved(q_pe, cos, sin)
        k_pe = apply_rope_interleaved(k_pe, cos, sin)
        query = torch.cat([q_nope, q_pe], -1)                       # [s, nh, nope+rope]
        key = torch.cat([k_nope, k_pe.expand(s, nh, rope)], -1)     # [s, nh, nope+rope]
        scores = torch.einsum("qhd,khd->hqk", query, key) * softmax_scale(c)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
        scores = scores.masked_fill(mask, float("-inf"))
        p = torch.softmax(scores, -1)
        out = torch.einsum("hqk,khd->qhd", p, v).reshape(s, nh * vd)
        self.latents[i] = torch.cat([c_kv, apply_rope_interleaved(kv_a[:, kvr:].view(s, 1, rope), cos, sin)[:, 0]], -1)
        return self.linear(out, a + "o_proj.weight")

    def mlp(self, x, prefix):
        return self.linear(torch.nn.functional.silu(self.linear(x, prefix + "gate_proj.weight")) *
                           self.linear(x, prefix + "up_proj.weight"), prefix + "down_proj.weight")

    def route(self, i, x):
        c, w = self.cfg, self.w
        m = f"model.layers.{i}.mlp."
        E, K, G, TG = c["n_routed_experts"], c["num_experts_per_tok"], c["n_group"], c["topk_group"]
        scores = torch.sigmoid(self.linear(x, m + "gate.weight"))
        choice = scores + w[m + "gate.e_score_correction_bias"]
        group_scores = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(-1)
        group_idx = group_scores.topk(TG, dim=-1)[1]
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
        expert_mask = group_mask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E)
        masked = choice.masked_fill(expert_mask == 0, float("-inf"))
        ids = masked.topk(K, dim=-1)[1]
        weights = scores.gather(1, ids)
        if K > 1 and c["norm_topk_prob"]:
            weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
        weights = weights * c["routed_scaling_factor"]
        return ids, weights, scores, choice

    def moe(self, i, x):
        m = f"model.layers.{i}.mlp."
        ids, weights, scores, choice = self.route(i, x)
        self.routing[i] = (ids, scores, choice)
        out = torch.zeros_like(x)
        for e in range(self.cfg["n_routed_experts"]):
            rows, slot = (ids == e).nonzero(as_tuple=True)
            if rows.numel():
                out[rows] += weights[rows, slot, None] * self.mlp(x[rows], f"{m}experts.{e}.")
        return out + self.mlp(x, m + "shared_experts.")

    def forward(self, tokens):
        """Logits [len(tokens), vocab] for every position (causal, positions 0..n-1)."""
        c, w = self.cfg, self.w
        eps = c["rms_norm_eps"]
        self.routing, self.latents = {}, {}
        cos, sin = rope_tables(c, list(range(len(tokens))))
        x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            x = x + self.attention(i, rmsnorm(x, w[p + "input_layernorm.weight"], eps), cos, sin)
            h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], eps)
            x = x + (self.mlp(h, p + "mlp.") if i < c["first_k_dense_replace"] else self.moe(i, h))
        return self.linear(rmsnorm(x, w["model.norm.weight"], eps), "lm_head.weight")


# ---------------------------------------------------------------- self-checks

def absorbed_attention_check(model, tokens):
    """The absorbed form (attention in latent space) equals the simple form on layer 0."""
    c, w = model.cfg, model.w
    nh, nope, rope, vd, kvr = (c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                               c["v_head_dim"], c["kv_lora_rank"])
    model.forward(tokens)
    lat = model.latents[0]                                 # [s, kvr + rope]
    s = lat.shape[0]
    a = "model.layers.0.self_attn."
    x = rmsnorm(w["model.embed_tokens.weight"][torch.tensor(tokens)], w["model.layers.0.input_layernorm.weight"],
                c["rms_norm_eps"])
    if c["q_lora_rank"]:
        q = model.linear(rmsnorm(model.linear(x, a + "q_a_proj.weight"), w[a + "q_a_layernorm.weight"],
                                 c["rms_norm_eps"]), a + "q_b_proj.weight")
    else:
        q = model.linear(x, a + "q_proj.weight")
    q = q.view(s, nh, nope + rope)
    cos, sin = rope_tables(c, list(range(s)))
    q_pe = apply_rope_interleaved(q[..., nope:], cos, sin)
    kvb = w[a + "kv_b_proj.weight"].view(nh, nope + vd, kvr)
    q_lat = torch.einsum("shd,hdc->shc", q[..., :nope], kvb[:, :nope])
    k_pe = lat[:, kvr:]
    # k_pe in the latents is already in rotate-half order (HF); q_pe too.
    scores = (torch.einsum("qhc,kc->hqk", q_lat, lat[:, :kvr]) + torch.einsum("qhr,kr->hqk", q_pe, k_pe)) * softmax_scale(c)
    scores = scores.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool), 1), float("-inf"))
    o_lat = torch.einsum("hqk,kc->qhc", torch.softmax(scores, -1), lat[:, :kvr])
    o = torch.einsum("qhc,hvc->qhv", o_lat, kvb[:, nope:]).reshape(s, nh * vd)
    absorbed = model.linear(o, a + "o_proj.weight")
    simple = model.attention(0, x, cos, sin)
    return float((absorbed - simple).abs().max())


def routing_stats(model, tokens):
    """How often the correction bias and the group limit change the choice (non-trivial routing)."""
    c = model.cfg
    model.forward(tokens)
    bias_changed = group_changed = total = 0
    for i, (ids, scores, choice) in model.routing.items():
        K = c["num_experts_per_tok"]
        for t in range(ids.shape[0]):
            got = set(ids[t].tolist())
            bias_changed += got != set(scores[t].topk(K)[1].tolist())
            group_changed += got != set(choice[t].topk(K)[1].tolist())
            total += 1
    return bias_changed / total, group_changed / total


# ---------------------------------------------------------------- golden outputs

NUM_GREEDY = 12


def prompts_for(cfg, seed):
    """ref_io.PROMPTS (the shared text prompts, tokenized) plus one random 76-token prompt that
    runs past original_max_position_embeddings (64) and spans several KV pages."""
    rng = np.random.default_rng(seed)
    long_prompt = [cfg["bos_token_id"]] + rng.integers(3, cfg["vocab_size"], 75).tolist()
    return [ids for _, ids in ref_io.PROMPTS] + [long_prompt]


def generate(name, check):
    spec = dict(VARIANTS[name])
    seed = spec.pop("seed")
    cfg = base_config()
    cfg.update(spec)
    out = os.path.join(OUT_ROOT, name)
    ref_io.write_config(out, cfg)
    weights = make_weights(cfg, seed)
    ref_io.write_safetensors(os.path.join(out, "model.safetensors"), weights, {"format": "pt"})
    model = Model(cfg, weights)

    def logits_fn(ids):
        logits = model.forward(ids)
        return logits, {str(i): {"selected": torch.sort(ids_, dim=-1).values.tolist()}
                        for i, (ids_, _, _) in model.routing.items()}

    records = []
    for prompt in prompts_for(cfg, seed + 1):
        greedy, logits, margin, router = ref_io.greedy_golden(logits_fn, prompt, NUM_GREEDY)
        records.append({"prompt_ids": prompt, "greedy_ids": greedy, "min_margin": margin, "router": router,
                        "logits": logits})
        if check:
            print(f"{name}: prompt len {len(prompt)}, min greedy margin {margin:.4f}, logit std {float(logits.std()):.3f}")
    ref_io.write_golden(out, "deepseek_v3", records, {
        "seed": seed, "weights": "BF16 values, float64 compute (simple MLA form, no KV cache)",
        "prompts_text": [t for t, _ in ref_io.PROMPTS] + ["(random ids)"]})
    if check:
        toks = records[-1]["prompt_ids"] + records[-1]["greedy_ids"]
        print(f"{name}: absorbed vs simple attention max |diff| {absorbed_attention_check(model, toks):.3e}")
        b, g = routing_stats(model, toks)
        print(f"{name}: correction bias changes the choice for {b:.0%} of tokens, group limit for {g:.0%}")
        size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
        print(f"{name}: {size} bytes in {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="print margins, routing stats, absorbed-form check")
    ap.add_argument("--variant", choices=sorted(VARIANTS), help="only this variant")
    args = ap.parse_args()
    for name in VARIANTS:
        if args.variant in (None, name):
            generate(name, args.check)


if __name__ == "__main__":
    main()
