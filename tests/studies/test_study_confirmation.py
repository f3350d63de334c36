"""Grades bench/study_confirmation.py: --collect's commands.txt, the record of every command the plan ran over all
sittings (each sitting's --results_dir holds only its own commands, so a collection that wrote them alone would
drop the earlier sittings' lines from the committed file); and the second confirmation's page, computed from
synthetic records with planted effects, against scipy's paired t, Holm and noncentral-t power."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy
import torch

import bench.study_confirmation as confirmation
from bench.study_confirmation import merged_history
from test_study_power import scipy_power

EARLIER = "# sitting 1: A\nrun baseline seed9\n# sitting 1: B\nrun mnr seed9\n"


def test_collect_keeps_the_earlier_sittings_and_adds_each_new_line_once():
    this_sitting = ["# sitting 2: A\nrun baseline seed10\n", "# sitting 2: B\nrun mnr seed10\nrun mnr seed9\n"]
    got = merged_history(EARLIER, this_sitting)
    assert got.startswith(EARLIER), "study_confirmation.merged_history: the committed sittings' lines must stay first"
    assert got.splitlines()[4:] == ["# sitting 2: A", "run baseline seed10", "# sitting 2: B", "run mnr seed10"], \
        f"study_confirmation.merged_history: each new sitting's lines, once, after the committed ones; got {got!r}"


def test_collecting_the_same_sitting_twice_adds_nothing():
    assert merged_history(EARLIER, [EARLIER]) == EARLIER, \
        "study_confirmation.merged_history: lines already committed must not be written again"


# ------------------------------------------------------------------ the whole analysis, on planted effects
# Synthetic records in the plan's layout (two results folders, the plan's configurations and seed counts) with
# effects planted per claim; the page's numbers are checked against scipy on the same per-seed scores.


N_DEV = 48
# the planted per-seed shift of each configuration's score on one metric (0: as good as the baseline)
PLANTED = {"head_pretraining": ("sst_acc", 0.0), "concat": ("para_acc", 0.25), "mnr": ("para_acc", 0.0),
           "pcgrad": ("para_acc", -0.25), "gradvac": ("para_acc", 0.0)}


def synthetic_run(config: str, seed: int) -> tuple[dict, dict]:
    """outputs.pt's dev entries and the epoch-2 scores computed from them with numpy and scipy."""
    g = np.random.default_rng(1000 * seed + len(config))
    quality = {"sst_acc": 0.4, "para_acc": 0.1, "sts_pearson": 0.5}
    metric, shift = PLANTED.get(config, ("overall", 0.0))
    if metric in quality:
        quality[metric] += shift
    ids = {t: [f"{t}{i}" for i in range(N_DEV)] for t in ("sst", "para", "sts")}
    gold = {"sst": np.random.default_rng(1).integers(0, 5, N_DEV),
            "para": np.random.default_rng(2).integers(0, 2, N_DEV),
            "sts": np.random.default_rng(3).uniform(0, 5, N_DEV)}
    sst = g.normal(size=(N_DEV, 5))
    sst[np.arange(N_DEV), gold["sst"]] += 3 * quality["sst_acc"] + g.normal(0, 0.3)
    para = g.normal(size=N_DEV) + (4 * quality["para_acc"] + g.normal(0, 0.3)) * (2 * gold["para"] - 1)
    sts = np.clip(2.5 + quality["sts_pearson"] * (gold["sts"] - 2.5) + g.normal(0, 1, N_DEV), 0, 5)
    outputs = {"dev": {"sst": {"ids": ids["sst"], "outputs": torch.tensor(sst, dtype=torch.float32),
                               "labels": torch.tensor(gold["sst"])},
                       "para": {"ids": ids["para"], "outputs": torch.tensor(para, dtype=torch.float32),
                                "labels": torch.tensor(gold["para"])},
                       "sts": {"ids": ids["sts"], "outputs": torch.tensor(sts, dtype=torch.float32),
                               "labels": torch.tensor(gold["sts"])}}}
    f32 = {t: outputs["dev"][t]["outputs"].double().numpy() for t in ("sst", "para", "sts")}
    scores = {"sst_acc": float(np.mean(f32["sst"].argmax(-1) == gold["sst"])),
              "para_acc": float(np.mean((f32["para"] > 0) == gold["para"])),
              "sts_pearson": float(scipy.stats.pearsonr(f32["sts"], gold["sts"])[0])}
    scores["overall"] = (scores["sst_acc"] + scores["para_acc"] + (scores["sts_pearson"] + 1) / 2) / 3
    return outputs, {k: round(v, 4) for k, v in scores.items()}


