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
