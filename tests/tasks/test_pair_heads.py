"""Tests for minbert/tasks/pair_heads.py: CosineHead, DotHead, ConcatHead, SiameseHead (bi-encoder heads on
u, v (B, C)) and TanhScaledHead (Benton's bounded cross-encoder STS head).

Run: python -m pytest -q tests/tasks/test_pair_heads.py   (offline, CPU, about a second)
"""

import math

import pytest
import torch

from minbert.tasks.pair_heads import ConcatHead, CosineHead, DotHead, SiameseHead, TanhScaledHead

B, C = 4, 8


def make_uv(seed=0, B=B, C=C):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, C, generator=g), torch.randn(B, C, generator=g)


def make_siamese(out=1, seed=0):
    torch.manual_seed(seed)
    return SiameseHead(C, out, dropout=0.1).eval()   # eval: dropout off, outputs deterministic


# ---------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("head", [CosineHead((0.0, 5.0)), CosineHead(None)], ids=["sts", "para"])
def test_cosine_head_returns_B_by_1(head):
    """Oracle: property. (B, C), (B, C) -> (B, 1), like the cross-encoder heads of minbert.tasks.multitask."""
    u, v = make_uv()
    out = head(u, v)
    assert out.shape == (B, 1), f"minbert.tasks.pair_heads.CosineHead.forward: expected (B, 1) = ({B}, 1), got {tuple(out.shape)}"


@pytest.mark.parametrize("out", [1, 5])
def test_siamese_head_returns_B_by_out(out):
    """Oracle: property. (B, C), (B, C) -> (B, 4C) features -> (B, out)."""
    u, v = make_uv()
    head = make_siamese(out)
    assert head.features(u, v).shape == (B, 4 * C), "minbert.tasks.pair_heads.SiameseHead.features: expected (B, 4C)"
    y = head(u, v)
    assert y.shape == (B, out), f"minbert.tasks.pair_heads.SiameseHead.forward: expected (B, out) = ({B}, {out}), got {tuple(y.shape)}"


def test_siamese_mlp_is_linear_gelu_dropout_linear():
    """Oracle: definition. Linear(4C, C) -> GELU -> Dropout -> Linear(C, out)."""
    head = SiameseHead(C, 3, dropout=0.2)
    kinds = [type(m) for m in head.mlp]
    assert kinds == [torch.nn.Linear, torch.nn.GELU, torch.nn.Dropout, torch.nn.Linear], f"SiameseHead.mlp layers: {kinds}"
    assert head.mlp[0].weight.shape == (C, 4 * C) and head.mlp[3].weight.shape == (3, C)
    assert head.mlp[2].p == 0.2


# ---------------------------------------------------------------------------- CosineHead values
def test_cosine_head_identical_vectors_give_top_of_range():
    """Oracle: property. cos(u, u) = 1 -> hi; cos(u, −u) = −1 -> lo; orthogonal -> midpoint."""
    head = CosineHead((0.0, 5.0))
    u, _ = make_uv()
    torch.testing.assert_close(head(u, u), torch.full((B, 1), 5.0), rtol=0, atol=1e-5)
    torch.testing.assert_close(head(u, -u), torch.full((B, 1), 0.0), rtol=0, atol=1e-5)
    e = torch.eye(2)
    torch.testing.assert_close(head(e[:1], e[1:]), torch.tensor([[2.5]]), rtol=0, atol=1e-6)
    # any range: [1, 3] tops out at 3
    torch.testing.assert_close(CosineHead((1.0, 3.0))(u, 2 * u), torch.full((B, 1), 3.0), rtol=0, atol=1e-5)


def test_cosine_head_maps_cos_linearly_to_range():
    """Oracle: hand formula. STS [0, 5]: score = 2.5 · (cos + 1), cos = u·v / (|u| |v|)."""
    u, v = make_uv(seed=1)
    cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))             # (B,)
    expected = (2.5 * (cos + 1)).unsqueeze(-1)                             # (B, 1)
    torch.testing.assert_close(CosineHead((0.0, 5.0))(u, v), expected, rtol=0, atol=1e-5,
                               msg="minbert.tasks.pair_heads.CosineHead.forward: score != 2.5 * (cos + 1)")


