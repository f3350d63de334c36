"""Grades minbert.dropout.dropout (inverted dropout with a 16-bit mask).

Oracles: (c) properties — keep rate within 4σ of 1 − p, kept values scaled by exactly
1/(1 − p_used), gradient = mask/(1 − p_used), identity in eval and for p = 0, reproducible
under a seed, expectation preserved; (b) live — same statistics as torch's F.dropout.
"""

import math

import pytest
import torch

from minbert.dropout import LEVELS, Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keep_rate_and_scale(p):
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = dropout(x, p)
    kept = y != 0
    rate = kept.float().mean().item()
    sigma = math.sqrt(p * (1 - p) / x.numel())
    assert abs(rate - (1 - p)) < 4 * sigma + 1 / LEVELS, f"minbert.dropout.dropout: keep rate {rate:.4f}, expected {1 - p} ± {4 * sigma:.4f}"
    p_used = round(p * LEVELS) / LEVELS
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p_used)), atol=0, rtol=1e-6,
                               msg=lambda m: f"minbert.dropout.dropout: kept values must be x/(1-p):\n{m}")


def test_mask_is_not_correlated_across_lanes():
    """Each 64-bit draw feeds four neighbouring elements: their keep decisions must be independent."""
    torch.manual_seed(1)
    keep = dropout(torch.ones(400_000), 0.5) != 0
    k = keep.view(-1, 4).float()
    both = (k[:, 0] * k[:, 1]).mean().item()
    assert abs(both - 0.25) < 0.01, f"minbert.dropout.dropout: neighbours kept together with rate {both:.3f}, expected 0.25"


def test_gradient_is_mask_over_keep_probability():
    torch.manual_seed(2)
    x = torch.randn(1000, requires_grad=True)
    y = dropout(x, 0.2)
    y.sum().backward()
    expected = (y != 0).float() * (LEVELS / (LEVELS - round(0.2 * LEVELS)))
    torch.testing.assert_close(x.grad, expected, atol=0, rtol=1e-6,
                               msg=lambda m: f"minbert.dropout._MaskedScale.backward: grad must be mask/(1-p):\n{m}")


def test_identity_in_eval_and_for_p0_and_works_in_bf16():
    x = torch.randn(64)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    m = Dropout(0.5).eval()
    assert torch.equal(m(x), x), "minbert.dropout.Dropout: eval mode must be the identity"
    y = dropout(x.bfloat16(), 0.5)
    assert y.dtype == torch.bfloat16, f"minbert.dropout.dropout: dtype changed to {y.dtype}"


def test_seeded_masks_reproduce_and_differ_between_calls():
    torch.manual_seed(3)
    a, b = dropout(torch.ones(100), 0.5), dropout(torch.ones(100), 0.5)
    torch.manual_seed(3)
    assert torch.equal(a, dropout(torch.ones(100), 0.5)), "minbert.dropout.dropout must follow torch.manual_seed"
    assert not torch.equal(a, b), "minbert.dropout.dropout: two calls drew the same mask"


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
