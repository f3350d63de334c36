"""Grades the checks that sit beside every t-based verdict of the studies (bench.seed_statistics):
the paired t-test's power and the smallest effect it detects at 80% power, and the exact paired sign-flip p.

Oracles: scipy.stats.nct (the noncentral t: power of the two-sided t-test), scipy.stats.permutation_test with
permutation_type="samples" and every permutation (the exact paired sign-flip test). seed_statistics has no scipy.

Run: python -m pytest -q tests/studies/test_study_power.py   (offline, CPU, seconds)
"""

import math

import numpy as np
import pytest
import scipy  # scipy.stats and .integrate load at first use, not while pytest collects

from bench import seed_statistics as stats

MOD = "bench.seed_statistics"


def scipy_power(noncentrality, df, alpha):
    """Two-sided t-test power: P(T' > c) + P(T' < −c), T' noncentral t. scipy's nct gives nan far in the tail
    (λ ≈ 20 with 2 df); there scipy.integrate.quad integrates the same probability over U = √(χ²_df / df)."""
    c = scipy.stats.t.ppf(1 - alpha / 2, df)
    power = scipy.stats.nct.sf(c, df, noncentrality) + scipy.stats.nct.cdf(-c, df, noncentrality)
    if not math.isnan(power):
        return power
    u = scipy.stats.chi(df, scale=1 / math.sqrt(df))
    return scipy.integrate.quad(lambda x: u.pdf(x) * (scipy.stats.norm.sf(c * x - noncentrality)
                                                      + scipy.stats.norm.sf(c * x + noncentrality)), 0, 20, points=[1.0], limit=200)[0]


@pytest.mark.parametrize("df", [1, 2, 4, 9])
@pytest.mark.parametrize("noncentrality", [0.0, 0.7, 3.0, 6.5])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 8])
def test_power_of_the_two_sided_paired_t_test_matches_scipy_noncentral_t(df, noncentrality, alpha):
    got = stats.paired_t_power(noncentrality, df, alpha)
    want = scipy_power(noncentrality, df, alpha)
    assert got == pytest.approx(want, abs=1e-6), \
        f"{MOD}.paired_t_power(λ={noncentrality}, df={df}, α={alpha:.4g}) = {got:.6f}, scipy.stats.nct gives {want:.6f}"


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("family", [1, 4, 13])
def test_detectable_effect_has_80_percent_power_under_scipy(n, family):
    """The |Δ| the tables print is the one at which scipy's noncentral t gives the t-test 80% power."""
    sd, alpha = 0.0049, 0.05 / family
    delta = stats.detectable_effect(sd, n, alpha)
    power = scipy_power(delta * math.sqrt(n) / sd, n - 1, alpha)
    assert power == pytest.approx(0.8, abs=1e-5), \
        f"{MOD}.detectable_effect(sd {sd}, n {n}, α {alpha:.4g}) = {delta:.5f}, at which scipy's power is {power:.4f}, not 0.8"


@pytest.mark.parametrize("diffs", [[0.010, 0.020, -0.003], [0.011, -0.002, 0.015, 0.009, 0.012],
                                   [-0.02, -0.01, -0.03, -0.025, -0.015], [0.3, -0.2, 0.1, 0.05, -0.01, 0.02]])
def test_sign_flip_p_is_scipy_exact_paired_permutation_test(diffs):
    x = np.array(diffs)
    want = scipy.stats.permutation_test((x, np.zeros_like(x)), lambda a, b, axis: np.mean(a - b, axis=axis),
                                        permutation_type="samples", n_resamples=np.inf).pvalue
    got = stats.sign_flip_pvalue(diffs)
    assert got == pytest.approx(want, abs=1e-12), f"{MOD}.sign_flip_pvalue({diffs}) = {got}, scipy's exact test gives {want}"


@pytest.mark.parametrize("n", [3, 5, 6])
def test_a_steady_difference_reaches_the_sign_flip_floor_and_no_lower(n):
    """All differences of one sign: only the observed pattern and its mirror reach |Σ d|, p = 2/2^n. With 5 seeds or
    fewer that floor is at or above 0.0625, so the sign-flip test alone can never give p < 0.05."""
    steady = [0.01 + 0.001 * i for i in range(n)]
    assert stats.sign_flip_pvalue(steady) == pytest.approx(stats.sign_flip_floor(n)) == pytest.approx(2 / 2 ** n), \
        f"{MOD}.sign_flip_pvalue of {n} same-sign differences must be the floor 2/2^{n}"
    assert (stats.sign_flip_floor(n) >= 0.05) == (n <= 5), f"{MOD}.sign_flip_floor({n}) = {stats.sign_flip_floor(n)}"