def test_cosine_logit_is_scale_times_cos_plus_bias():
    """Oracle: hand formula. logit = s · cos + b with s = exp(log_scale); at u = v the logit is its top, s + b."""
    head = CosineHead(None, init_scale=5.0, init_bias=-2.0)
    u, v = make_uv(seed=2)
    cos = torch.nn.functional.cosine_similarity(u, v, dim=-1).unsqueeze(-1)
    torch.testing.assert_close(head(u, v), 5.0 * cos - 2.0, rtol=0, atol=1e-5)
    torch.testing.assert_close(head(u, u), torch.full((B, 1), 3.0), rtol=0, atol=1e-5)
    assert sum(p.numel() for p in head.parameters()) == 2, "para mode learns exactly a scale and a bias"
    assert sum(p.numel() for p in CosineHead((0.0, 5.0)).parameters()) == 0, "STS mode has no parameters"


def test_cosine_logit_is_positive_iff_cos_above_threshold():
    """Oracle: property. s > 0, so logit > 0 (paraphrase) exactly when cos > −b / s (here 2 / 5 = 0.4)."""
    head = CosineHead(None, init_scale=5.0, init_bias=-2.0)
    angles = torch.linspace(0, math.pi, 50)
    u = torch.tensor([[1.0, 0.0]]).expand(50, 2)
    v = torch.stack([angles.cos(), angles.sin()], dim=-1)                 # cos(u, v) = cos(angle)
    logits = head(u, v).squeeze(-1).detach()
    assert (logits.diff() < 0).all(), "logit must decrease as the angle grows (s > 0)"
    torch.testing.assert_close(logits > 0, angles.cos() > 0.4)


def test_cosine_head_is_symmetric_and_ignores_norms():
    """Oracle: property. cos(u, v) = cos(v, u) = cos(3u, 0.5v)."""
    u, v = make_uv(seed=3)
    for head in (CosineHead((0.0, 5.0)), CosineHead(None)):
        torch.testing.assert_close(head(u, v), head(v, u), rtol=0, atol=1e-6)
        torch.testing.assert_close(head(u, v), head(3 * u, 0.5 * v), rtol=0, atol=1e-5)


def test_cosine_head_rejects_empty_range():
    """Oracle: property. scale_to must be (lo, hi) with lo < hi."""
    with pytest.raises(ValueError, match="lo < hi"):
        CosineHead((5.0, 0.0))


# ---------------------------------------------------------------------------- SiameseHead features
def test_siamese_features_are_u_v_absdiff_product_in_order():
    """Oracle: hand-written vectors. [u, v, |u − v|, u ⊙ v] for u = (1, −2), v = (3, 4)."""
    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 4.0]])
    expected = torch.tensor([[1.0, -2.0, 3.0, 4.0, 2.0, 6.0, 3.0, -8.0]])
    torch.testing.assert_close(SiameseHead.features(u, v), expected, rtol=0, atol=0)


def test_siamese_features_symmetric_blocks():
    """Oracle: property. Swapping u and v swaps blocks [u, v] and keeps |u − v| and u ⊙ v, which are
    symmetric (u − v alone is antisymmetric; the absolute value removes the sign)."""
    u, v = make_uv(seed=4)
    f, g = SiameseHead.features(u, v), SiameseHead.features(v, u)        # (B, 4C) each
    torch.testing.assert_close(g[:, :C], f[:, C:2 * C], rtol=0, atol=0)
    torch.testing.assert_close(g[:, C:2 * C], f[:, :C], rtol=0, atol=0)
    torch.testing.assert_close(g[:, 2 * C:], f[:, 2 * C:], rtol=0, atol=0)
    torch.testing.assert_close(u - v, -(v - u), rtol=0, atol=0)


def test_siamese_head_is_order_sensitive():
    """Oracle: property (documented). The [u, v] blocks make head(u, v) != head(v, u) in general
    (the cosine head, by contrast, is symmetric)."""
    u, v = make_uv(seed=5)
    head = make_siamese(out=1)
    diff = (head(u, v) - head(v, u)).abs().max().item()
    assert diff > 1e-4, f"minbert.tasks.pair_heads.SiameseHead: expected an order-sensitive head, max |f(u,v) - f(v,u)| = {diff}"