def write_sitting(folder, configs: list[str]) -> dict:
    """One process's --results_dir: runs/CONFIG/seedN/{metrics.jsonl, outputs.pt}, machine.json, commands.txt."""
    recorded = {}
    for config in configs:
        for seed in confirmation.PLAN_SEEDS[:confirmation.SEEDS_PER_CONFIG.get(config, 14)]:
            outputs, scores = synthetic_run(config, seed)
            run = folder / "runs" / config / f"seed{seed}"
            run.mkdir(parents=True)
            torch.save(outputs, run / "outputs.pt")
            first = {**{k: v - 0.1 for k, v in scores.items()}, "epoch": 1}   # final-epoch selection keeps epoch 2
            (run / "metrics.jsonl").write_text(json.dumps(first) + "\n" + json.dumps({**scores, "epoch": 2}) + "\n")
            recorded[config, seed] = scores
    machine = {"cpu": "a test CPU", "cpus": 2, "native_bf16": False, "gpu": "none", "load": [0.0, 0.0, 0.0],
               "torch": torch.__version__}
    (folder / "machine.json").write_text(json.dumps({"machine": machine, "select_epoch": "last"}))
    (folder / "commands.txt").write_text(f"# {folder.name}: {', '.join(configs)}\n")
    return recorded


def holm_of(p: list[float]) -> list[float]:
    order, adjusted, running = sorted(range(len(p)), key=p.__getitem__), [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


def plan_inputs(name: str, metric: str) -> tuple[float, float]:
    """The plan's δ and σ, unrounded: name − baseline on seeds 6-8 of the committed study_controls records, each run
    at its final epoch (numpy on the records, not the plan's 4-decimal table)."""
    runs = Path(__file__).resolve().parents[2] / "bench" / "results" / "study_controls" / "runs"

    def final(config, seed):
        lines = (runs / config / f"seed{seed}" / "metrics.jsonl").read_text().splitlines()
        return max((json.loads(x) for x in lines if x.strip()), key=lambda r: r["epoch"])[metric]
    d = [final(name, s) - final("baseline", s) for s in (6, 7, 8)]
    return abs(float(np.mean(d))), float(np.std(d, ddof=1))


def section_rows(page: str, heading: str) -> list[dict]:
    lines = page.split(heading)[1].strip().split("\n\n")[1].splitlines()
    names = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(names, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


@pytest.mark.slow
def test_the_confirmation_page_gives_scipys_t_holm_and_power_on_planted_effects(tmp_path, monkeypatch):
    monkeypatch.setattr(confirmation, "RESULTS", str(tmp_path / "results"))
    (tmp_path / "results" / "study_confirmation").mkdir(parents=True)
    recorded = {**write_sitting(tmp_path / "resA", ["baseline", "concat", "pcgrad"]),
                **write_sitting(tmp_path / "resB", ["mnr", "head_pretraining", "baseline_every_task", "gradvac"])}
    confirmation.collect([str(tmp_path / "resA"), str(tmp_path / "resB")])
    page = confirmation.second_confirmation(write=False)

    def scipy_row(name, against, metric, n):
        seeds = confirmation.PLAN_SEEDS[:n]
        d = np.array([recorded[name, s][metric] - recorded[against, s][metric] for s in seeds])
        return d, scipy.stats.ttest_rel(d, np.zeros(n)).pvalue

    families = [("Confirmatory family", confirmation.CONFIRMATORY, "claim"),
                ("Equal-update family", confirmation.EQUAL_UPDATES, "comparison")]
    for heading, plan, column in families:
        rows = section_rows(page, "## " + heading)
        assert len(rows) == len(plan), f"confirmation.md, {heading}: one row per planned claim, got {rows}"
        computed = [scipy_row(c[1], c[2], c[3], c[4]) for c in plan]
        holm = holm_of([p for _, p in computed])
        for claim, row, (d, p), p_holm in zip(plan, rows, computed, holm):
            where = f"confirmation.md, {heading}, {row[column]}"
            assert row[column].startswith(claim[0]) and row["n"] == str(claim[4]), f"{where}: the plan's claim and n"
            assert row["Δ [95%, seeds]"].startswith(f"{d.mean():+.4f}"), \
                f"{where}: Δ is the paired mean {d.mean():+.4f}"
            assert float(row["p"]) == pytest.approx(p, abs=6e-5), f"{where}: scipy's paired t p is {p:.4f}"
            assert float(row["Holm p"]) == pytest.approx(p_holm, abs=6e-4), f"{where}: Holm p is {p_holm:.3f}"
            if heading.startswith("Confirmatory"):
                want = "confirmed" if d.mean() > 0 and p_holm < 0.05 else "not confirmed"
                delta, sd = plan_inputs(claim[1], claim[3])
                fam = len(plan)
                planned = f"{scipy_power(delta * math.sqrt(claim[4]) / sd, claim[4] - 1, 0.05 / fam):.2f}"
                observed = scipy_power(delta * math.sqrt(claim[4]) / d.std(ddof=1), claim[4] - 1, 0.05 / fam)
                assert row[f"planned power at 0.05/{fam} / 0.05"].startswith(planned), f"{where}: planned power"
                assert row[f"power at the new sd, 0.05/{fam} / 0.05"].startswith(f"{observed:.2f}"), \
                    f"{where}: the power at the sd the seeds show is {observed:.2f} (scipy)"
            else:
                want = "noise" if p_holm >= 0.05 else ("higher" if d.mean() > 0 else "lower")
            assert row["verdict"] == want, f"{where}: the verdict follows the sign and the Holm p: {want}"
    verdicts = {r["claim"].split()[0]: r["verdict"] for r in section_rows(page, "## Confirmatory family")}
    assert verdicts["C2"] == "confirmed" and verdicts["C3"] == "not confirmed", \
        f"the planted effect (concat on Quora) must be confirmed and the absent one (MNR) not: {verdicts}"


# ------------------------------------------------------------------ the machine, as the records name it


def test_the_page_names_the_cpu_model_only_from_a_record_that_has_it():
    """With family and model in machine.json the page names them from it; without, it names the CPU as recorded and
    says the records do not carry family and model (no model typed into the page)."""
    recorded = confirmation.machine_words({"cpu": "AMD EPYC", "cpu_family": 25, "cpu_model": 17})
    assert "family 25, model 17" in recorded, f"study_confirmation.machine_words: {recorded!r}"
    bare = confirmation.machine_words({"cpu": "AMD EPYC"})
    assert bare.startswith("AMD EPYC") and "do not record its family and model" in bare and "17" not in bare, \
        f"study_confirmation.machine_words without family/model in the record: {bare!r}"


def test_a_study_records_the_cpu_family_and_model_that_lscpu_reports():
    """bench/study_table.machine(), which every study's machine.json and commands.txt headers record, carries the CPU's
    family and model: what two CPUs of one name ('AMD EPYC': a Zen 3 and a Zen 4) differ by. Oracle: lscpu."""
    import os
    import re
    import shutil
    import subprocess
    from bench.study_table import describe, machine
    want, cpuinfo = {}, Path("/proc/cpuinfo")
    if shutil.which("lscpu"):
        out = subprocess.run(["lscpu"], capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        want = {k: int(fields[name].strip()) for k, name in (("cpu_family", "CPU family"), ("cpu_model", "Model"))
                if fields.get(name, "").strip().isdigit()}
    elif cpuinfo.exists():   # no lscpu: the kernel's own lines, read with a regex
        text = cpuinfo.read_text()
        want = {k: int(m.group(1)) for k, pattern in (("cpu_family", r"^cpu family\s*:\s*(\d+)"),
                                                       ("cpu_model", r"^model\s*:\s*(\d+)"))
                if (m := re.search(pattern, text, re.M))}
    if len(want) < 2:   # nothing names a numeric family and model here (an ARM CPU): the record must not invent them
        got = machine()
        assert got.get("cpu_family") is None and got.get("cpu_model") is None, \
            f"bench.study_table.machine(): {got}, where neither lscpu nor /proc/cpuinfo gives a family and model"
        return
    got = machine()
    assert {k: got.get(k) for k in want} == want, f"bench.study_table.machine(): {got}; lscpu gives {want}"
    assert f"family {want['cpu_family']} model {want['cpu_model']}" in describe(got), describe(got)
