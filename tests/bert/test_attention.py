"""Grades minbert.bert.attention.SelfAttention (and the mask convention).

Oracles: (b) live — torch's scaled_dot_product_attention (the instructor's written-out reference
is in tests/classroom/test_grader_references_attention.py, not in the student copy); (c) properties — padding is inert, shapes.
Shape letters as in attention.py: B batch, T tokens, C hidden, H heads, D head dim.
"""

import torch

from minbert.bert.attention import SelfAttention, extended_attention_mask
from minbert.bert.config import BertConfig

ATOL, RTOL = 1e-5, 1e-5


def make(fast=False, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = BertConfig.tiny(fast_attention=fast, **kw)
    return SelfAttention(cfg).eval(), cfg


def batch(cfg, B=3, T=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, cfg.hidden_size, generator=g)
    am = torch.ones(B, T, dtype=torch.long)
    am[1, 5:] = 0   # second sentence has 3 pads
    am[2, 2:] = 0   # third sentence has 6 pads
    return x, am


def test_mask_is_additive_B11T_with_minus_10000_on_pads():
    am = torch.tensor([[1, 1, 0]])
    m = extended_attention_mask(am, torch.float32)
    assert m.shape == (1, 1, 1, 3), f"minbert.bert.attention.extended_attention_mask: expected (B, 1, 1, T) = (1, 1, 1, 3), got {tuple(m.shape)}"
    assert m.tolist() == [[[[0.0, 0.0, -10000.0]]]], f"minbert.bert.attention.extended_attention_mask: got {m.tolist()}"


def test_attention_output_shape_is_B_T_C():
    attn, cfg = make()
    x, am = batch(cfg)
    y = attn(x, extended_attention_mask(am, x.dtype))
    assert y.shape == x.shape, f"minbert.bert.attention.SelfAttention.forward: expected (B, T, C) = {tuple(x.shape)}, got {tuple(y.shape)}"


def test_fast_attention_matches_explicit():
    """Live oracle: F.scaled_dot_product_attention (fast path) vs the written-out path, same weights."""
    explicit, cfg = make(fast=False)
    fast, _ = make(fast=True)
    fast.load_state_dict(explicit.state_dict())
    x, am = batch(cfg)
    mask = extended_attention_mask(am, x.dtype)
    with torch.no_grad():
        torch.testing.assert_close(fast(x, mask), explicit(x, mask), atol=ATOL, rtol=RTOL,
                                   msg=lambda m: f"minbert.bert.attention.SelfAttention.forward: fast and explicit paths disagree:\n{m}")


def test_attention_ignores_padded_keys():
    """Property: changing the vectors at padded positions changes nothing at real positions."""
    attn, cfg = make()
    x, am = batch(cfg)
    x2 = x.clone()
    x2[am == 0] = torch.randn(int((am == 0).sum()), cfg.hidden_size) * 10
    mask = extended_attention_mask(am, x.dtype)
    with torch.no_grad():
        y, y2 = attn(x, mask), attn(x2, mask)
    real = am.bool()
    diff = (y - y2)[real].abs().max().item()
    assert diff < ATOL, f"minbert.bert.attention.SelfAttention.forward: changing padded tokens changed real positions (max |Δ| = {diff:.2e}, tol {ATOL}): is the mask added before the softmax?"


def test_attention_dropout_only_in_training():
    attn, cfg = make(attention_probs_dropout_prob=0.5)
    x, am = batch(cfg)
    mask = extended_attention_mask(am, x.dtype)
    with torch.no_grad():
        e1, e2 = attn(x, mask), attn(x, mask)
        attn.train()
        t1, t2 = attn(x, mask), attn(x, mask)
    assert torch.equal(e1, e2), "minbert.bert.attention.SelfAttention.forward: eval mode must be deterministic (no dropout)"
    assert not torch.equal(t1, t2), "minbert.bert.attention.SelfAttention.forward: train mode must drop attention probabilities"


# ---------------------------------------------------------------------- the given code's dtypes
# Written for survivors of bench/mutation.py. Each path against the equation on its own (eval and, for the fast
# path, training) is instructor-only: tests/classroom/test_grader_references_bert.py.

def test_mask_comes_in_the_dtype_asked_for():
    """The mask is added to scores of the compute dtype: extended_attention_mask(am, dtype) returns `dtype`."""
    am = torch.tensor([[1, 1, 0]])
    for dtype in (torch.float64, torch.bfloat16, torch.float16):
        m = extended_attention_mask(am, dtype)
        assert m.dtype == dtype, f"minbert.bert.attention.extended_attention_mask(am, {dtype}): got {m.dtype}"
        want = torch.tensor([0.0, 0.0, -10000.0]).to(dtype).view(1, 1, 1, 3)   # -10000 rounds to -9984 in bf16
        assert torch.equal(m, want), f"minbert.bert.attention.extended_attention_mask(am, {dtype}): got {m.tolist()}"


def test_fast_path_hands_sdpa_the_mask_in_q_dtype_under_autocast(monkeypatch):
    """Under autocast q is bf16 while the model's mask is fp32 (built from the fp32 LayerNorm output).
    The fast path casts the mask to q's dtype whatever the caller passed: on CUDA (an H100, torch 2.11),
    bf16 q, k, v with an fp32 mask, called outside autocast, went to cuDNN attention and a padded sentence's
    output was off by 1.4 (with a bf16 mask, or under autocast, it was right), and the memory-efficient
    kernel refuses the pair. On the CPU both dtypes give the same numbers, so a spy on the call is what
    can see the cast here."""
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, k, v, attn_mask, **kw: seen.append((q.dtype, attn_mask.dtype)) or real(q, k, v, attn_mask, **kw))
    attn, cfg = make(fast=True)
    x, am = batch(cfg)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        attn(x, extended_attention_mask(am, x.dtype))
    assert seen == [(torch.bfloat16, torch.bfloat16)], \
        (f"minbert.bert.attention.SelfAttention.forward (fast, bf16 autocast): (q, mask) dtypes given to "
         f"scaled_dot_product_attention were {seen}; the mask must be cast to q's dtype")