def test_siamese_head_with_dropout_off_is_deterministic():
    """Oracle: property. eval() turns dropout off: two calls agree exactly."""
    u, v = make_uv(seed=6)
    head = make_siamese(out=5)
    torch.testing.assert_close(head(u, v), head(u, v), rtol=0, atol=0)


# ---------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("kind", ["cosine_sts", "cosine_para", "siamese"])
def test_gradients_flow_to_u_and_v(kind):
    """Oracle: property. A loss on the head output has finite, non-zero gradients w.r.t. u and v
    (and w.r.t. every head parameter)."""
    head = {"cosine_sts": CosineHead((0.0, 5.0)), "cosine_para": CosineHead(None), "siamese": make_siamese(1)}[kind]
    u, v = make_uv(seed=7)
    u.requires_grad_(True)
    v.requires_grad_(True)
    head(u, v).pow(2).sum().backward()
    for name, t in [("u", u), ("v", v)] + list(head.named_parameters()):
        assert t.grad is not None and torch.isfinite(t.grad).all(), f"{kind}: no finite gradient for {name}"
        assert t.grad.abs().sum() > 0, f"{kind}: zero gradient for {name}"


# ---------------------------------------------------------------------------- the CS224N reports' heads
def test_dot_head_is_the_plain_dot_product():
    """Oracle: hand computation (Benton §4.1, STS baseline). u = (1, −2), v = (3, 4): u · v = 3 − 8 = −5;
    symmetric, and it scales with the norms (unlike the cosine)."""
    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 4.0]])
    head = DotHead()
    torch.testing.assert_close(head(u, v), torch.tensor([[-5.0]]), rtol=0, atol=0,
                               msg="minbert.tasks.pair_heads.DotHead.forward: expected u · v = −5")
    torch.testing.assert_close(head(2 * u, v), torch.tensor([[-10.0]]), rtol=0, atol=0)
    a, b = make_uv(seed=8)
    torch.testing.assert_close(head(a, b), head(b, a), rtol=0, atol=1e-6)
    assert sum(p.numel() for p in head.parameters()) == 0, "DotHead has no parameters"


def test_concat_head_applies_its_head_to_u_then_v():
    """Oracle: hand computation (Song/Hu/Pan §3.1, plain concatenation). With a Linear(4, 1) of weight
    (1, 2, 3, 4) and bias 0.5: u = (1, −2), v = (3, 4) -> 1 − 4 + 9 + 16 + 0.5 = 22.5; swapping u and v
    gives 3 + 8 + 3 − 8 + 0.5 = 6.5 (order-sensitive)."""
    lin = torch.nn.Linear(4, 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
        lin.bias.fill_(0.5)
    head = ConcatHead(lin)
    u, v = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 4.0]])
    torch.testing.assert_close(head(u, v), torch.tensor([[22.5]]), rtol=0, atol=1e-6,
                               msg="minbert.tasks.pair_heads.ConcatHead.forward: expected head([u; v])")
    torch.testing.assert_close(head(v, u), torch.tensor([[6.5]]), rtol=0, atol=1e-6)


def test_tanh_scaled_head_maps_the_logit_onto_the_label_range():
    """Oracle: hand computation (Benton §4.2). z = 0 -> 2.5 (the middle of [0, 5]); z = atanh(0.6) -> 2.5·1.6 = 4;
    large |z| -> the ends 0 and 5, never beyond."""
    lin = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        lin.weight.fill_(1.0)
    head = TanhScaledHead(lin, scale_to=(0.0, 5.0))
    z = torch.tensor([[0.0], [math.atanh(0.6)], [50.0], [-50.0]])
    torch.testing.assert_close(head(z), torch.tensor([[2.5], [4.0], [5.0], [0.0]]), rtol=0, atol=1e-5,
                               msg="minbert.tasks.pair_heads.TanhScaledHead.forward: expected 2.5·(tanh(z) + 1)")
    with pytest.raises(ValueError, match="lo < hi"):
        TanhScaledHead(lin, scale_to=(5.0, 5.0))


