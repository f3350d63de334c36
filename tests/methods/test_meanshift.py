"""Grades minbert.methods.meanshift.mean_shift and minbert.methods.meanshift.estimate_bandwidth (1-D, flat kernel).

Oracles: (b) live — scikit-learn's MeanShift / estimate_bandwidth on random 1-D data (continuous
values, so no point lies exactly bw from another: at such ties float rounding decides, and
sklearn's answer then depends on which neighbour search it picked); (a) fixed values
obtained by running scikit-learn 1.9.1; (c) properties — permutation
invariance, fixed points, bw → ∞ and bw = 0 limits, identical inputs.

Run: python -m pytest -q tests/methods/test_meanshift.py   (offline, CPU, a few seconds)
"""

import numpy as np
import pytest

from minbert.methods.meanshift import estimate_bandwidth, mean_shift

MS = "minbert.methods.meanshift.mean_shift"
EB = "minbert.methods.meanshift.estimate_bandwidth"
ATOL = 1e-9   # centres are means of the same points as sklearn's; only summation order differs


def same_partition(a, b):
    """True when labelings a and b group the points identically (names may differ)."""
    a, b = np.asarray(a), np.asarray(b)
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def random_1d(seed, n=120):
    """Three Gaussian blobs of different widths plus uniform background on [0, 1]."""
    rng = np.random.default_rng(seed)
    blobs = [rng.normal(rng.uniform(0, 1), rng.uniform(0.005, 0.05), size=n // 4) for _ in range(3)]
    return np.concatenate(blobs + [rng.uniform(0, 1, size=n - 3 * (n // 4))])


def check_centers(got, expected, what):
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    assert got.shape == expected.shape, f"{MS}: {what}: expected {expected.size} centres {expected}, got {got.size}: {got}"
    diff = np.abs(got - expected).max()
    assert diff <= ATOL, f"{MS}: {what}: centres differ, max abs diff {diff:.3g}\n got {got}\n expected {expected}"


# ---------------------------------------------------------------------------- live oracle: sklearn
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("bandwidth", [0.005, 0.02, 0.05, 0.15, 0.5])
def test_mean_shift_matches_sklearn_on_random_data(seed, bandwidth):
    """Same centres in the same order (most populous first) and the same partition as sklearn."""
    sklearn_cluster = pytest.importorskip("sklearn.cluster")
    x = random_1d(seed)
    ref = sklearn_cluster.MeanShift(bandwidth=bandwidth).fit(x.reshape(-1, 1))
    centers, labels = mean_shift(x, bandwidth)
    check_centers(centers, ref.cluster_centers_.ravel(), f"bw={bandwidth}, seed={seed}")
    assert same_partition(labels, ref.labels_), f"{MS}: bw={bandwidth}, seed={seed}: partition differs from sklearn's"
    np.testing.assert_array_equal(labels, ref.labels_, err_msg=f"{MS}: labels must index centres in sklearn's order")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("quantile", [0.1, 0.3, 0.5])
def test_estimate_bandwidth_matches_sklearn(seed, quantile):
    sklearn_cluster = pytest.importorskip("sklearn.cluster")
    x = random_1d(seed, n=50 + 37 * seed)
    expected = sklearn_cluster.estimate_bandwidth(x.reshape(-1, 1), quantile=quantile)
    got = estimate_bandwidth(x, quantile)
    assert abs(got - expected) <= 1e-12, f"{EB}: quantile={quantile}: got {got!r}, sklearn {expected!r}, diff {abs(got - expected):.3g}"


def test_mean_shift_with_estimated_bandwidth_matches_sklearn_default():
    """MeanShift() with bandwidth=None runs estimate_bandwidth(X) first; chaining ours must agree."""
    sklearn_cluster = pytest.importorskip("sklearn.cluster")
    x = random_1d(7, n=90)
    ref = sklearn_cluster.MeanShift().fit(x.reshape(-1, 1))
    centers, labels = mean_shift(x, estimate_bandwidth(x))
    check_centers(centers, ref.cluster_centers_.ravel(), "default bandwidth")
    assert same_partition(labels, ref.labels_), f"{MS}: default bandwidth: partition differs from sklearn's"


# ---------------------------------------------------------------------------- fixed oracles
def test_six_points_three_clusters():
    centers, labels = mean_shift([0.50, 0.51, 0.52, 0.70, 0.71, 0.90], 0.05)
    check_centers(centers, [0.51, 0.705, 0.90], "[.50,.51,.52,.70,.71,.90], bw .05")
    np.testing.assert_array_equal(labels, [0, 0, 0, 1, 1, 2], err_msg=f"{MS}: labels for the six-point oracle")


def test_nine_points_centres_ordered_by_population():
    x = [0.1, 0.12, 0.13, 0.5, 0.52, 0.9, 0.91, 0.92, 0.93]
    centers, labels = mean_shift(x, 0.1)
    check_centers(centers, [0.915, (0.1 + 0.12 + 0.13) / 3, 0.51], "nine points, bw .1")
    np.testing.assert_array_equal(labels, [1, 1, 1, 2, 2, 0, 0, 0, 0], err_msg=f"{MS}: labels for the nine-point oracle")


def test_equal_populations_order_larger_centre_first():
    centers, labels = mean_shift([0.0, 0.01, 1.0, 1.01], 0.1)
    check_centers(centers, [1.005, 0.005], "tie [0, .01, 1, 1.01], bw .1")
    np.testing.assert_array_equal(labels, [1, 1, 0, 0], err_msg=f"{MS}: labels for the equal-size tie")


@pytest.mark.parametrize("quantile, expected", [(0.3, 0.12), (0.5, 0.26)])
def test_estimate_bandwidth_fixed_values(quantile, expected):
    got = estimate_bandwidth(np.arange(10) / 10, quantile)
    assert abs(got - expected) <= 1e-12, f"{EB}(arange(10)/10, quantile={quantile}): expected {expected}, got {got!r}"


def test_estimate_bandwidth_is_zero_for_six_values():
    """k = int(6·0.3) = 1 neighbour, which is the point itself: the reason MML floors the bandwidth."""
    got = estimate_bandwidth([0.50, 0.51, 0.52, 0.70, 0.71, 0.90])
    assert got == 0.0, f"{EB}: the first neighbour is the point itself (distance 0), expected 0.0, got {got!r}"


# ---------------------------------------------------------------------------- properties
@pytest.mark.parametrize("bandwidth", [0.0, 0.1])
def test_identical_inputs_give_one_cluster(bandwidth):
    """Three copies of 0.1 average to 0.10000000000000002; with bw = 0 sklearn can lose that seed."""
    for x in (np.full(3, 0.1), np.full(7, 0.3)):
        centers, labels = mean_shift(x, bandwidth)
        assert len(centers) == 1 and abs(centers[0] - x[0]) <= ATOL, f"{MS}: {x} with bw={bandwidth}: expected one centre {x[0]}, got {centers}"
        np.testing.assert_array_equal(labels, 0, err_msg=f"{MS}: identical inputs must all get label 0")


def test_zero_bandwidth_gives_one_cluster_per_unique_value():
    x = [0.3, 0.1, 0.1, 0.2, 0.1, 0.2]
    centers, labels = mean_shift(x, 0.0)
    check_centers(centers, [0.1, 0.2, 0.3], "bw 0 (ordered by count, then value)")
    np.testing.assert_array_equal(labels, [2, 0, 0, 1, 0, 1], err_msg=f"{MS}: bw 0 labels")


@pytest.mark.parametrize("bandwidth", [10.0, np.inf])
def test_huge_bandwidth_gives_one_cluster_at_the_mean(bandwidth):
    x = random_1d(3, n=40)
    centers, labels = mean_shift(x, bandwidth)
    check_centers(centers, [x.mean()], f"bw={bandwidth}")
    np.testing.assert_array_equal(labels, 0, err_msg=f"{MS}: bw={bandwidth} must put every point in cluster 0")


@pytest.mark.parametrize("bandwidth", [0.02, 0.1])
def test_partition_is_invariant_to_point_order(bandwidth):
    x = random_1d(4, n=80)
    perm = np.random.default_rng(0).permutation(x.size)
    centers, labels = mean_shift(x, bandwidth)
    centers_p, labels_p = mean_shift(x[perm], bandwidth)
    assert same_partition(labels[perm], labels_p), f"{MS}: bw={bandwidth}: permuting the points changed the partition"
    check_centers(np.sort(centers_p), np.sort(centers), f"bw={bandwidth}, permuted points")


def test_centres_are_fixed_points_of_the_shift():
    """Each centre is (to the 1e-3·bw stopping tolerance) the mean of the points in its window."""
    x, bandwidth = random_1d(5), 0.05
    centers, _ = mean_shift(x, bandwidth)
    for c in centers:
        window_mean = x[np.abs(x - c) <= bandwidth].mean()
        assert abs(window_mean - c) <= 1e-3 * bandwidth, f"{MS}: centre {c} is {abs(window_mean - c):.3g} from its window mean"
    gaps = np.diff(np.sort(centers))
    assert (gaps > bandwidth).all(), f"{MS}: kept centres must be more than bw apart, smallest gap {gaps.min():.4g}"


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="bandwidth"):
        mean_shift([0.1, 0.2], -1.0)
    with pytest.raises(ValueError, match="empty"):
        mean_shift([], 0.1)


# ---------------------------------------------------------------------------- the window edge: exactly one bw apart
EDGE_CASES = {   # points on a binary grid, so every distance is exact and some are exactly bw
    "two points": ([0.0, 1.0], 1.0),
    "three in a row": ([0.0, 1.0, 2.0], 1.0),
    "chain of five": ([0.0, 1.0, 2.0, 3.0, 4.0], 1.0),
    "two groups": ([0.0, 0.0, 1.0, 5.0, 6.0, 6.0], 1.0),
    "uneven chain": ([0.0, 2.0, 4.0, 5.0], 2.0),
    "half steps": ([0.0, 0.5, 1.0, 1.5, 4.0], 0.5),
    "repeated points": ([0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0], 1.0),
    "quarter steps": ([0.0, 0.25, 0.5, 0.75, 1.0, 3.0], 0.25),
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_points_exactly_one_bandwidth_apart_match_sklearn(case):
    """sklearn's windows and its merging of centres are inclusive (radius_neighbors: distance <= bw).
    Here a point exactly bw away is in the window and a centre exactly bw from a kept one is merged;
    an exclusive edge (<) gives other centres in every case below."""
    sklearn_cluster = pytest.importorskip("sklearn.cluster")
    x, bandwidth = EDGE_CASES[case]
    x = np.asarray(x)
    ref = sklearn_cluster.MeanShift(bandwidth=bandwidth).fit(x.reshape(-1, 1))
    centers, labels = mean_shift(x, bandwidth)
    check_centers(centers, ref.cluster_centers_.ravel(),
                  f"{case} {x.tolist()}, bw={bandwidth} (hint: the window is |x - c| <= bw, inclusive, like sklearn's)")
    np.testing.assert_array_equal(labels, ref.labels_, err_msg=f"{MS}: {case}: labels differ from sklearn's")


def test_two_points_one_bandwidth_apart_meet_halfway():
    """By hand: 0 and 1 with bw = 1 each see both points, so both seeds move to 0.5: one cluster."""
    centers, labels = mean_shift([0.0, 1.0], 1.0)
    check_centers(centers, [0.5], "[0, 1], bw 1: each point is in the other's (inclusive) window")
    np.testing.assert_array_equal(labels, [0, 0], err_msg=f"{MS}: [0, 1], bw 1: one cluster")


@pytest.mark.parametrize("max_iter", [1, 2, 3, 300])
def test_max_iter_stops_the_seeds_where_sklearn_stops_them(max_iter):
    """Points spreading out from 0: the seeds near 0 climb one window mean per iteration and need three moves to
    settle, so a run cut at max_iter 1 or 2 ends elsewhere than one allowed to converge. sklearn computes
    max_iter + 1 means per seed (its loop breaks after the mean that makes completed_iterations == max_iter);
    an off-by-one in either direction moves the first centre."""
    sklearn_cluster = pytest.importorskip("sklearn.cluster")
    x = np.array([0.0, 0.1, 0.25, 0.45, 0.7, 1.0, 1.35, 1.75, 2.2, 2.7])
    ref = sklearn_cluster.MeanShift(bandwidth=0.5, max_iter=max_iter).fit(x.reshape(-1, 1))
    centers, labels = mean_shift(x, 0.5, max_iter=max_iter)
    check_centers(centers, ref.cluster_centers_.ravel(), f"max_iter={max_iter}")
    np.testing.assert_array_equal(labels, ref.labels_, err_msg=f"{MS}: max_iter={max_iter}: labels differ from sklearn")
    firsts = {m: round(float(mean_shift(x, 0.5, max_iter=m)[0][0]), 4) for m in (1, 2, 300)}
    assert len(set(firsts.values())) == 3, f"test data: the first centre must differ at max_iter 1, 2, 300: {firsts}"
