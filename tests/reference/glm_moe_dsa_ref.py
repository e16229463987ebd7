#!/usr/bin/python3
"""PyTorch reference for glm_moe_dsa (GLM-5: MLA + DeepSeek Sparse Attention).

Written from the published architecture description (the DeepSeek-V3.2 DSA design as the
Hugging Face GlmMoeDsa model describes it), not from densa's C++ code. The model is the
deepseek_v3 reference (deepseek_v3_ref.py: MLA in HF's simple form, the sigmoid-routed MoE)
plus, in every layer, a lightning indexer:

  q_resid = q_a_layernorm(q_a_proj(x))                       (MLA's own query latent)
  iq      = indexer.wq_b(q_resid)          [s, index_n_heads, index_head_dim]
  ik      = LayerNorm(indexer.wk(x); k_norm.weight, k_norm.bias, eps 1e-6)   [s, index_head_dim]
  RoPE on the first qk_rope_head_dim dims of iq (per head) and ik: interleaved pairs, the
  same frequencies as MLA's rope (indexer_rope_interleave true, as GLM-5)
  ik is cached as FP8 e4m3 with one float32 amax / 448 scale per token (round to nearest
  even, saturating), and scored from the decoded values
  w       = indexer.weights_proj(x) * index_n_heads^-0.5          [s, index_n_heads]
  score[t, p] = sum_h w[t, h] * relu(iq[t, h] . ik[p] * index_head_dim^-0.5),  p <= t
  each query t keeps the index_topk positions of highest score (all of 0..t when t + 1 <=
  index_topk) and MLA's causal attention is restricted to them.

The checkpoint is tiny (index_topk 8, so the prompts cross it), BF16, real tensor names
(model.layers.{i}.self_attn.indexer.{wq_b, wk, k_norm, weights_proj}). Outputs:
tests/data/reference/glm_moe_dsa/ with the same layout as deepseek_v3's (config.json,
model.safetensors, golden.json, prompt<i>.logits.f32.bin), plus per prompt the smallest gap
between the k-th and (k+1)-th index score over the queries past index_topk ("min_select_gap";
ties of exact zeros, where every head's relu is 0, go to the lower position and are skipped).

    /usr/bin/python3 tests/reference/glm_moe_dsa_ref.py [--check]
"""
import argparse
import math
import os

import numpy as np
import torch

import deepseek_v3_ref as dsv3
import ref_io

torch.set_default_dtype(torch.float64)

OUT = os.path.join(dsv3.OUT_ROOT, "glm_moe_dsa")
SEED = 20261203
NUM_GREEDY = 8


def config():
    c = dsv3.base_config()
    c.update({
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        "num_hidden_layers": 2,
        "first_k_dense_replace": 1,
        "index_topk": 8,
        "index_n_heads": 4,
        "index_head_dim": 16,
        "indexer_rope_interleave": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    })
    for k in ("rope_scaling", "rope_theta", "moe_layer_freq"):
        c.pop(k)
    return c


def compute_config(c):
    """The keys deepseek_v3_ref's functions read."""
    d = dict(c)
    d["rope_theta"] = c["rope_parameters"]["rope_theta"]
    d["rope_scaling"] = None
    return d


def make_weights(c, seed):
    w = {k: v.to(torch.float64) for k, v in dsv3.make_weights(compute_config(c), seed).items()}
    g = torch.Generator().manual_seed(seed + 7)
    H, qr = c["hidden_size"], c["q_lora_rank"]
    nh, dim = c["index_n_heads"], c["index_head_dim"]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}.self_attn.indexer."
        w[p + "wq_b.weight"] = torch.randn(nh * dim, qr, generator=g) * (2.0 / math.sqrt(qr))
        w[p + "wk.weight"] = torch.randn(dim, H, generator=g) * (1.0 / math.sqrt(H))
        w[p + "k_norm.weight"] = 1.0 + 0.2 * torch.randn(dim, generator=g)
        w[p + "k_norm.bias"] = 0.1 * torch.randn(dim, generator=g)
        w[p + "weights_proj.weight"] = torch.randn(nh, H, generator=g) * (2.0 / math.sqrt(H))
    return {k: v.to(torch.bfloat16) for k, v in w.items()}


def fp8_e4m3(x):
    """OCP e4m3fn encode-decode of float32 values: round to nearest even, saturate at 448."""
    a = np.abs(x).astype(np.float32)
    out = np.zeros_like(a)
    sub = a < np.float32(2.0 ** -6)
    out[sub] = np.round(a[sub] / np.float32(2.0 ** -9)) * np.float32(2.0 ** -9)
    _, e = np.frexp(a[~sub])
    step = np.ldexp(np.float32(1.0), (e - 1 - 3).astype(np.int32)).astype(np.float32)
    out[~sub] = np.round(a[~sub] / step) * step
    out = np.minimum(out, np.float32(448.0))
    return (np.sign(x) * out).astype(np.float32)


def fp8_cache(keys):
    """Per-token FP8 e4m3 with a float32 amax / 448 scale, decoded (what the cache returns)."""
    k = keys.numpy().astype(np.float32)
    out = np.zeros_like(k)
    for t in range(k.shape[0]):
        scale = np.float32(np.abs(k[t]).max()) / np.float32(448.0)
        if scale > 0:
            out[t] = fp8_e4m3((k[t] / scale).astype(np.float32)) * scale
    return torch.from_numpy(out.astype(np.float64))


def layernorm(x, w, b, eps=1e-6):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * w + b


