"""Seed statistics for the two study runners: mean ± sd over seeds and Student's t-interval of a mean.

Both studies (bench.study, bench.mml_study) answer "does this method help?" with paired seeds: the
difference d_s = score(method, seed s) − score(baseline, seed s), and its 95% interval
d̄ ± t_{0.975, n−1} · s_d / √n (Student 1908; n seeds, n − 1 degrees of freedom). An interval that contains 0
is "inside the noise". scipy is not a runtime dependency, so t's quantile is computed here: the CDF through
the regularised incomplete beta function (continued fraction, Numerical Recipes §6.4), the quantile by
bisection. tests/studies/test_study.py checks both against scipy.stats.t.

A table compares many methods with one baseline, so some intervals exclude 0 by chance. Each paired difference
also carries its two-sided paired t-test p-value, p = 2·P(T_{n−1} ≥ |d̄| / (s_d / √n)), and `holm` adjusts the p of
one family (Holm 1979, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6:65-70):
sort p_(1) ≤ … ≤ p_(m); p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)). Rejecting where p̃ < α keeps the chance of
any false "helps" or "hurts" in the family below α, with no assumption on how the comparisons depend on each other
(they share the baseline). minbert's family: one column of a table (one metric, every method against the same
baseline). tests/studies/test_study.py checks p against scipy.stats.ttest_rel and holm against a brute-force run of
Holm's sequential procedure.

Two checks sit beside each t-based verdict. `sign_flip_pvalue`: the exact paired sign-flip (permutation) test
(Fisher 1935, §21), distribution-free: under "no effect" each d_s is as likely −d_s, so p is the share of the 2^n
sign patterns whose |Σ ε_s d_s| reaches the observed |Σ d_s|. Its smallest value is 2/2^n (`sign_flip_floor`):
0.25 with 3 seeds, 0.0625 with 5, so with 5 seeds or fewer it can never fall below 0.05, and every verdict rests on
the t-test's normality. `detectable_effect`: the true mean difference that the two-sided paired t-test at level α
finds with 80% power when the sd of the differences is the observed s_d: under δ, t follows the noncentral t with
n − 1 df and noncentrality λ = δ√n / σ (its CDF integrated here over the χ distribution of s_d / σ, Simpson's
rule); δ = λ* · s_d / √n, λ* solved by bisection. tests/studies/test_study_power.py checks both against scipy.

Left out: simultaneous (adjusted) intervals: the intervals stay the unadjusted 95% ones; the adjusted verdict is the
p̃ beside them.
"""

import functools
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


def sign_flip_pvalue(diffs: list[float]) -> float | None:
    """Exact two-sided paired sign-flip p: the share of the 2^n patterns ε ∈ {±1}^n with |Σ ε_s d_s| ≥ |Σ d_s|
    (ties within 1e-12 relative count as reaching it). None for fewer than 2 differences."""
    n = len(diffs)
    if n < 2:
        return None
    observed = abs(sum(diffs)) * (1 - 1e-12)
    hits = sum(abs(sum(d if (mask >> i) & 1 else -d for i, d in enumerate(diffs))) >= observed
               for mask in range(2 ** n))
    return hits / 2 ** n


def sign_flip_floor(n: int) -> float:
    """The smallest two-sided sign-flip p with n paired seeds: the observed pattern and its mirror, 2/2^n."""
    return 2 / 2 ** n


def _normal_sf(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2))


def paired_t_power(noncentrality: float, df: int, alpha: float = 0.05) -> float:
    """P(|T| > t_{1−α/2, df}) where T = (Z + λ) / U, U = √(χ²_df / df): the two-sided t-test's power at
    noncentrality λ = δ√n / σ. Integrated over U's density ∝ u^{df−1} e^{−df·u²/2} on [0, 12] (Simpson), with
    steps fine enough for the rejection probability, which changes on a scale of 1/c in u."""
    c = t_quantile(1 - alpha / 2, df)
    steps = 2 * max(1000, math.ceil(120 * c))
    h = 12 / steps
    # U's density: 2 (df/2)^{df/2} / Γ(df/2) u^{df−1} e^{−df u²/2}
    log_norm = math.log(2) + (df / 2) * math.log(df / 2) - math.lgamma(df / 2)
    total = 0.0
    for i in range(steps + 1):
        u = i * h
        if u == 0:   # u^{df−1} at 0: 1 for df = 1, else 0
            density = math.exp(log_norm) if df == 1 else 0.0
        else:
            density = math.exp(log_norm + (df - 1) * math.log(u) - df * u * u / 2)
        reject = _normal_sf(c * u - noncentrality) + _normal_sf(c * u + noncentrality)   # P(T > c) + P(T < −c)
        total += (1 if i in (0, steps) else 4 if i % 2 else 2) * density * reject
    return total * h / 3


