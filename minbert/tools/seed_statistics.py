"""Seed statistics for the two study runners: mean ± sd over seeds and Student's t-interval of a mean.

Both studies (minbert.tools.study, minbert.tools.mml_study) answer "does this method help?" with paired seeds: the
difference d_s = score(method, seed s) − score(baseline, seed s), and its 95% interval
d̄ ± t_{0.975, n−1} · s_d / √n (Student 1908; n seeds, n − 1 degrees of freedom). An interval that contains 0
is "inside the noise". scipy is not a runtime dependency, so t's quantile is computed here: the CDF through
the regularised incomplete beta function (continued fraction, Numerical Recipes §6.4), the quantile by
bisection. tests/tools/test_study.py checks both against scipy.stats.t.

A table compares many methods with one baseline, so some intervals exclude 0 by chance. Each paired difference
also carries its two-sided paired t-test p-value, p = 2·P(T_{n−1} ≥ |d̄| / (s_d / √n)), and `holm` adjusts the p of
one family (Holm 1979, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6:65-70):
sort p_(1) ≤ … ≤ p_(m); p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)). Rejecting where p̃ < α keeps the chance of
any false "helps" or "hurts" in the family below α, with no assumption on how the comparisons depend on each other
(they share the baseline). minbert's family: one column of a table (one metric, every method against the same
baseline). tests/tools/test_study.py checks p against scipy.stats.ttest_rel and holm against a brute-force run of
Holm's sequential procedure.

Left out: non-parametric (bootstrap) intervals, and simultaneous (adjusted) intervals: the intervals stay the
unadjusted 95% ones; the adjusted verdict is the p̃ beside them.
"""

import math


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d, c = 1 + num * d, 1 + num / c
            d, c = 1 / (d if abs(d) > tiny else tiny), (c if abs(c) > tiny else tiny)
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T ≤ t) for Student's t with df degrees of freedom. Two exact forms, each used where its x is small
    (no cancellation): tail P(T > |t|) = ½ I_{df/(df+t²)}(df/2, ½); centre P(|T| < |t|) = I_{t²/(df+t²)}(½, df/2)."""
    t2 = t * t
    if t2 < df:   # |t| small: the centre form
        centre = betainc(0.5, df / 2, t2 / (df + t2))
        return 0.5 + 0.5 * centre if t >= 0 else 0.5 - 0.5 * centre
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t2))
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t (bisection on t_cdf; exact to ~1e-12)."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def mean_sd(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample sd (n − 1); the sd of one value is undefined: None, shown as no "± sd" in the table."""
    n = len(values)
    mean = sum(values) / n
    return mean, (math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None)


def t_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): mean ± t_{(1+c)/2, n−1} · sd / √n; (mean, nan, nan) for one value."""
    mean, sd = mean_sd(values)
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = t_quantile((1 + confidence) / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return mean, mean - half, mean + half


def paired_t_pvalue(diffs: list[float]) -> float | None:
    """Two-sided p of the paired t-test that the mean difference is 0: 2·P(T ≤ −|t|), t = d̄ / (s_d / √n),
    n − 1 df. None for one value; 0 (or 1 if d̄ = 0) when every difference is the same (s_d = 0)."""
    n = len(diffs)
    if n < 2:
        return None
    mean, sd = mean_sd(diffs)
    if sd == 0:
        return 1.0 if mean == 0 else 0.0
    t = mean / (sd / math.sqrt(n))
    return min(1.0, 2 * t_cdf(-abs(t), n - 1))     # the lower tail: no cancellation for large |t|


def holm(pvalues: list[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values of one family, in the input order (None entries are not in the family):
    p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)) over the p sorted ascending."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m, running, out = len(order), 0.0, [None] * len(pvalues)
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))    # (m − j + 1)·p_(j) with j = rank + 1
        out[i] = running
    return out


def paired_difference(values: list[float], baseline: list[float]) -> dict:
    """The paired difference of two lists of per-seed scores (same seed order): mean, 95% interval, whether
    the interval contains 0 ("inside_noise"), and the paired t-test's p. One seed has no interval: low, high,
    inside_noise and p are None. The table writers add "p_holm", p adjusted over the table's column (`holm`)."""
    diffs = [v - b for v, b in zip(values, baseline, strict=True)]
    if len(diffs) < 2:
        return {"mean": diffs[0], "low": None, "high": None, "values": diffs, "inside_noise": None, "p": None}
    mean, low, high = t_interval(diffs)
    return {"mean": mean, "low": low, "high": high, "values": diffs, "inside_noise": not (low > 0 or high < 0),
            "p": paired_t_pvalue(diffs)}


def add_holm(differences: list[dict | None]) -> None:
    """Holm-adjust the "p" of one family of paired_difference dicts in place, as "p_holm" (None where no p)."""
    present = [d for d in differences if d]
    for d, adjusted in zip(present, holm([d.get("p") for d in present])):
        d["p_holm"] = adjusted


def holm_verdict(d: dict | None, alpha: float = 0.05) -> str | None:
    """"higher" / "lower" than the baseline where the Holm-adjusted p < alpha, else "noise"; None without a p."""
    if not d or d.get("p_holm") is None:
        return None
    return "noise" if d["p_holm"] >= alpha else ("higher" if d["mean"] > 0 else "lower")


def format_holm(d: dict | None) -> str:
    """"0.046 higher (p 0.0035)": the Holm-adjusted p, its verdict at 0.05 (holm_verdict), the unadjusted p."""
    verdict = holm_verdict(d)
    return "–" if verdict is None else f"{d['p_holm']:.3f} {verdict} (p {d['p']:.4f})"


def format_mean_sd(mean: float, sd: float | None, digits: int = 4) -> str:
    """"0.7012 ± 0.0049"; only the mean where there is no sd (one seed)."""
    return f"{mean:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd is not None else "")


def format_difference(d: dict | None, digits: int = 4) -> str:
    """"+0.0051 [-0.0043, +0.0144] (noise)"; only the mean where there is no interval; "–" for none."""
    if not d:
        return "–"
    if d["low"] is None or d["low"] != d["low"]:   # None or nan: no interval
        return f"{d['mean']:+.{digits}f}"
    mark = " (noise)" if d["inside_noise"] else ""
    return f"{d['mean']:+.{digits}f} [{d['low']:+.{digits}f}, {d['high']:+.{digits}f}]{mark}"
