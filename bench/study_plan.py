"""The seed count of each claim of the pre-registered confirmation (bench/results/study_confirmation/PLAN.md).

Inputs, all from committed records of this machine and precision (AMD EPYC Zen 3, fp32): the fresh seeds 6-8 of
bench/results/study_controls, each run scored at its final epoch (the plan's selection rule). For each claim: δ, the
mean paired difference of those seeds (not the exploratory seeds 1-5: those effects were picked for being
significant, so they overstate), and σ, the sd of the paired differences. The seed count is the smallest n whose
two-sided paired t-test at α/m has 80% power against δ with σ the true sd (noncentral t, bench.seed_statistics.
paired_t_power: the repository's own power code, checked against scipy in tests/studies/test_study_power.py); α/m is
what the smallest p of a Holm family of m must beat (the claim alone true). Prints the table PLAN.md quotes.

    python bench/study_plan.py
"""

import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from anywhere
from minbert.core.report import markdown_table  # noqa: E402
from bench.seed_statistics import detectable_effect, mean_sd, paired_t_power  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
FRESH, FRESH_SEEDS = os.path.join(RESULTS, "study_controls", "runs"), (6, 7, 8)
# The four exploratory claims (bench/results/study_controls/PLAN.md), in that order.
CLAIMS = [("head_pretraining", "overall"), ("head_pretraining", "sst_acc"), ("concat", "para_acc"), ("mnr", "para_acc")]
POWER, MAX_SEEDS = 0.8, 60


def final_epoch(config: str, seed: int, metric: str, runs: str = FRESH) -> float:
    with open(os.path.join(runs, config, f"seed{seed}", "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return max(records, key=lambda r: r["epoch"])[metric]


def seeds_needed(delta: float, sd: float, alpha: float, power: float = POWER) -> int | None:
    """The smallest n (2..MAX_SEEDS) at which the two-sided paired t-test at alpha has this power; None beyond."""
    for n in range(2, MAX_SEEDS + 1):
        if paired_t_power(abs(delta) * math.sqrt(n) / sd, n - 1, alpha) >= power:
            return n
    return None


def inputs() -> list[dict]:
    rows = []
    for config, metric in CLAIMS:
        d = [final_epoch(config, s, metric) - final_epoch("baseline", s, metric) for s in FRESH_SEEDS]
        mean, sd = mean_sd(d)
        rows.append({"config": config, "metric": metric, "delta": mean, "sd": sd})
    return rows


def main() -> str:
    rows = inputs()
    table = []
    for r in rows:
        table.append({"claim": f"{r['config']} − baseline, {r['metric']}", "δ (seeds 6-8)": f"{r['delta']:+.4f}",
                      "σ (seeds 6-8)": f"{r['sd']:.4f}",
                      **{f"n at 0.05/{m}": str(seeds_needed(r["delta"], r["sd"], 0.05 / m) or f"> {MAX_SEEDS}")
                         for m in (4, 3)}})
    for r, cells in zip(rows, table):
        n = seeds_needed(r["delta"], r["sd"], 0.05 / 3)
        cells["power at n: 0.05/3 / 0.05"] = "–" if n is None else " / ".join(
            f"{paired_t_power(abs(r['delta']) * math.sqrt(n) / r['sd'], n - 1, a):.2f}" for a in (0.05 / 3, 0.05))
    md = markdown_table(table, list(table[0]))
    hp = rows[0]
    md += (f"\n\nhead_pretraining − baseline, overall at the issue's δ +0.005 with σ {hp['sd']:.4f}: "
           f"{seeds_needed(0.005, hp['sd'], 0.05 / 4)} seeds at 0.05/4; at the exploratory δ +0.0106: "
           f"{seeds_needed(0.0106, hp['sd'], 0.05 / 4)}.")
    # the equal-update family: no effect has been seen, so its seed count is the budget's; what it can detect
    with open(os.path.join(RESULTS, "study", "table.json")) as f:   # PCGrad − baseline, dev overall, seeds 1-5
        sd = json.load(f)["configurations"]["pcgrad"]["difference"]["overall"]["sd"]
    md += ("\n\nEqual-update family (2 comparisons, Holm): the |Δ| detectable with 80% power at 0.05/2 for an sd of the "
           f"paired differences of {sd:.4f} (PCGrad − baseline, seeds 1-5): " + ", ".join(f"{n} seeds {detectable_effect(sd, n, 0.025):.4f}" for n in (5, 6, 8)))
    print(md)
    return md


if __name__ == "__main__":
    main()
