"""Building blocks shared by the PyTorch reference models (fp32, no KV cache), written from
the published architecture descriptions. Shapes: x [T, hidden]; weights in PyTorch [out, in]."""
import torch


def rmsnorm(x, w, eps):
    """w * x / sqrt(mean(x^2) + eps) over the last dim, fp32."""
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope_rotate_half(x, positions, theta, rotary_dim=None):
    """Rotate-half (NeoX / HF) RoPE on the first rotary_dim dims of each head of x [T, heads,
    head_dim]; the rest passes through (partial rotary). Frequencies theta^(-2i/rotary_dim)."""
    head_dim = x.shape[-1]
    rot = head_dim if rotary_dim is None else rotary_dim
    half = rot // 2
    inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.float64) / rot))
    ang = positions.to(torch.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos = torch.cos(ang).to(torch.float32)[:, None, :]
    sin = torch.sin(ang).to(torch.float32)[:, None, :]
    a, b, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin, rest], dim=-1)


def causal_gqa_attention(q, k, v, scale):
    """q [T, Hq, D], k/v [T, Hkv, D]; query head h reads KV head h // (Hq / Hkv)."""
    T, Hq, _ = q.shape
    group = Hq // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) * scale
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.einsum("hts,shd->thd", p, v)


def swiglu(x, gate_w, up_w, down_w):
    return (torch.nn.functional.silu(x @ gate_w.T) * (x @ up_w.T)) @ down_w.T


def route_softmax_topk(logits, top_k, norm_topk_prob):
    """Mixtral / Qwen MoE: softmax over all experts (fp32), top-k, optionally renormalised."""
    p = torch.softmax(logits.float(), dim=-1)
    w, idx = torch.topk(p, top_k, dim=-1)
    if norm_topk_prob:
        w = w / w.sum(-1, keepdim=True)
    return idx, w


def route_sigmoid_grouped(logits, bias, top_k, n_group, topk_group, norm_topk_prob, scaling):
    """DeepSeek-V3 / GLM-4.5 (noaux_tc): sigmoid scores; selection uses score + correction bias,
    restricted to the topk_group groups with the largest sum of their two best biased scores
    (experts outside them get 0.0); weights are the unbiased scores of the chosen experts,
    optionally renormalised (+1e-20), times routed_scaling_factor."""
    s = torch.sigmoid(logits.float())
    choice = s + bias[None, :]
    T, E = choice.shape
    group_scores = choice.view(T, n_group, E // n_group).topk(2, dim=-1).values.sum(-1)
    group_idx = torch.topk(group_scores, topk_group, dim=-1).indices
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1.0)
    score_mask = group_mask[:, :, None].expand(T, n_group, E // n_group).reshape(T, E)
    masked = choice.masked_fill(score_mask == 0, 0.0)
    idx = torch.topk(masked, top_k, dim=-1).indices
    w = s.gather(1, idx)
    if norm_topk_prob:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * scaling


def moe_experts(x, idx, w, experts):
    """Sum over each token's chosen experts of weight * expert(x). experts: list of
    (gate_w, up_w, down_w)."""
    out = torch.zeros_like(x)
    for e, (g, u, d) in enumerate(experts):
        rows, slot = torch.where(idx == e)
        if rows.numel() == 0:
            continue
        out.index_add_(0, rows, w[rows, slot][:, None] * swiglu(x[rows], g, u, d))
    return out
