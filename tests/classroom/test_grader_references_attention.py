"""Instructor-only reference checks moved out of tests/bert/test_attention.py: they compare the graded function with an
independent written-out reference (minbert/classroom/references.py). The student copy leaves this file out;
tests/bert/test_attention.py keeps its property and stored-case checks.
"""

import torch

from test_attention import ATOL, RTOL, batch, extended_attention_mask, make

from minbert.classroom.references import einsum_attention


def mistake_hint(got, attn, x, am):
    """Name the usual mistake whose output equals `got`, else ''."""
    mistakes = [("attention probabilities do not sum to 1 over the keys: softmax over the last dimension?",
                 dict(softmax_dim=-2)),
                ("scores are not scaled: divide Q Kᵀ by √D (D = head dim)", dict(scale=False)),
                ("padded keys get probability: is the mask added before the softmax?", dict(mask=False))]
    for text, kw in mistakes:
        if (got - einsum_attention(attn, x, am, additive=True, **kw)).abs().max() <= ATOL:
            return f" (hint: {text})"
    return ""


def test_explicit_attention_matches_einsum_reference():
    """Live oracle: an independent einsum implementation with the same weights."""
    attn, cfg = make()
    x, am = batch(cfg)
    with torch.no_grad():
        ours = attn(x, extended_attention_mask(am, x.dtype))
        ref = einsum_attention(attn, x, am)
        hint = mistake_hint(ours, attn, x, am) if ours.shape == ref.shape else ""
    torch.testing.assert_close(ours, ref, atol=ATOL, rtol=RTOL,
                               msg=lambda m: f"minbert.bert.attention.SelfAttention.forward (explicit path) differs from softmax(QKᵀ/√D + mask)V{hint}:\n{m}")
