"""Grades minbert.tasks.metrics: accuracy, f1, matthews, pearson, spearman, cs224n_overall.

Oracles: (b) live — scikit-learn (accuracy_score, f1_score, matthews_corrcoef), np.corrcoef and
scipy.stats.spearmanr (rankdata-based) on seeded random data, with ties;
(c) properties — the documented degenerate cases (constant inputs give 0, not NaN; an empty
confusion-matrix row gives MCC 0; no positives at all gives F1 0) and the overall formula.

Run: python -m pytest -q tests/tasks/test_metrics.py   (offline, CPU, well under a second)
"""

import numpy as np
import pytest

from minbert.tasks import metrics

SEEDS = range(5)


def labels(n, seed, p=0.5):
    return (np.random.default_rng(seed).random(n) < p).astype(int)


def close(got, want, fn, atol=1e-12):
    assert abs(got - want) <= atol, f"minbert.tasks.metrics.{fn}: got {got!r}, expected {want!r} (diff {abs(got - want):.3g})"


@pytest.mark.parametrize("seed", SEEDS)
def test_classification_metrics_match_sklearn_on_random_labels(seed):
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef   # at first use: seconds to import
    for n, p in ((50, 0.5), (7, 0.2), (200, 0.9)):
        pred, gold = labels(n, seed, p), labels(n, seed + 100, 0.5)
        close(metrics.accuracy(pred, gold), accuracy_score(gold, pred), "accuracy")
        close(metrics.f1(pred, gold), f1_score(gold, pred, zero_division=0.0), "f1")
        close(metrics.matthews(pred, gold), matthews_corrcoef(gold, pred), "matthews", atol=1e-10)


def test_accuracy_works_for_three_classes():
    from sklearn.metrics import accuracy_score
    rng = np.random.default_rng(0)
    pred, gold = rng.integers(0, 3, 100), rng.integers(0, 3, 100)
    close(metrics.accuracy(pred, gold), accuracy_score(gold, pred), "accuracy")


def test_classification_degenerate_cases():
    from sklearn.metrics import f1_score, matthews_corrcoef
    ones, zeros = np.ones(10, int), np.zeros(10, int)
    mixed = np.array([0, 1] * 5)
    # no positive predicted and none gold: F1 0 (sklearn zero_division=0), MCC 0
    close(metrics.f1(zeros, zeros), f1_score(zeros, zeros, zero_division=0.0), "f1")
    close(metrics.matthews(zeros, zeros), 0.0, "matthews")
    # constant prediction: an empty column of the confusion matrix, MCC 0 as in sklearn
    close(metrics.matthews(ones, mixed), matthews_corrcoef(mixed, ones), "matthews")
    close(metrics.matthews(mixed, mixed), 1.0, "matthews")
    close(metrics.matthews(1 - mixed, mixed), -1.0, "matthews")
    close(metrics.f1(ones, mixed), f1_score(mixed, ones), "f1")
    close(metrics.accuracy(ones, mixed), 0.5, "accuracy")


@pytest.mark.parametrize("seed", SEEDS)
def test_pearson_matches_np_corrcoef(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=64)
    y = 0.5 * x + rng.normal(size=64)
    close(metrics.pearson(x, y), float(np.corrcoef(x, y)[0, 1]), "pearson", atol=1e-12)
    close(metrics.pearson(x, 3 * x + 1), 1.0, "pearson", atol=1e-12)


def rank_average(x):
    """Reference ranks: 0-based, ties get the mean of the positions they occupy (brute force)."""
    x = np.asarray(x, dtype=np.float64)
    return np.array([np.sum(x < v) + (np.sum(x == v) - 1) / 2 for v in x])


@pytest.mark.parametrize("seed", SEEDS)
def test_spearman_matches_rank_based_reference_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 80).astype(float)           # many ties, like STS scores
    y = x + rng.integers(-2, 3, 80)
    want = float(np.corrcoef(rank_average(x), rank_average(y))[0, 1])
    close(metrics.spearman(x, y), want, "spearman", atol=1e-12)
    import scipy.stats as scipy_stats
    close(metrics.spearman(x, y), float(scipy_stats.spearmanr(x, y).statistic), "spearman", atol=1e-12)


def test_spearman_is_invariant_to_monotone_transforms():
    x = np.random.default_rng(1).normal(size=30)
    close(metrics.spearman(x, np.exp(x)), 1.0, "spearman")
    close(metrics.spearman(x, -x ** 3), -1.0, "spearman")


def test_correlations_of_constant_input_are_zero_not_nan():
    x, c = np.arange(5.0), np.full(5, 2.0)
    for fn in ("pearson", "spearman"):
        got = getattr(metrics, fn)(x, c)
        assert got == 0.0, f"minbert.tasks.metrics.{fn}: a constant input must give 0.0, got {got!r}"
        got = getattr(metrics, fn)(c, c)
        assert got == 0.0, f"minbert.tasks.metrics.{fn}: two constant inputs must give 0.0, got {got!r}"


def test_cs224n_overall_maps_pearson_to_unit_interval():
    close(metrics.cs224n_overall(0.5, 0.8, 0.6), (0.5 + 0.8 + 0.8) / 3, "cs224n_overall")
    close(metrics.cs224n_overall(1.0, 1.0, 1.0), 1.0, "cs224n_overall")
    close(metrics.cs224n_overall(0.0, 0.0, -1.0), 0.0, "cs224n_overall")


def test_correlations_of_a_constant_first_input_are_zero_not_nan():
    """Oracle: property (documented: a constant prediction carries no correlation). The constant may be
    either argument: pearson(c, x) as well as pearson(x, c)."""
    x, c = np.arange(5.0), np.full(5, 2.0)
    for fn in ("pearson", "spearman"):
        got = getattr(metrics, fn)(c, x)
        assert got == 0.0, f"minbert.tasks.metrics.{fn}: a constant FIRST input must give 0.0, got {got!r}"


def test_pearson_of_constant_float32_predictions_is_zero_not_nan():
    """Oracle: property. A collapsed head's float32 outputs (all 2.9) are constant, but their float32 std is
    not 0 (the float32 mean of seven 2.9s rounds: numpy gives 2.4e-07), so the constant check must look at
    the float64 values, where np.corrcoef would divide by a zero std and give NaN."""
    c32 = np.full(7, 2.9, dtype=np.float32)
    assert c32.std() != 0, "test premise: numpy's float32 std of a constant array is not exactly 0"
    gold = np.arange(7.0)
    for got, where in ((metrics.pearson(c32, gold), "pearson(const_float32, gold)"),
                       (metrics.pearson(gold, c32), "pearson(gold, const_float32)")):
        assert got == 0.0, (f"minbert.tasks.metrics.{where}: a constant float32 prediction must give 0.0, got "
                            f"{got!r}: convert to float64 before checking the std")
