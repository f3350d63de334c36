"""MeanShift clustering of 1-D data with a flat kernel, and its bandwidth estimate.

Concept: start a "seed" at every point and repeatedly move it to the mean of the points
within `bandwidth` of it. Each seed climbs to a local density mode; seeds that end within
`bandwidth` of each other are one cluster, and every point joins its nearest mode. The
number of clusters is not given: it falls out of the bandwidth. MML (minbert/methods/mml.py) uses
this to split its heads into "good" and "bad" groups by their moving-average losses.

Reference: Comaniciu & Meer, "Mean Shift: A Robust Approach Toward Feature Space Analysis",
IEEE TPAMI 24(5), 2002 (no arXiv id); the flat-kernel step is their Eq. 17 with g = 1 on
the window. Variant: exactly scikit-learn's `MeanShift` and `estimate_bandwidth`
(sklearn/cluster/_mean_shift.py, commit 041c80f, checked against scikit-learn 1.9.1), so
that sklearn is a live test oracle (tests/methods/test_meanshift.py):
  - the window is inclusive: |x − c| ≤ bw;
  - a seed stops when it moves by ≤ 1e-3·bw, or after max_iter moves (max_iter + 1 means);
  - centres are sorted by (points in the final window, centre value), both descending, and
    a centre within bw (inclusive) of an already-kept one is dropped. That sort order is
    also the order of the returned centres: most populous first, ties to the larger value;
  - labels are the nearest kept centre (cluster_all=True); ties go to the earlier centre.

One deliberate difference: bandwidth 0 gives one cluster per unique value. sklearn gets there
only by accident and sometimes misses: the mean of three copies of 0.1 is 0.10000000000000002,
whose zero-width window is empty, so sklearn drops that seed and may raise. Here bw = 0 is
handled directly, so identical inputs never crash.

Left out: n-D data, bin seeding, user-supplied seeds, cluster_all=False, n_samples
subsampling in estimate_bandwidth. This is for n ≲ a few thousand values: the windows are an
(n, n) mask, O(n²) memory and time per iteration.
"""

import numpy as np


def estimate_bandwidth(x, quantile: float = 0.3) -> float:
    """Mean over points of the distance to their k-th nearest neighbour, k = max(1, int(n·quantile)).

    As in sklearn, each point is its own first neighbour (distance 0), so for n ≤ 6 values the
    default quantile gives k = 1 and a bandwidth of exactly 0.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("minbert.methods.meanshift.estimate_bandwidth: x is empty")
    # Hint: k = max(1, int(n·quantile)); each point's distance to its k-th nearest neighbour (itself
    # counts as the first, at distance 0), averaged over the points.
    ### BEGIN SOLUTION meanshift
    k = max(1, int(x.size * quantile))                  # same rounding as sklearn: int() truncates
    dist = np.abs(x[:, None] - x[None, :])              # (n, n) pairwise distances, diagonal 0
    kth = np.sort(dist, axis=1)[:, k - 1]               # (n,) distance to the k-th neighbour, self = 1st
    return float(kth.mean())
    ### END SOLUTION


def _unique_value_clusters(x):
    """bw = 0: each distinct value is a cluster; order by (count, value) descending like sklearn."""
    values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    order = np.lexsort((-values, -counts))              # last key is primary: count desc, then value desc
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)                 # unique-value index -> cluster index
    return values[order], rank[inverse.reshape(-1)]


def mean_shift(x, bandwidth: float, max_iter: int = 300):
    """Cluster the 1-D values x; returns (centers (C,), labels (n,)) with labels[i] indexing centers.

    Seeds are all the points; see the module docstring for the exact sklearn semantics.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("minbert.methods.meanshift.mean_shift: x is empty")
    if not bandwidth >= 0:                              # also rejects NaN
        raise ValueError(f"minbert.methods.meanshift.mean_shift: bandwidth must be >= 0, got {bandwidth}")
    if bandwidth == 0:
        return _unique_value_clusters(x)

    # 1) Climb: all n seeds move together; `moving` marks seeds that have not stopped yet.
    #    c_new = mean{x_i : |x_i − c| ≤ bw}   (flat kernel)
    # Hint: the five steps of the module docstring: climb every seed to the mean of its window
    # (|x − c| ≤ bw) until it moves ≤ 1e-3·bw; rank the distinct centres by (count, value)
    # descending; drop centres within bw of a better one; label points by nearest centre.
    ### BEGIN SOLUTION meanshift
    stop_thresh = 1e-3 * bandwidth
    centers = x.copy()                                  # (n,) one seed per point
    intensity = np.zeros(x.size, dtype=np.int64)        # (n,) points in each seed's last window
    moving = np.ones(x.size, dtype=bool)
    for it in range(max_iter + 1):                      # sklearn allows max_iter + 1 means
        c = centers[moving]                             # (S,) seeds still climbing
        window = np.abs(x[None, :] - c[:, None]) <= bandwidth          # (S, n) inclusive
        count = window.sum(axis=1)                      # (S,)
        # A seed at a data point always has itself in the window, and a window mean lies
        # between its points, so no window is ever empty here (sklearn would drop the seed).
        new = np.where(window, x[None, :], 0.0).sum(axis=1) / count     # (S,)
        # 2) Stop a seed once it moves by ≤ 1e-3·bw (or at the last allowed iteration).
        done = (np.abs(new - c) <= stop_thresh) | (it == max_iter)
        idx = np.flatnonzero(moving)                    # (S,) positions of the climbing seeds
        centers[idx] = new
        intensity[idx] = count
        moving[idx[done]] = False
        if not moving.any():
            break

    # 3) One entry per distinct centre value. sklearn keys a dict by the centre, so a repeated
    #    value keeps the intensity of its last seed; walking seeds in order reproduces that.
    found = {}
    for center, n_in in zip(centers.tolist(), intensity.tolist()):
        found[center] = n_in
    ranked = sorted(found.items(), key=lambda item: (item[1], item[0]), reverse=True)
    cand = np.array([center for center, _ in ranked])   # (U,) by (intensity, centre) descending

    # 4) Non-maximum suppression: a kept centre removes every centre within bw (inclusive)
    #    that ranks below it; a removed centre removes nothing.
    near = np.abs(cand[:, None] - cand[None, :]) <= bandwidth          # (U, U)
    keep = np.ones(cand.size, dtype=bool)
    for i in range(cand.size):
        if keep[i]:
            keep[i + 1:] &= ~near[i, i + 1:]
    kept = cand[keep]                                   # (C,) already in sklearn's output order

    # 5) Every point joins its nearest kept centre (cluster_all=True).
    labels = np.abs(x[:, None] - kept[None, :]).argmin(axis=1)         # (n,)
    return kept, labels
    ### END SOLUTION
