"""Tests for minbert/methods/loss_scaling.py: Muppet loss scaling (loss / ln n) and the regression rule.

Run: python -m pytest -q tests/methods/test_loss_scaling.py   (offline, CPU, under a second)
"""

import math

import pytest
import torch
import torch.nn.functional as F

from minbert.methods.loss_scaling import LABEL_RANGES, NUM_LABELS, scaled_loss, scaled_task_loss, uninformed_loss

FN = "minbert.methods.loss_scaling.scaled_loss"


@pytest.mark.parametrize("n", [2, 3, 5, 10])
@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_uniform_predictor_scaled_cross_entropy_is_one(n, dtype, atol):
    """Oracle: property (Muppet). Equal logits = uniform prediction, CE = ln n, scaled CE = 1.0
    (exactly, up to the rounding of the dtype), whatever the labels and the constant."""
    g = torch.Generator().manual_seed(n)
    labels = torch.randint(0, n, (32,), generator=g)
    for constant in (0.0, 3.7):
        logits = torch.full((32, n), constant, dtype=dtype)               # (B, n)
        scaled = scaled_loss(F.cross_entropy(logits, labels), n)
        torch.testing.assert_close(scaled, torch.tensor(1.0, dtype=dtype), rtol=0, atol=atol,
                                   msg=f"{FN}: uniform predictor over n={n} classes should score 1.0, got {scaled.item()}")


def test_one_logit_binary_head_at_zero_scores_one():
    """Oracle: property. Our 'para' head is one logit with BCE-with-logits; logit 0 is the uniform predictor, BCE = ln 2."""
    labels = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    bce = F.binary_cross_entropy_with_logits(torch.zeros_like(labels), labels)
    torch.testing.assert_close(scaled_task_loss("para", bce), torch.tensor(1.0, dtype=torch.float64), rtol=0, atol=1e-12)


def test_num_labels_of_our_tasks():
    """Oracle: definition. SST 5 classes, Quora binary, STS regression."""
    assert NUM_LABELS == {"sst": 5, "para": 2, "sts": 1}
    assert LABEL_RANGES == {"sts": (0.0, 5.0)}


def test_regression_without_label_range_raises():
    """Oracle: documented rule. n = 1 has ln 1 = 0; without a label range scaled_loss raises (no silent fallback)."""
    with pytest.raises(ValueError, match="label_range"):
        scaled_loss(torch.tensor(2.0), 1)


def test_regression_divides_by_uniform_label_variance():
    """Oracle: documented rule. n = 1 with range (lo, hi): MSE / ((hi − lo)² / 12); STS: 25 / 12.
    Predicting the midpoint 2.5 for labels spread evenly over [0, 5] (N bin centres, variance
    (25/12)(1 − 1/N²)) gives a scaled MSE of ~1.0, like the uniform classifier."""
    assert uninformed_loss(1, (0.0, 5.0)) == pytest.approx(25 / 12, abs=1e-15)
    N = 1000
    labels = (torch.arange(N, dtype=torch.float64) + 0.5) * 5.0 / N       # (N,) bin centres in [0, 5]
    mse = F.mse_loss(torch.full_like(labels, 2.5), labels)
    scaled = scaled_task_loss("sts", mse)
    torch.testing.assert_close(scaled, torch.tensor(1 - 1 / N**2, dtype=torch.float64), rtol=0, atol=1e-12,
                               msg=f"{FN}: STS midpoint predictor should score ~1.0, got {scaled.item()}")


def test_scaled_task_loss_divisors():
    """Oracle: hand values. sst / ln 5 = / 1.6094, para / ln 2 = / 0.6931, sts / (25/12) = / 2.0833."""
    one = torch.tensor(1.0, dtype=torch.float64)
    for task, divisor in [("sst", math.log(5)), ("para", math.log(2)), ("sts", 25 / 12)]:
        torch.testing.assert_close(scaled_task_loss(task, one), one / divisor, rtol=0, atol=1e-15)


def test_scaling_scales_the_gradient_too():
    """Oracle: property. Scaling is a division by a constant, so the gradient is divided by the same constant."""
    x = torch.tensor([0.3, -1.2], requires_grad=True)
    scaled_loss(x.pow(2).sum(), 5).backward()
    torch.testing.assert_close(x.grad, 2 * x.detach() / math.log(5), rtol=1e-6, atol=1e-7)


def test_invalid_arguments_raise():
    """Oracle: property. n < 1, a label range on a classification task, or lo >= hi are errors."""
    with pytest.raises(ValueError, match=">= 1"):
        uninformed_loss(0)
    with pytest.raises(ValueError, match="regression"):
        uninformed_loss(5, (0.0, 5.0))
    with pytest.raises(ValueError, match="lo < hi"):
        uninformed_loss(1, (5.0, 5.0))


@pytest.mark.parametrize("lo, hi", [(1.0, 4.0), (-1.0, 1.0), (2.0, 2.5)])
def test_regression_divisor_uses_the_width_of_a_range_that_does_not_start_at_zero(lo, hi):
    """Oracle: the variance of U(lo, hi) is (hi − lo)² / 12 (a textbook fact): (1, 4) -> 9/12, (−1, 1) -> 4/12,
    (2, 2.5) -> 0.25/12. Only the width matters; a range starting at 0 cannot tell hi − lo from hi + lo."""
    assert uninformed_loss(1, (lo, hi)) == pytest.approx((hi - lo) ** 2 / 12, rel=1e-12), (
        f"minbert.methods.loss_scaling.uninformed_loss(1, ({lo}, {hi})): the MSE of the midpoint predictor on "
        f"U({lo}, {hi}) labels is (hi - lo)**2 / 12 = {(hi - lo) ** 2 / 12}, got {uninformed_loss(1, (lo, hi))}")


def test_regression_without_label_range_says_how_to_fix_it():
    """Oracle: documented rule. The error tells the user what to pass and what it divides by, in those words."""
    with pytest.raises(ValueError) as raised:
        uninformed_loss(1)
    message = str(raised.value)
    for phrase in ("num_labels=1 (regression): ln 1 = 0 cannot scale a loss; pass label_range=(lo, hi) to divide the MSE",
                   "(hi - lo)**2 / 12, e.g. LABEL_RANGES['sts'] = (0.0, 5.0)"):
        assert phrase in message, f"minbert.methods.loss_scaling.uninformed_loss: the n = 1 error should say {phrase!r}, got {message!r}"
    assert message.startswith("num_labels=1") and message.endswith("(0.0, 5.0)"), \
        f"minbert.methods.loss_scaling.uninformed_loss: unexpected text around the n = 1 error: {message!r}"


def test_scale_losses_flag_is_off_by_default_and_on_when_given():
    """Oracle: the flag's contract (Muppet §3.3, Eq. 1 is opt-in here): store_true, default off."""
    from minbert.core.flags import ArgumentParser
    from minbert.methods import loss_scaling
    parser = ArgumentParser()
    loss_scaling.add_args(parser)
    assert parser.parse_args([]).scale_losses is False, "minbert.methods.loss_scaling.add_args: --scale_losses must default to off"
    assert parser.parse_args(["--scale_losses"]).scale_losses is True, \
        "minbert.methods.loss_scaling.add_args: --scale_losses (no value) must turn scaling on"
