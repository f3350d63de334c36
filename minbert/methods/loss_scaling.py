"""Muppet loss scaling: divide each task's loss by the loss of an uninformed predictor.

Aghajanyan et al. 2021, "Muppet: Massive Multi-task Representations with Pre-Finetuning"
(arXiv:2101.11038), §3, "Loss Scaling":

    L_scaled = L / ln n,    n = number of output labels of the task (not the dataset size).

A uniform predictor over n classes has cross-entropy exactly ln n, so every classification task
starts at a scaled loss of 1.0 and no task dominates a summed loss just by having more classes.
A one-logit binary head (our "para", BCE-with-logits) is uniform at logit 0, BCE = ln 2: n = 2.

Regression (n = 1, our "sts"): ln 1 = 0, so the formula is undefined. Our rule keeps the idea:
divide the MSE by the MSE of an uninformed predictor. For labels spread uniformly over
[lo, hi], always predicting the midpoint gives MSE = Var = (hi − lo)² / 12: 25/12 ≈ 2.08 for STS
[0, 5] (the STS train labels have variance 2.21, so a constant predictor starts near 1.06).
It is a fixed constant, not the batch variance, so scaling adds no noise to the gradient.
Without a label range, n = 1 raises: silently leaving regression unscaled would hide the choice.

Deliberately left out: Muppet's heterogeneous batches (a training-script concern: one forward
per task, sum the scaled losses, one backward) and scaling for generation (n = vocabulary size).
"""

import math

import torch

NUM_LABELS = {"sst": 5, "para": 2, "sts": 1}
LABEL_RANGES = {"sts": (0.0, 5.0)}  # regression tasks only: (lo, hi) of the labels


def uninformed_loss(num_labels: int, label_range: tuple[float, float] | None = None) -> float:
    """Loss of a predictor that knows nothing: ln n for n ≥ 2 classes (cross-entropy of the
    uniform distribution); (hi − lo)² / 12 for regression, n = 1 (MSE of the midpoint)."""
    if num_labels >= 2:
        if label_range is not None:
            raise ValueError(f"label_range is for regression (num_labels=1) only, got num_labels={num_labels}")
        return math.log(num_labels)
    if num_labels == 1:
        if label_range is None:
            raise ValueError("num_labels=1 (regression): ln 1 = 0 cannot scale a loss; pass label_range=(lo, hi) "
                             "to divide the MSE by (hi - lo)**2 / 12, e.g. LABEL_RANGES['sts'] = (0.0, 5.0)")
        lo, hi = label_range
        if not lo < hi:
            raise ValueError(f"label_range must be (lo, hi) with lo < hi, got {label_range}")
        return (hi - lo) ** 2 / 12
    raise ValueError(f"num_labels must be >= 1, got {num_labels}")


def scaled_loss(loss: torch.Tensor, num_labels: int, label_range: tuple[float, float] | None = None) -> torch.Tensor:
    """loss / ln n (classification) or MSE / ((hi − lo)² / 12) (regression, n = 1)."""
    return loss / uninformed_loss(num_labels, label_range)


def scaled_task_loss(task: str, loss: torch.Tensor) -> torch.Tensor:
    """scaled_loss with this repository's tasks: sst / ln 5, para / ln 2, sts / (25/12)."""
    return scaled_loss(loss, NUM_LABELS[task], LABEL_RANGES.get(task))


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    g = parser.add_argument_group("loss scaling (Muppet, arXiv:2101.11038 §3)")
    g.add_argument("--scale_losses", action="store_true",
                   help="divide each task loss by its uniform-predictor loss, ln(n)")
