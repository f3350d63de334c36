"""Independent references for the graded functions: instructor-only (never in the student copy).

Each is written from the paper's equation with torch.nn.functional, sharing no code with the graded module. They
serve the grader's hints and the instructor's tests (tests/classroom/test_grader_references_*.py).
"""

import math

import torch
import torch.nn.functional as F


def einsum_attention_from_weights(state, H, x, am, softmax_dim=-1, scale=True, mask=True, mask_sign=1, prefix="",
                                  infinite=False):
    """softmax(Q Kᵀ/√D + M) V per head with einsums, from a SelfAttention state dict: M the additive mask (-10000 at
    padding), or masked_fill(-inf) when `infinite`; the other keyword arguments build the usual mistakes
    (mask_sign=-1 subtracts the additive mask)."""
    D = state[prefix + "query.weight"].shape[0] // H

    def heads(name):
        return (x @ state[prefix + name + ".weight"].T + state[prefix + name + ".bias"]).unflatten(-1, (H, D))
    q, k, v = heads("query"), heads("key"), heads("value")                           # (B, T, H, D)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / (math.sqrt(D) if scale else 1.0)     # (B, H, T, T)
    if mask and infinite:
        s = s.masked_fill(am[:, None, None, :] == 0, float("-inf"))
    elif mask:
        s = s + mask_sign * (am[:, None, None, :] == 0) * -10000.0
    y = torch.einsum("bhqk,bkhd->bqhd", s.softmax(softmax_dim), v)                  # (B, T, H, D)
    return y.flatten(-2)                                                              # (B, T, C)


def einsum_attention(attn, x, am, additive=False, **mistakes):
    """The same on a SelfAttention module's own weights: masked_fill(-inf), or the code's additive mask."""
    return einsum_attention_from_weights(attn.state_dict(), attn.num_heads, x, am, infinite=not additive, **mistakes)


def written_out_layer(layer, h, mask, act=F.gelu, residual=True, extra=None):
    """The post-LN layer with torch.nn.functional, from the layer's own weights (dropout off)."""
    ln = lambda x, m: F.layer_norm(x, (x.shape[-1],), m.weight, m.bias, m.eps)
    attn = layer.attention_dense(layer.self_attention(h, mask))                 # (B, T, C)
    a = ln(h + attn if residual else attn, layer.attention_layer_norm)
    f = layer.out_dense(act(layer.interm_dense(a)))                             # (B, T, C)
    r = (a + f if residual else f) + (0 if extra is None else extra)
    return ln(r, layer.out_layer_norm)


def reference_ts(pals, task, i, h, am):
    """TS(h) = GELU(V_D · MHA(V_E · h)): per-head einsums, masked_fill(-inf)."""
    V_E, V_D = pals.V_E[task], pals.V_D[task]
    y = einsum_attention(pals.attention[task][i], h @ V_E.weight.T + V_E.bias, am)   # (B, T, S)
    return F.gelu(y @ V_D.weight.T + V_D.bias)                                     # (B, T, C)


def pcgrad_on_vectors(g, orders):
    """Algorithm 1 of Yu et al. 2020 written directly on the (K, P) vectors."""
    out = []
    for i in range(len(g)):
        gi = g[i].clone()
        for j in orders[i]:
            if gi @ g[j] < 0:
                gi = gi - (gi @ g[j]) / (g[j] @ g[j]) * g[j]
        out.append(gi)
    return torch.stack(out)


def gradvac_on_vectors(g, orders, targets, beta):
    """GradVac (Wang et al. 2021, Algorithm 1) on the vectors; returns (g' (K, P), updated targets)."""
    targets, out = targets.clone(), []
    for i in range(len(g)):
        gi = g[i].clone()
        for j in orders[i]:
            ni, nj = gi.norm().item(), g[j].norm().item()
            phi, t = (gi @ g[j]).item() / (ni * nj), targets[i, j].item()
            if phi < t:
                step = ni * (t * math.sqrt(1 - phi**2) - phi * math.sqrt(1 - t**2)) / (nj * math.sqrt(1 - t**2))
                gi = gi + step * g[j]
            targets[i, j] = (1 - beta) * t + beta * phi
        out.append(gi)
    return torch.stack(out), targets


def smart_expected_step(divergence, model, task, batch, x, clean, delta0, eta, epsilon):
    """δ_1 = clamp(δ_0 + η·g/‖g_i‖∞, −ε, ε) with g = ∂ℓ_s/∂δ at δ_0."""
    d = delta0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(divergence(task, model(task, batch, embeds=x + d), clean), d)
    return (delta0 + eta * g / g.abs().amax(dim=(1, 2), keepdim=True)).clamp(-epsilon, epsilon)


def brute_force_mv(weight, active):
    """Eq. 4 written as loops: Σ_k Σ_{r<s} |f_k^r · f_k^s| β_r β_s, with f_k^r = weight[r, k] (D,)."""
    M, K, _ = weight.shape
    total = 0.0
    for k in range(K):
        for r in range(M):
            for s in range(r + 1, M):
                total += abs(float(weight[r, k] @ weight[s, k])) * float(active[r]) * float(active[s])
    return torch.tensor(total)
