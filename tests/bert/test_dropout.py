"""Grades minbert.bert.dropout.dropout (inverted dropout with a 16-bit mask).

Oracles: (c) properties — keep rate within 4σ of 1 − p, kept values scaled by exactly
1/(1 − p_used), gradient = mask/(1 − p_used), identity in eval and for p = 0, reproducible
under a seed, expectation preserved; (b) live — same statistics as torch's F.dropout.
"""

import math

import pytest
import torch

from minbert.bert.dropout import LEVELS, Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keep_rate_and_scale(p):
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = dropout(x, p)
    kept = y != 0
    rate = kept.float().mean().item()
    sigma = math.sqrt(p * (1 - p) / x.numel())
    assert abs(rate - (1 - p)) < 4 * sigma + 1 / LEVELS, f"minbert.bert.dropout.dropout: keep rate {rate:.4f}, expected {1 - p} ± {4 * sigma:.4f}"
    p_used = round(p * LEVELS) / LEVELS
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p_used)), atol=0, rtol=1e-6,
                               msg=lambda m: f"minbert.bert.dropout.dropout: kept values must be x/(1-p):\n{m}")


def test_mask_is_not_correlated_across_lanes():
    """Each 64-bit draw feeds four neighbouring elements: their keep decisions must be independent."""
    torch.manual_seed(1)
    keep = dropout(torch.ones(400_000), 0.5) != 0
    k = keep.view(-1, 4).float()
    both = (k[:, 0] * k[:, 1]).mean().item()
    assert abs(both - 0.25) < 0.01, f"minbert.bert.dropout.dropout: neighbours kept together with rate {both:.3f}, expected 0.25"


def test_gradient_is_mask_over_keep_probability():
    torch.manual_seed(2)
    x = torch.randn(1000, requires_grad=True)
    y = dropout(x, 0.2)
    y.sum().backward()
    expected = (y != 0).float() * (LEVELS / (LEVELS - round(0.2 * LEVELS)))
    torch.testing.assert_close(x.grad, expected, atol=0, rtol=1e-6,
                               msg=lambda m: f"minbert.bert.dropout._MaskedScale.backward: grad must be mask/(1-p):\n{m}")


def test_identity_in_eval_and_for_p0_and_works_in_bf16():
    x = torch.randn(64)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    m = Dropout(0.5).eval()
    assert torch.equal(m(x), x), "minbert.bert.dropout.Dropout: eval mode must be the identity"
    y = dropout(x.bfloat16(), 0.5)
    assert y.dtype == torch.bfloat16, f"minbert.bert.dropout.dropout: dtype changed to {y.dtype}"


def test_seeded_masks_reproduce_and_differ_between_calls():
    torch.manual_seed(3)
    a, b = dropout(torch.ones(100), 0.5), dropout(torch.ones(100), 0.5)
    torch.manual_seed(3)
    assert torch.equal(a, dropout(torch.ones(100), 0.5)), "minbert.bert.dropout.dropout must follow torch.manual_seed"
    assert not torch.equal(a, b), "minbert.bert.dropout.dropout: two calls drew the same mask"


def test_expectation_matches_torch_dropout():
    """Live oracle: the mean over many draws equals F.dropout's (both are unbiased)."""
    torch.manual_seed(4)
    x = torch.randn(2000)
    ours = torch.stack([dropout(x, 0.1) for _ in range(400)]).mean(0)
    theirs = torch.stack([torch.nn.functional.dropout(x, 0.1) for _ in range(400)]).mean(0)
    # per-element std of the mean ≈ |x|·sqrt(p/(1-p)/400) ≈ 0.017|x|; compare both to x.
    for name, m in (("minbert", ours), ("torch", theirs)):
        err = ((m - x).abs() / (x.abs() + 1e-3)).mean().item()
        assert err < 0.03, f"{name} dropout mean deviates from x by {err:.3f} (relative)"


# ---------------------------------------------------------------------------- where dropout sits in the model
# BERT (Devlin et al. 2019, and the reference code's modeling.py) drops out at five sites in training:
# the embedding output (after LayerNorm), the attention probabilities, the attention output after its
# projection (before the residual add), the feed-forward output (before the residual add), and the
# pooled vector before each task head. Each site gets its own rate below, so a dropout applied with
# the wrong rate, at the wrong place or on the wrong tensor shows up by rate and shape, and one
# applied around the right tensor but at the wrong point shows up in the numbers.
HIDDEN_P, ATTENTION_P, HEAD_P = 0.2, 0.3, 0.4


class MaskRecorder:
    """Stands in for minbert.bert.dropout.dropout and torch's F.dropout: draws its own Bernoulli(1 − p) keep
    mask from a seeded generator, records (p, shape, mask) in call order and returns x·mask/(1 − p)."""

    def __init__(self):
        self.calls, self.g = [], torch.Generator().manual_seed(0)

    def __call__(self, x, p, training=True, inplace=False):
        if not training or p == 0.0:
            return x
        keep = torch.rand(x.shape, generator=self.g) >= p
        self.calls.append((p, tuple(x.shape), keep))
        return x * keep / (1 - p)


