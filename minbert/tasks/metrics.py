"""Evaluation metrics as GLUE and the CS224N leaderboard report them.

accuracy; F1 of the positive class (MRPC, QQP); Matthews correlation (CoLA); Pearson and
Spearman correlation (STS). Plain NumPy, checked against scikit-learn/scipy in tests.
The CS224N overall score averages the three tasks after mapping Pearson r from [-1, 1]
to [0, 1]:  (SST acc + Quora acc + (r + 1) / 2) / 3.
"""

import numpy as np


def accuracy(pred, gold) -> float:
    pred, gold = np.asarray(pred), np.asarray(gold)
    return float((pred == gold).mean())


def f1(pred, gold) -> float:
    pred, gold = np.asarray(pred) == 1, np.asarray(gold) == 1
    tp = float((pred & gold).sum())
    denom = pred.sum() + gold.sum()
    return 2 * tp / denom if denom else 0.0


def matthews(pred, gold) -> float:
    """Matthews correlation of binary labels; 0 when a row or column of the confusion matrix is empty."""
    p, g = np.asarray(pred) == 1, np.asarray(gold) == 1
    tp, tn = float((p & g).sum()), float((~p & ~g).sum())
    fp, fn = float((p & ~g).sum()), float((~p & g).sum())
    denom = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denom if denom else 0.0


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.std() == 0 or y.std() == 0:
        return 0.0   # a constant prediction carries no correlation (np.corrcoef would give NaN)
    return float(np.corrcoef(x, y)[0, 1])


def spearman(x, y) -> float:
    """Pearson correlation of the ranks, ties given their average rank (as scipy does)."""
    return pearson(_ranks(x), _ranks(y))


def _ranks(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    # average the ranks of tied values
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def cs224n_overall(sst_acc: float, para_acc: float, sts_r: float) -> float:
    return (sst_acc + para_acc + (sts_r + 1) / 2) / 3