# ---------------------------------------------------------------------------- output ranges and defaults
def test_heads_reject_a_range_of_zero_width():
    """Oracle: property. lo == hi is no range either (every score would be lo): both scaled heads refuse it."""
    with pytest.raises(ValueError, match="lo < hi"):
        CosineHead((5.0, 5.0))
    with pytest.raises(ValueError, match="lo < hi"):
        TanhScaledHead(torch.nn.Linear(1, 1), scale_to=(2.0, 2.0))


def test_tanh_scaled_head_range_with_a_nonzero_lower_end():
    """Oracle: hand computation. On [1, 3]: z = 0 -> the middle 2; z = atanh(0.5) -> 1 + 2·1.5/2 = 2.5;
    large |z| -> the ends 1 and 3. (With lo = 0, as for STS, hi − lo and hi + lo agree; here they do not.)"""
    lin = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        lin.weight.fill_(1.0)
    head = TanhScaledHead(lin, scale_to=(1.0, 3.0))
    z = torch.tensor([[0.0], [math.atanh(0.5)], [50.0], [-50.0]])
    torch.testing.assert_close(head(z), torch.tensor([[2.0], [2.5], [3.0], [1.0]]), rtol=0, atol=1e-5,
                               msg="minbert.tasks.pair_heads.TanhScaledHead.forward: expected lo + (hi − lo)·(tanh(z) + 1)/2 on [1, 3]")


def test_cosine_head_range_with_a_nonzero_lower_end():
    """Oracle: hand computation. On [1, 3]: cos = 1 -> 3, cos = −1 -> 1, cos = 0 -> 2, cos = 0.6 -> 1 + 2·1.6/2 = 2.6."""
    head = CosineHead((1.0, 3.0))
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    v = torch.tensor([[2.0, 0.0], [-1.0, 0.0], [0.0, 5.0], [3.0, 4.0]])
    torch.testing.assert_close(head(u, v), torch.tensor([[3.0], [1.0], [2.0], [2.6]]), rtol=0, atol=1e-6,
                               msg="minbert.tasks.pair_heads.CosineHead.forward: expected lo + (hi − lo)·(cos + 1)/2 on [1, 3]")


def test_cosine_logit_head_default_init_is_scale_5_bias_0():
    """Oracle: the docstring's init (s = 5, so σ(s) = 0.993 at cos = 1; b = 0, so cos = 0 is the threshold).
    u = v gives the top logit s + b = 5; orthogonal vectors give b = 0."""
    head = CosineHead(None)
    e = torch.eye(2)
    torch.testing.assert_close(head(e[:1], e[:1]), torch.tensor([[5.0]]), rtol=0, atol=1e-6,
                               msg="minbert.tasks.pair_heads.CosineHead(None): default init must be s = 5 (logit 5 at cos = 1)")
    torch.testing.assert_close(head(e[:1], e[1:]), torch.tensor([[0.0]]), rtol=0, atol=1e-6,
                               msg="minbert.tasks.pair_heads.CosineHead(None): default init must be b = 0 (logit 0 at cos = 0)")


def test_dot_head_gives_one_dot_product_per_row():
    """Oracle: hand computation. Rows (1, 2)·(3, 4) = 11 and (−1, 0)·(5, 6) = −5: (B, 1) = [[11], [−5]], never
    a sum over the batch."""
    u, v = torch.tensor([[1.0, 2.0], [-1.0, 0.0]]), torch.tensor([[3.0, 4.0], [5.0, 6.0]])
    torch.testing.assert_close(DotHead()(u, v), torch.tensor([[11.0], [-5.0]]), rtol=0, atol=0,
                               msg="minbert.tasks.pair_heads.DotHead.forward: expected u_i · v_i per row, (B, 1)")


def test_siamese_head_default_dropout_is_bert_hidden_dropout():
    """Oracle: BERT's hidden dropout 0.1 (Devlin et al. 2019, §A.2) is the default of SiameseHead(C, out)."""
    head = SiameseHead(C, 1)
    assert head.mlp[2].p == 0.1, f"minbert.tasks.pair_heads.SiameseHead: default dropout must be 0.1, got {head.mlp[2].p}"