def written_out_forward(model, batch, masks):
    """The BERT forward of the sst task written out from the model's weights, applying `masks` (the
    recorded (p, shape, mask) list) at the five sites in order. Returns (B, 5) logits."""
    import torch.nn.functional as F
    enc, calls = model.encoder, iter(masks)

    def drop(x, site, p):
        got = next(calls, None)
        assert got is not None, f"no dropout call left for {site}: expected dropout(p={p}) on {tuple(x.shape)} there"
        assert (got[0], got[1]) == (p, tuple(x.shape)), (
            f"{site}: expected dropout with p={p} on a {tuple(x.shape)} tensor; the model's next dropout call had "
            f"p={got[0]} on {got[1]} (a missing, extra or misplaced dropout)")
        return x * got[2] / (1 - p)

    ids, am, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    B, T = ids.shape
    E, C = enc.embeddings, enc.config.hidden_size
    H, eps = enc.config.num_attention_heads, enc.config.layer_norm_eps
    x = E.word_embedding.weight[ids] + E.pos_embedding.weight[:T] + E.tk_type_embedding.weight[types]
    h = F.layer_norm(x, (C,), E.layer_norm.weight, E.layer_norm.bias, eps)                              # (B, T, C)
    h = drop(h, "embeddings (after LayerNorm)", HIDDEN_P)
    additive = (1.0 - am[:, None, None, :].float()) * -10000.0                        # (B, 1, 1, T)
    for i, L in enumerate(enc.layers):
        A = L.self_attention
        q, k, v = (lin(h).view(B, T, H, C // H).transpose(1, 2) for lin in (A.query, A.key, A.value))   # (B, H, T, D)
        probs = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C // H) + additive, dim=-1)          # (B, H, T, T)
        probs = drop(probs, f"layer {i}: attention probabilities (after softmax, before · V)", ATTENTION_P)
        attn = L.attention_dense((probs @ v).transpose(1, 2).reshape(B, T, C))                           # (B, T, C)
        attn = drop(attn, f"layer {i}: attention output (after attention_dense, before + h)", HIDDEN_P)
        a = F.layer_norm(h + attn, (C,), L.attention_layer_norm.weight, L.attention_layer_norm.bias, eps)
        f = L.out_dense(F.gelu(L.interm_dense(a)))                                                       # (B, T, C)
        f = drop(f, f"layer {i}: feed-forward output (after out_dense, before + a)", HIDDEN_P)
        h = F.layer_norm(a + f, (C,), L.out_layer_norm.weight, L.out_layer_norm.bias, eps)
    pooled = torch.tanh(enc.pooler.dense(h[:, 0]))                                                       # (B, C)
    pooled = drop(pooled, "sst head (before its Linear)", HEAD_P)
    logits = model.heads["sst"][-1](pooled)                                                              # (B, 5)
    left = list(calls)
    assert not left, \
        f"the model made {len(left)} dropout call(s) beyond BERT's five sites: {[(p, s) for p, s, _ in left]}"
    return logits


def test_dropout_in_train_mode_sits_at_each_of_berts_sites(monkeypatch):
    """Oracle: the written-out BERT forward with the same masks. A recorder replaces both dropout
    functions, so the model's masks are known and the reference applies them where BERT puts them."""
    from conftest import make_batch, tiny_multitask
    from minbert.bert import attention, dropout as dropout_module
    model = tiny_multitask(config=dict(hidden_dropout_prob=HIDDEN_P, attention_probs_dropout_prob=ATTENTION_P),
                           dropout=HEAD_P).train()
    batch = make_batch("sst")
    rec = MaskRecorder()
    monkeypatch.setattr(dropout_module, "dropout", rec)          # minbert.bert.dropout.Dropout (embeddings, layers)
    monkeypatch.setattr(attention, "dropout", rec)               # the attention probabilities
    monkeypatch.setattr(torch.nn.functional, "dropout", rec)     # nn.Dropout in the task heads
    got = model("sst", batch)
    masks = list(rec.calls)
    with torch.no_grad():
        want = written_out_forward(model, batch, masks)
    L = model.encoder.config.num_hidden_layers
    assert len(masks) == 1 + 3 * L + 1, \
        f"expected {1 + 3 * L + 1} dropout calls (embeddings, 3 per layer, head), got {len(masks)}"
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=lambda m: (
        "minbert.bert.layers / minbert.bert.attention: the train-mode forward differs from BERT's with the same dropout masks: "
        f"a dropout is applied at the right rate and shape but at the wrong point (e.g. after the residual add)\n{m}"))
    assert all(k.float().mean() < 1 for _, _, k in masks), "the recorder must drop something at every site"
