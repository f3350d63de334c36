"""The multitask study's confirmations (docs/studies.md), each against the plan committed before its runs.

1. bench/results/study_controls/PLAN.md: four claims that seeds 4-5 of the exploratory set (bench/results/study, seeds
   1-5, Zen 5 bf16) resolved, tested on fresh seeds 6-8 (Zen 3 fp32): paired difference from the baseline, two-sided
   paired t over the seeds, Holm over the four, confirmed where the sign is the exploratory one and the adjusted
   p < 0.05; beside it the exact sign-flip p and the power the test had. Writes study_controls/confirmation.md.
2. bench/results/study_confirmation/PLAN.md: the claims again at the seed counts a power calculation asked for (seeds
   9-22, one machine and precision, each run scored at its final epoch), in two Holm families: the three confirmatory
   claims, and PCGrad and GradVac against their equal-update control. Each claim: the planned power, Δ with its
   95% t-interval over seeds, its seed × example bootstrap interval (bench/seed_example_bootstrap.py), p,
   Holm p, sign-flip p, the power at the sd the new seeds show, the verdict. Writes study_confirmation/confirmation.md.

    python bench/study_confirmation.py                       # both pages, from the committed records
    python bench/study_confirmation.py --collect RES_A RES_B # first: the plan's two --results_dir folders merged into
                                                             # bench/results/study_confirmation (runs/, commands.txt,
                                                             # machine.json), its tables rewritten (--tables_only)
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from anywhere
from minbert.core.export import load_outputs  # noqa: E402
from minbert.core.report import markdown_table  # noqa: E402
from bench import study  # noqa: E402
from bench.seed_example_bootstrap import scores_of, seed_example_bootstrap  # noqa: E402
from bench.seed_statistics import add_holm, bootstrap_difference, format_difference, paired_difference  # noqa: E402
from bench.seed_statistics import format_power, holm_verdict, paired_t_power, sign_flip_floor  # noqa: E402
from bench.study_plan import inputs as plan_inputs  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# (configuration, metric) as study_controls/PLAN.md lists them; what the exploratory set said is read from its table
CLAIMS = [("head_pretraining", "overall"), ("head_pretraining", "sst_acc"), ("concat", "para_acc"), ("mnr", "para_acc")]

# study_confirmation/PLAN.md, as committed before its runs: (id, configuration, against, metric, seeds); the planned δ
# and σ are the plan's inputs unrounded (bench/study_plan.py on seeds 6-8), not its table's 4-decimal cells
PLAN_SEEDS = list(range(9, 23))
CONFIRMATORY = [("C1", "head_pretraining", "baseline", "sst_acc", 6),
                ("C2", "concat", "baseline", "para_acc", 14),
                ("C3", "mnr", "baseline", "para_acc", 10)]
EQUAL_UPDATES = [("E1", "pcgrad", "baseline_every_task", "overall", 5),
                 ("E2", "gradvac", "baseline_every_task", "overall", 5)]
SECONDARY = [("head_pretraining", "baseline", "overall", 6), ("baseline_every_task", "baseline", "overall", 5),
             ("pcgrad", "baseline", "overall", 5), ("gradvac", "baseline", "overall", 5)]
CONFIGS = ["baseline", "concat", "mnr", "head_pretraining", "baseline_every_task", "pcgrad", "gradvac"]
SEEDS_PER_CONFIG = {"mnr": 10, "head_pretraining": 6, "baseline_every_task": 5, "pcgrad": 5, "gradvac": 5}
# The plan's budget, with amendment 1's --amp off (fp32 forced: the machine changed to one with native bf16)
BUDGET = ["--model", "minilm-l6", "--pooling", "mean", "--lr", "1e-4", "--head_lr", "1e-3", "--hidden_dropout_prob", "0.1",
          "--batch_size", "32", "--epochs", "2", "--sst_test", "none", "--para_test", "none", "--sts_test", "none",
          "--amp", "off"]


def per_seed(table: dict, name: str, metric: str) -> dict:
    row = table["configurations"][name]
    return dict(zip(row["seeds"], row["scores"][metric]["values"]))


def power(delta: float, sd: float, n: int, alpha: float) -> float:
    """The two-sided paired t-test's power over n seeds at alpha if delta were the true effect and sd the true sd."""
    return paired_t_power(abs(delta) * n ** 0.5 / sd, n - 1, alpha)