class DsaModel(dsv3.Model):
    def __init__(self, cfg, weights):
        super().__init__(compute_config(cfg), weights)
        self.dsa = cfg
        self.select_gaps = []

    def select(self, i, x, cos, sin):
        """[s, s] bool: query t may attend to position p."""
        c, w = self.dsa, self.w
        eps = c["rms_norm_eps"]
        a = f"model.layers.{i}.self_attn."
        p = a + "indexer."
        s = x.shape[0]
        nh, dim, rope, topk = c["index_n_heads"], c["index_head_dim"], c["qk_rope_head_dim"], c["index_topk"]
        q_resid = dsv3.rmsnorm(self.linear(x, a + "q_a_proj.weight"), w[a + "q_a_layernorm.weight"], eps)
        iq = self.linear(q_resid, p + "wq_b.weight").view(s, nh, dim)
        ik = layernorm(self.linear(x, p + "wk.weight"), w[p + "k_norm.weight"], w[p + "k_norm.bias"])
        iq = torch.cat([dsv3.apply_rope_interleaved(iq[..., :rope], cos, sin), iq[..., rope:]], -1)
        ik = torch.cat([dsv3.apply_rope_interleaved(ik[:, None, :rope], cos, sin)[:, 0], ik[:, rope:]], -1)
        ik = fp8_cache(ik)
        weights = self.linear(x, p + "weights_proj.weight") * nh ** -0.5
        scores = torch.relu(torch.einsum("thd,pd->thp", iq, ik) * dim ** -0.5)
        index = torch.einsum("th,thp->tp", weights, scores)
        allowed = torch.zeros(s, s, dtype=torch.bool)
        for t in range(s):
            if t + 1 <= topk:
                allowed[t, : t + 1] = True
                continue
            row = index[t, : t + 1]
            order = sorted(range(t + 1), key=lambda q: (-float(row[q]), q))
            allowed[t, order[:topk]] = True
            # The k-th and (k+1)-th scores; both 0 (every head's relu 0) ties, broken to the
            # lower position, exactly representable on both sides, so not a margin.
            kth, nxt = float(row[order[topk - 1]]), float(row[order[topk]])
            if kth != 0.0:
                self.select_gaps.append(kth - nxt)
        return allowed

    def attention(self, i, x, cos, sin):
        allowed = self.select(i, x, cos, sin)
        self.mask = ~allowed  # read by the masked attention below
        return self.masked_attention(i, x, cos, sin)

    def masked_attention(self, i, x, cos, sin):
        """deepseek_v3_ref's simple-form MLA, with the DSA mask instead of the causal one."""
        c = self.cfg
        nh, nope, rope, vd = c["num_attention_heads"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
        kvr, eps = c["kv_lora_rank"], c["rms_norm_eps"]
        a = f"model.layers.{i}.self_attn."
        s = x.shape[0]
        w = self.w
        q = self.linear(dsv3.rmsnorm(self.linear(x, a + "q_a_proj.weight"), w[a + "q_a_layernorm.weight"], eps),
                        a + "q_b_proj.weight").view(s, nh, nope + rope)
        kv_a = self.linear(x, a + "kv_a_proj_with_mqa.weight")
        c_kv = dsv3.rmsnorm(kv_a[:, :kvr], w[a + "kv_a_layernorm.weight"], eps)
        kv = self.linear(c_kv, a + "kv_b_proj.weight").view(s, nh, nope + vd)
        q_pe = dsv3.apply_rope_interleaved(q[..., nope:], cos, sin)
        k_pe = dsv3.apply_rope_interleaved(kv_a[:, kvr:].view(s, 1, rope), cos, sin)
        query = torch.cat([q[..., :nope], q_pe], -1)
        key = torch.cat([kv[..., :nope], k_pe.expand(s, nh, rope)], -1)
        scores = torch.einsum("qhd,khd->hqk", query, key) * dsv3.softmax_scale(c)
        scores = scores.masked_fill(self.mask, float("-inf"))
        out = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), kv[..., nope:]).reshape(s, nh * vd)
        return self.linear(out, a + "o_proj.weight")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    cfg = config()
    ref_io.write_config(OUT, cfg)
    weights = make_weights(cfg, SEED)
    ref_io.write_safetensors(os.path.join(OUT, "model.safetensors"), weights, {"format": "pt"})
    model = DsaModel(cfg, weights)

    def logits_fn(ids):
        model.select_gaps = []
        return model.forward(ids), {}

    rng = np.random.default_rng(SEED + 1)
    prompts = [ids for _, ids in ref_io.PROMPTS]
    prompts.append([cfg["bos_token_id"]] + rng.integers(3, cfg["vocab_size"], 39).tolist())
    records = []
    for prompt in prompts:
        greedy, logits, margin, _ = ref_io.greedy_golden(logits_fn, prompt, NUM_GREEDY)
        gap = min(model.select_gaps) if model.select_gaps else None  # the last (full) call's queries
        records.append({"prompt_ids": prompt, "greedy_ids": greedy, "min_margin": margin, "logits": logits,
                        "min_select_gap": gap})
        if args.check:
            print(f"prompt len {len(prompt)}: greedy margin {margin:.4f}, min selection gap {gap}")
    ref_io.write_golden(OUT, "glm_moe_dsa", records, {
        "seed": SEED, "weights": "BF16 values, float64 compute; indexer keys FP8 e4m3 per token",
        "prompts_text": [t for t, _ in ref_io.PROMPTS] + ["(random ids)"]})


if __name__ == "__main__":
    main()