@functools.lru_cache(maxsize=None)
def detectable_noncentrality(n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """λ* with paired_t_power(λ*, n − 1, alpha) = power (bisection): the smallest detectable δ is λ* · s_d / √n."""
    lo, hi = 0.0, 1e3
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if paired_t_power(mid, n - 1, alpha) < power else (lo, mid)
    return (lo + hi) / 2


def detectable_effect(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The mean difference a two-sided paired t-test at alpha detects with this power when the differences' sd
    is `sd` (the observed s_d taken as the truth): λ* · sd / √n."""
    return detectable_noncentrality(n, alpha, power) * sd / math.sqrt(n)


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
            "p": paired_t_pvalue(diffs), "p_sign_flip": sign_flip_pvalue(diffs), "sd": mean_sd(diffs)[1]}


def bootstrap_difference(observed: float, resampled: list[float], confidence: float = 0.95) -> dict:
    """A paired bootstrap comparison: the observed difference, the percentile interval of its resampled values
    (Efron & Tibshirani 1993, §13.3), and a two-sided bootstrap p, 2 · min(share ≤ 0, share ≥ 0), capped at 1."""
    ordered, r = sorted(resampled), len(resampled)
    low = ordered[math.floor((1 - confidence) / 2 * (r - 1))]
    high = ordered[math.ceil((1 + confidence) / 2 * (r - 1))]
    p = min(1.0, 2 * min(sum(x <= 0 for x in ordered), sum(x >= 0 for x in ordered)) / r)
    return {"mean": observed, "low": low, "high": high, "p": p, "resamples": r}


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
    """"0.046 higher (p 0.0035; sign-flip p 0.0625)": the Holm-adjusted p, its verdict at 0.05 (holm_verdict), the
    unadjusted p, and the exact sign-flip p beside it (sign_flip_pvalue)."""
    verdict = holm_verdict(d)
    if verdict is None:
        return "–"
    return f"{d['p_holm']:.3f} {verdict} (p {d['p']:.4f}; sign-flip p {sign_flip_pvalue(d['values']):.4f})"


def sign_flip_note(n: int) -> str:
    """The caption sentence that says what the sign-flip p beside each verdict can and cannot show."""
    floor = sign_flip_floor(n)
    return (f"Sign-flip p: the exact paired sign-flip test over all 2^{n} = {2 ** n} sign patterns of the {n} seeds' "
            f"differences, which assumes no normality; its smallest possible value is 2/2^{n} = {floor:.4g}"
            + (", so it can never fall below 0.05 here: every \"higher\" or \"lower\" rests on the t-test's normality."
               if floor >= 0.05 else "."))


def format_power(d: dict | None, n: int, family: int, digits: int = 4) -> str:
    """"0.0061 / 0.0112": the |Δ| that the paired t-test detects with 80% power at 0.05 (one comparison), then at
    0.05 / family (what the smallest p of a Holm family must beat), taking the observed s_d as the true sd."""
    if not d or d.get("sd") is None or n < 2:
        return "–"
    return f"{detectable_effect(d['sd'], n):.{digits}f} / {detectable_effect(d['sd'], n, 0.05 / family):.{digits}f}"


def power_note(n: int, family: int) -> str:
    """The caption of a power table: what its two numbers are, and their multiples of s_d."""
    if n < 2:
        return "80% power: not computed; one seed has no spread of paired differences to compute it from."
    k1 = detectable_noncentrality(n) / math.sqrt(n)
    k2 = detectable_noncentrality(n, 0.05 / family) / math.sqrt(n)
    return (f"80% power: the smallest true |Δ| that the two-sided paired t-test over these {n} seeds detects with "
            f"probability 0.8, taking each row's observed sd of the paired differences (s_d) as the true one "
            f"(noncentral t, {n - 1} df): first at 0.05 for one comparison ({k1:.2f} · s_d), then at 0.05/{family}, "
            f"which the smallest p of a Holm family of {family} must beat ({k2:.2f} · s_d). A true effect smaller "
            "than these was more likely to be read \"noise\" than not.")


def format_mean_sd(mean: float, sd: float | None, digits: int = 4) -> str:
    """"0.7012 ± 0.0049"; only the mean where there is no sd (one seed)."""
    return f"{mean:.{digits}f}" + (f" ± {sd:.{digits}f}" if sd is not None else "")


def format_bootstrap(b: dict, floor_note: str = "") -> str:
    """"[-0.0012, +0.0034], p 0.004": bootstrap_difference's percentile interval and p; where no resample crossed 0,
    "p < 2/resamples" (the smallest p it can give) followed by `floor_note`."""
    p = f"p {b['p']:.3f}" if b["p"] > 0 else f"p < {2 / b['resamples']:.3f}{floor_note}"
    return f"[{b['low']:+.4f}, {b['high']:+.4f}], {p}"


def format_difference(d: dict | None, digits: int = 4) -> str:
    """"+0.0051 [-0.0043, +0.0144] (noise)"; only the mean where there is no interval; "–" for none."""
    if not d:
        return "–"
    if d["low"] is None or d["low"] != d["low"]:   # None or nan: no interval
        return f"{d['mean']:+.{digits}f}"
    mark = " (noise)" if d["inside_noise"] else ""
    return f"{d['mean']:+.{digits}f} [{d['low']:+.{digits}f}, {d['high']:+.{digits}f}]{mark}"