def confirmation(exploratory: dict, fresh: dict) -> list[dict]:
    """One row per claim: the exploratory Δ (its seeds), the fresh Δ with its interval and Holm p over the family."""
    rows = []
    for name, metric in CLAIMS:
        mine, base = per_seed(fresh, name, metric), per_seed(fresh, "baseline", metric)
        seeds = sorted(set(mine) & set(base))
        d = paired_difference([mine[s] for s in seeds], [base[s] for s in seeds])
        was = exploratory["configurations"][name]["difference"][metric]
        before, said = was["mean"], f"{was['mean']:+.4f}, Holm p {was['p_holm']:.3f}"
        rows.append({"name": name, "metric": metric, "said": said, "before": before, "seeds": seeds, "d": d})
    add_holm([r["d"] for r in rows])
    for r in rows:
        same_sign = (r["d"]["mean"] > 0) == (r["before"] > 0)
        r["verdict"] = "confirmed" if same_sign and r["d"]["p_holm"] < 0.05 else "not confirmed"
        n = len(r["seeds"])   # power against the exploratory Δ, taken as the truth, with the fresh sd
        r["power"] = {"first": power(r["before"], r["d"]["sd"], n, 0.05 / len(rows)),
                      "last": power(r["before"], r["d"]["sd"], n, 0.05)}
    return rows


def first_confirmation(write: bool = True) -> str:
    """study_controls/confirmation.md: the first confirmation (seeds 6-8), as its PLAN.md fixed it."""
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
          "the differences the true sd (noncentral t), at 0.05/4 (Holm's first step: this claim alone true) and, at "
          "most, at 0.05 (Holm's last step, which a claim reaches only if all four are true: an upper bound). "
          "Where the power is below 0.5, \"not confirmed\" was the likelier "
          "outcome even if the effect is real: it means \"not shown\", not \"shown absent\".\n\n"
          + markdown_table([{"claim": f"{r['name']} − baseline, {r['metric']}", "exploratory (seeds 1-5)": r["said"],
                             "fresh Δ [95% CI]": format_difference(r["d"]), "p": f"{r['d']['p']:.4f}",
                             "Holm p": f"{r['d']['p_holm']:.3f}", "sign-flip p": f"{r['d']['p_sign_flip']:.2f}",
                             "power at 0.05/4 / at most, at 0.05":
                                 f"{r['power']['first']:.2f} / {r['power']['last']:.2f}",
                             "verdict": r["verdict"]} for r in rows],
                           ["claim", "exploratory (seeds 1-5)", "fresh Δ [95% CI]", "p", "Holm p", "sign-flip p",
                            "power at 0.05/4 / at most, at 0.05", "verdict"]) + "\n")
    if write:
        with open(os.path.join(RESULTS, "study_controls", "confirmation.md"), "w") as f:
            f.write(md)
    return md


# ---------------------------------------------------------------------- the second confirmation


def compare(table: dict, runs: str, name: str, against: str, metric: str, n: int) -> dict:
    """name − against on `metric` over the plan's first n seeds: the t-based difference and its seed × example
    bootstrap interval, from the committed per-seed scores and outputs.pt."""
    mine, base = per_seed(table, name, metric), per_seed(table, against, metric)
    seeds = PLAN_SEEDS[:n]
    missing = [s for s in seeds if s not in mine or s not in base]
    if missing:
        raise SystemExit(f"{name} − {against}: seeds {missing} have no record yet; the plan needs seeds {seeds[0]}-{seeds[-1]}")
    d = paired_difference([mine[s] for s in seeds], [base[s] for s in seeds])
    outputs = [[load_outputs(os.path.join(runs, c, f"seed{s}")) for s in seeds] for c in (name, against)]
    for c, outs, recorded in ((name, outputs[0], mine), (against, outputs[1], base)):
        for s, got in zip(seeds, scores_of(outs)):   # the outputs must be the scored epoch's
            if abs(got[metric] - recorded[s]) > 6e-5:
                raise SystemExit(f"{runs}/{c}/seed{s}: outputs.pt gives {metric} {got[metric]:.4f}, its record "
                                 f"{recorded[s]:.4f}: the outputs are not the scored epoch's")
    d["boot"] = bootstrap_difference(d["mean"], seed_example_bootstrap(*outputs)[metric].tolist())
    d["seeds"] = seeds
    return d


