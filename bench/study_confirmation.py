"""The multitask study's confirmation family (docs/studies.md), from committed records only.

bench/results/study_controls/PLAN.md fixed, before any of its results existed, four claims that seeds 4-5 of the
exploratory set (bench/results/study, seeds 1-5, Zen 5 bf16) resolved after its 3-seed table had been read, and
the test that confirms them on fresh seeds 6-8 (bench/results/study_controls, Zen 3 fp32): each claim's paired
difference from the baseline, a two-sided paired t-test over the seeds, Holm-adjusted over the four (one family),
confirmed where the sign is the exploratory one and the adjusted p < 0.05. Beside each: the exact sign-flip p (its
floor with 3 seeds is 2/2^3 = 0.25), and the power the fresh test had to confirm the exploratory Δ if it were the
true effect, with the fresh seeds' sd of the differences (noncentral t; at 0.05/4, Holm's first step, and at 0.05,
Holm's last). Writes bench/results/study_controls/confirmation.md and prints it.

    python bench/study_confirmation.py
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from anywhere
from minbert.core.report import markdown_table  # noqa: E402
from minbert.tools.seed_statistics import add_holm, format_difference, paired_difference, paired_t_power  # noqa: E402
from minbert.tools.seed_statistics import sign_flip_floor  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# (configuration, metric, what the exploratory set said) as PLAN.md lists them
CLAIMS = [("head_pretraining", "overall", "+0.0106, Holm p 0.046"),
          ("head_pretraining", "sst_acc", "+0.0227, Holm p 0.013"),
          ("concat", "para_acc", "+0.0134, Holm p 0.005"),
          ("mnr", "para_acc", "+0.0120, Holm p 0.042")]


def per_seed(table: dict, name: str, metric: str) -> dict:
    row = table["configurations"][name]
    return dict(zip(row["seeds"], row["scores"][metric]["values"]))


def confirmation(exploratory: dict, fresh: dict) -> list[dict]:
    """One row per claim: the exploratory Δ (its seeds), the fresh Δ with its interval and Holm p over the family."""
    rows = []
    for name, metric, said in CLAIMS:
        mine, base = per_seed(fresh, name, metric), per_seed(fresh, "baseline", metric)
        seeds = sorted(set(mine) & set(base))
        d = paired_difference([mine[s] for s in seeds], [base[s] for s in seeds])
        before = exploratory["configurations"][name]["difference"][metric]["mean"]
        rows.append({"name": name, "metric": metric, "said": said, "before": before, "seeds": seeds, "d": d})
    add_holm([r["d"] for r in rows])
    for r in rows:
        same_sign = (r["d"]["mean"] > 0) == (r["before"] > 0)
        r["verdict"] = "confirmed" if same_sign and r["d"]["p_holm"] < 0.05 else "not confirmed"
        n = len(r["seeds"])   # power against the exploratory Δ, taken as the truth, with the fresh sd
        lam = abs(r["before"]) * n ** 0.5 / r["d"]["sd"]
        r["power"] = {"first": paired_t_power(lam, n - 1, 0.05 / len(rows)), "last": paired_t_power(lam, n - 1, 0.05)}
    return rows


def main() -> str:
    with open(os.path.join(RESULTS, "study", "table.json")) as f:
        exploratory = json.load(f)
    with open(os.path.join(RESULTS, "study_controls", "table.json")) as f:
        fresh = json.load(f)
    rows = confirmation(exploratory, fresh)
    m = fresh["machine"]
    md = ("# Confirmation of the exploratory verdicts on fresh seeds (the family fixed in PLAN.md)\n\n"
          f"Exploratory: `bench/results/study` (seeds 1-5). Fresh: `bench/results/study_controls` (seeds "
          f"{rows[0]['seeds']}, {m['cpu']}, native bf16: {m['native_bf16']}, torch {m['torch']}). Δ: paired difference "
          "from the baseline of the same set, mean [95% t-interval over seeds]; Holm over the 4 claims; confirmed "
          "where the sign is the exploratory one and the Holm-adjusted p < 0.05. Sign-flip p: the exact paired "
          f"sign-flip test over the {len(rows[0]['seeds'])} seeds, which assumes no normality; its smallest possible "
          f"value is {sign_flip_floor(len(rows[0]['seeds'])):.2f}, so it could not have confirmed anything. Power: the "
          "chance that this test confirms the claim if the exploratory Δ were the true effect and the fresh seeds' sd of "
          "the differences the true sd (noncentral t), at 0.05/4 (Holm's first step: this claim alone true) and at "
          "0.05 (Holm's last step: all four true). Where the power is below 0.5, \"not confirmed\" was the likelier "
          "outcome even if the effect is real: it means \"not shown\", not \"shown absent\".\n\n"
          + markdown_table([{"claim": f"{r['name']} − baseline, {r['metric']}", "exploratory (seeds 1-5)": r["said"],
                             "fresh Δ [95% CI]": format_difference(r["d"]), "p": f"{r['d']['p']:.4f}",
                             "Holm p": f"{r['d']['p_holm']:.3f}", "sign-flip p": f"{r['d']['p_sign_flip']:.2f}",
                             "power at 0.05/4 / 0.05": f"{r['power']['first']:.2f} / {r['power']['last']:.2f}",
                             "verdict": r["verdict"]} for r in rows],
                           ["claim", "exploratory (seeds 1-5)", "fresh Δ [95% CI]", "p", "Holm p", "sign-flip p",
                            "power at 0.05/4 / 0.05", "verdict"]) + "\n")
    with open(os.path.join(RESULTS, "study_controls", "confirmation.md"), "w") as f:
        f.write(md)
    print(md)
    return md


if __name__ == "__main__":
    main()
