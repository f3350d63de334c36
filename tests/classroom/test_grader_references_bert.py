"""Instructor-only checks of minbert/bert against written-out references: each attention path on its own, and
BertModel.encode's wiring of layer_extra. They write out what assignments 2 (attention) and 3 (encode) ask for,
so the student copy leaves this file out; tests/bert/ keeps the property and stored-case checks.

Written for survivors of bench/mutation.py: the fast path was only compared with the explicit one in eval mode
(a fast path that ignored fast_attention=True, or dropped no probabilities in training, passed), and nothing
checked which arguments encode hands layer_extra.
Oracles: (a) Vaswani et al. 2017 (arXiv:1706.03762) Eq. 1, softmax(Q Kᵀ/√D + M) V per head, with einsums
(minbert/classroom/references.py); (b) torch's scaled_dot_product_attention with dropout_p, which on the CPU
draws torch's dropout mask on the probabilities.
Shapes: B batch, T tokens, C hidden, H heads, D head dim (attention.py's letters).
Run: python -m pytest -q tests/classroom/test_grader_references_bert.py   (offline, CPU, ~2 s)
"""

import torch
import torch.nn.functional as F

from minbert.bert.attention import SelfAttention, extended_attention_mask
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.classroom.references import einsum_attention

ATOL, RTOL = 1e-5, 1e-5


def attention_and_batch(fast, p=0.0):
    """A SelfAttention (fast or written-out) on BertConfig.tiny(), and a (B, T, C) = (3, 8, 32) batch with pads."""
    torch.manual_seed(0)
    attn = SelfAttention(BertConfig.tiny(fast_attention=fast, attention_probs_dropout_prob=p)).eval()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 8, 32, generator=g)
    am = torch.ones(3, 8, dtype=torch.long)
    am[1, 5:] = 0
    am[2, 2:] = 0
    return attn, x, am


def test_each_attention_path_matches_the_equation_in_eval_mode():
    for fast in (False, True):
        attn, x, am = attention_and_batch(fast)
        with torch.no_grad():
            got = attn(x, extended_attention_mask(am, x.dtype))
            want = einsum_attention(attn, x, am, additive=True)
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL, msg=lambda m:
            f"minbert.bert.attention.SelfAttention.forward (fast_attention={fast}) differs from "
            f"softmax(Q Kᵀ/√D + M) V:\n{m}")


def test_fast_path_in_training_is_sdpa_with_dropout_on_the_probabilities():
    """The same seed gives softmax(...) -> F.dropout(p) -> @ V, torch's own mask. A fast path that drops
    nothing, or ignores fast_attention=True (the written-out path draws minbert's mask, another one), differs;
    in eval mode nothing is dropped."""
    p = 0.3
    attn, x, am = attention_and_batch(fast=True, p=p)
    attn.train()
    mask = extended_attention_mask(am, x.dtype)                                   # (B, 1, 1, T)
    B, T, C = x.shape
    H = attn.num_heads
    heads = lambda lin: lin(x).view(B, T, H, C // H).transpose(1, 2)             # (B, T, C) -> (B, H, T, D)
    with torch.no_grad():
        q, k, v = heads(attn.query), heads(attn.key), heads(attn.value)
        probs = torch.softmax(q @ k.transpose(-2, -1) / (C // H) ** 0.5 + mask, dim=-1)   # (B, H, T, T)
        torch.manual_seed(5)
        want = (F.dropout(probs, p) @ v).transpose(1, 2).reshape(B, T, C)         # (B, T, C)
        torch.manual_seed(5)
        got = attn(x, mask)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL, msg=lambda m:
        f"minbert.bert.attention.SelfAttention.forward (fast_attention=True, train, p={p}): expected "
        f"scaled_dot_product_attention's dropout_p={p} on the probabilities (torch's mask for this seed):\n{m}")
    attn.eval()
    with torch.no_grad():
        torch.testing.assert_close(attn(x, mask), einsum_attention(attn, x, am, additive=True), atol=ATOL, rtol=RTOL,
                                   msg=lambda m: f"SelfAttention.forward (fast_attention=True, eval): no dropout:\n{m}")


def test_encode_gives_each_layer_its_input_the_mask_and_layer_extra_s_term():
    """encode's docstring: layer_extra(i, h, mask) is called with layer i's input h (B, T, C) and the additive
    (B, 1, 1, T) mask, and its term goes into that layer as `extra`. Reference: the layers composed by hand,
    the mask written out as (1 - attention_mask) * -10000."""
    torch.manual_seed(0)
    model = BertModel(BertConfig.tiny()).eval()
    g = torch.Generator().manual_seed(1)
    B, T, C = 2, 5, model.config.hidden_size
    x = torch.randn(B, T, C, generator=g)
    am = torch.ones(B, T, dtype=torch.long)
    am[1, 3:] = 0
    terms = [torch.randn(B, T, C, generator=g) for _ in model.layers]
    calls = []

    def layer_extra(i, h, mask):
        calls.append((i, h.clone(), mask.clone()))
        return terms[i]

    with torch.no_grad():
        got = model.encode(x, am, layer_extra=layer_extra)
        mask = (1.0 - am[:, None, None, :].float()) * -10000.0                   # (B, 1, 1, T)
        h = x
        for i, layer in enumerate(model.layers):
            assert i < len(calls), \
                f"minbert.bert.model.BertModel.encode: layer_extra was called {len(calls)} times for {len(model.layers)} layers"
            j, seen_h, seen_mask = calls[i]
            assert j == i and torch.equal(seen_h, h) and torch.equal(seen_mask, mask), \
                (f"minbert.bert.model.BertModel.encode: call {i} of layer_extra got (i={j}, h, mask) that are not "
                 f"(layer index, that layer's input, the additive mask)")
            h = layer(h, mask, terms[i])
    assert len(calls) == len(model.layers), f"minbert.bert.model.BertModel.encode: layer_extra called {len(calls)} times"
    torch.testing.assert_close(got["last_hidden_state"], h, atol=1e-6, rtol=1e-6, msg=lambda m:
        f"minbert.bert.model.BertModel.encode: the layer_extra terms must go into each layer as `extra`:\n{m}")


def test_explicit_path_drops_probabilities_in_the_compute_dtype_under_autocast(monkeypatch):
    """The reference solution's step 3: the softmax runs in fp32 under autocast, and its probabilities go back
    to V's dtype (bf16) before the dropout and the last matmul, which then move half the bytes. Only bf16
    rounding shows it in the output, so a spy on the dropout reads the dtype. (Not in tests/bert/: the
    assignment does not ask students for this cast.)"""
    import minbert.bert.attention as A
    seen = []
    real = A.dropout
    monkeypatch.setattr(A, "dropout", lambda x, p, training: seen.append(x.dtype) or real(x, p, training))
    attn, x, am = attention_and_batch(fast=False, p=0.1)
    attn.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        attn(x, extended_attention_mask(am, x.dtype))
    assert seen == [torch.bfloat16], (f"minbert.bert.attention.SelfAttention.forward under bf16 autocast: the "
                                      f"probabilities reach the dropout as {seen}, expected [torch.bfloat16] (.to(v.dtype))")