def cells(d: dict) -> dict:
    b = d["boot"]
    return {"n": str(len(d["seeds"])), "Δ [95%, seeds]": format_difference(d),
            "[95%, seeds × dev examples]": f"[{b['low']:+.4f}, {b['high']:+.4f}]", "p": f"{d['p']:.4f}",
            "sign-flip p": f"{d['p_sign_flip']:.4f}"}


def second_confirmation(write: bool = True) -> str:
    """study_confirmation/confirmation.md: each claim of its PLAN.md against the plan."""
    folder = os.path.join(RESULTS, "study_confirmation")
    with open(os.path.join(folder, "table.json")) as f:
        table = json.load(f)
    runs = os.path.join(folder, "runs")
    planned = {(r["config"], r["metric"]): r for r in plan_inputs()}
    c_rows = [{"id": i, "name": n, "against": a, "metric": m, "delta": planned[n, m]["delta"],
               "sd": planned[n, m]["sd"], "d": compare(table, runs, n, a, m, k)} for i, n, a, m, k in CONFIRMATORY]
    e_rows = [{"id": i, "name": n, "against": a, "metric": m, "d": compare(table, runs, n, a, m, k)}
              for i, n, a, m, k in EQUAL_UPDATES]
    for family in (c_rows, e_rows):
        add_holm([r["d"] for r in family])
    c_table = []
    for r in c_rows:
        d, n, fam = r["d"], len(r["d"]["seeds"]), len(c_rows)
        verdict = "confirmed" if d["mean"] > 0 and d["p_holm"] < 0.05 else "not confirmed"
        c_table.append({"claim": f"{r['id']} {r['name']} − {r['against']}, {r['metric']}",
                        f"planned power at 0.05/{fam} / 0.05": f"{power(r['delta'], r['sd'], n, 0.05 / fam):.2f} / "
                                                              f"{power(r['delta'], r['sd'], n, 0.05):.2f}",
                        **cells(d), "Holm p": f"{d['p_holm']:.3f}",
                        f"power at the new sd, 0.05/{fam} / 0.05": f"{power(r['delta'], d['sd'], n, 0.05 / fam):.2f} / "
                                                                  f"{power(r['delta'], d['sd'], n, 0.05):.2f}",
                        "verdict": verdict})
    e_table = []
    for r in e_rows:
        d = r["d"]
        e_table.append({"comparison": f"{r['id']} {r['name']} − {r['against']}, {r['metric']}", **cells(d),
                        "Holm p": f"{d['p_holm']:.3f}", "verdict": holm_verdict(d)})
    family = len(table["configurations"]) - 1   # table.md's Holm family: each configuration against the baseline
    s_table = []
    for n, a, m, k in SECONDARY:
        d = compare(table, runs, n, a, m, k)
        s_table.append({"comparison": f"{n} − {a}, {m} (exploratory)", **cells(d),
                        f"80% power at Δ of (0.05 / 0.05/{family})": format_power(d, k, family)})
    mach = table["machine"]
    runs_in_all = sum(len(c["seeds"]) for c in table["configurations"].values())
    md = ("# The second confirmation, against its plan (PLAN.md, committed before its runs)\n\n"
          f"Seeds {PLAN_SEEDS[0]}-{PLAN_SEEDS[-1]} (each claim the first N of them, N from the plan's power calculation), "
          f"{machine_words(mach)}, native bf16: {mach['native_bf16']} (fp32), torch {mach['torch']}: every one of the "
          f"{runs_in_all} runs with `--amp off`, over three sittings (AMENDMENT.md; which runs in which sitting: "
          "PROGRESS.md and commands.txt); every run scored at its final epoch, fixed in advance. "
          "Δ: paired difference on the same seed, mean [95% t-interval; unit: seeds, n − 1 df]; beside it the seed × example bootstrap (2000 resamples of the seeds and of each task's dev "
          "examples together; percentile 95%; unit: seeds and dev examples), p: the two-sided paired t p, Holm within "
          "each family, the exact sign-flip p. Planned power: at the plan's δ and σ (seeds 6-8, unrounded); power at "
          "the new sd: the same δ with the sd these seeds show; each at 0.05/3 (Holm's first step) and, at most, at "
          "0.05 (Holm's last step, reached only if all three claims are real: an upper bound).\n\n"
          "## Confirmatory family (Holm over 3): confirmed where Δ > 0 and Holm p < 0.05\n\n"
          + markdown_table(c_table, list(c_table[0])) + "\n\n"
          "## Equal-update family (Holm over 2): surgery against the same three task batches per update, summed\n\n"
          + markdown_table(e_table, list(e_table[0])) + "\n\n"
          "## Secondary, descriptive (no family; exploratory)\n\n"
          "80% power: the |Δ| the paired t-test over the row's n seeds detects with probability 0.8 at its sd (at "
          f"0.05, and at 0.05/{family}, table.md's Holm family of each column). The first row is the claim the "
          "plan dropped before any run, reported as it asked: with the |Δ| those seeds could detect.\n\n"
          + markdown_table(s_table, list(s_table[0])) + "\n\n"
          "\"Not confirmed\" means \"not shown at the stated power\", not \"shown absent\".\n")
    if write:
        with open(os.path.join(folder, "confirmation.md"), "w") as f:
            f.write(md)
    return md


def machine_words(mach: dict) -> str:
    """The machine as the records name it: the CPU's family and model where machine.json carries them (study_table.
    machine() records them), else the name alone, saying that the records do not carry more."""
    if "cpu_family" in mach and "cpu_model" in mach:
        return f"{mach['cpu']} family {mach['cpu_family']}, model {mach['cpu_model']} (recorded with the runs)"
    return (f"{mach['cpu']} (the runs' records, table.json and commands.txt, name the CPU only so: they do not "
            "record its family and model, which AMENDMENT.md and PROGRESS.md, written by hand at each sitting, give)")


def merged_history(committed: str, sittings: list[str]) -> str:
    """commands.txt after a collection: every earlier sitting's lines as committed, then each new sitting's lines
    that are not already there (a sitting's results folders hold only its own commands). A line already committed is
    not written again: a run restarted by the same command after its line was committed appears once."""
    seen = set(committed.splitlines())
    new = [line for text in sittings for line in text.splitlines() if line not in seen]
    return committed + "".join(line + "\n" for line in new)


def collect(sources: list[str]) -> None:
    """The plan's --results_dir folders merged into bench/results/study_confirmation, then its tables rewritten."""
    folder = os.path.join(RESULTS, "study_confirmation")
    history, header = [], None
    for source in sources:
        for config in os.listdir(os.path.join(source, "runs")):
            for seed in os.listdir(os.path.join(source, "runs", config)):
                dest = os.path.join(folder, "runs", config, seed)
                os.makedirs(dest, exist_ok=True)
                for name in study.SMALL_FILES:
                    shutil.copy(os.path.join(source, "runs", config, seed, name), os.path.join(dest, name))
        with open(os.path.join(source, "commands.txt")) as f:
            history.append(f.read())
        with open(os.path.join(source, "machine.json")) as f:
            header = header or json.load(f)
    committed = os.path.join(folder, "commands.txt")
    before = open(committed).read() if os.path.isfile(committed) else ""
    with open(committed, "w") as f:
        f.write(merged_history(before, history))
    header.update(configs=CONFIGS, seeds=PLAN_SEEDS, fewer_seeds=SEEDS_PER_CONFIG)
    with open(os.path.join(folder, "machine.json"), "w") as f:
        json.dump(header, f, indent=1)
    with tempfile.TemporaryDirectory() as out:
        summary = study.main(["--tables_only", "--select_epoch", "last", "--configs", ",".join(CONFIGS),
                              "--seeds", ",".join(map(str, PLAN_SEEDS)),
                              "--seeds_per_config", ",".join(f"{c}={n}" for c, n in SEEDS_PER_CONFIG.items()),
                              "--out_dir", out, "--results_dir", folder, "--", *BUDGET])
    if summary is None:
        raise SystemExit("the tables could not be rewritten: a planned run has no record yet (see above)")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--collect", nargs="+", metavar="RESULTS_DIR", help="merge these --results_dir folders first")
    args = p.parse_args(argv)
    if args.collect:
        collect(args.collect)
    print(first_confirmation())
    if os.path.isfile(os.path.join(RESULTS, "study_confirmation", "table.json")):
        print(second_confirmation())


if __name__ == "__main__":
    main()
