"""Grades bench.study: its t-intervals against scipy, and an interrupted study resuming to the same table.

Oracles: (a) scipy.stats.t (quantiles, intervals) for the statistics written without scipy; (c) a tiny study
(tiny random BERT, 12 examples per task, as tests/test_train_multitask.py) stopped part-way and rerun must end
with the table of the same study run in one go.

Run: python -m pytest -q tests/studies/test_study.py   (offline, CPU, about a minute: every run is a subprocess)
"""

import json
import math

import pytest
import scipy  # scipy.stats loads at its first use, not while pytest collects (seconds on a busy CPU)

from bench import seed_statistics as stats, study, study_table
from conftest import bench_script

MOD = "bench.study"


@pytest.mark.parametrize("df", [1, 2, 3, 5, 9, 29, 200])
@pytest.mark.parametrize("p", [0.975, 0.95, 0.5, 0.1])
def test_t_quantile_matches_scipy(df, p):
    got, want = stats.t_quantile(p, df), scipy.stats.t.ppf(p, df)
    assert got == pytest.approx(want, abs=1e-9), f"bench.seed_statistics.t_quantile({p}, df={df}): expected scipy's {want}, got {got}"


def test_t_interval_matches_scipy_on_hand_values():
    values = [0.012, -0.004, 0.02, 0.007]
    mean, lo, hi = stats.t_interval(values)
    want = scipy.stats.t.interval(0.95, len(values) - 1, loc=sum(values) / 4, scale=scipy.stats.sem(values))
    assert (lo, hi) == pytest.approx(want, abs=1e-12), f"bench.seed_statistics.t_interval: expected scipy's {want}, got {(lo, hi)}"
    assert math.isnan(stats.t_interval([0.3])[1]), f"bench.seed_statistics.t_interval: one value has no interval"


@pytest.mark.parametrize("values, baseline", [
    ([0.71, 0.70, 0.72, 0.70, 0.71], [0.70, 0.70, 0.71, 0.69, 0.70]),
    ([0.5, 0.6, 0.4], [0.45, 0.62, 0.41]),
    ([10.0, 10.1, 9.9, 10.05], [1.0, 1.02, 0.99, 1.01]),       # |t| ≈ 200: the far tail
    ([0.3, 0.1], [0.2, 0.25]),                                  # 1 df
])
def test_paired_p_value_matches_scipy_ttest_rel(values, baseline):
    """Oracle (b): scipy.stats.ttest_rel's two-sided p for the paired difference of per-seed scores."""
    got = stats.paired_difference(values, baseline)["p"]
    want = scipy.stats.ttest_rel(values, baseline).pvalue
    assert got == pytest.approx(want, rel=1e-8, abs=1e-300), f"bench.seed_statistics.paired_t_pvalue: expected scipy's {want}, got {got}"


def _holm_by_sequential_rejection(p):
    """Holm's procedure as the textbook states it (Holm 1979): at level α, walk the p-values in ascending order and
    reject H_(j) while p_(j) ≤ α / (m − j + 1); stop at the first that is not. The adjusted p of H_i is the smallest
    α at which H_i is rejected, searched over every level where the decisions can change (the α = (m − j + 1)·p_(j))."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])

    def rejected(alpha):
        out = set()
        for j, i in enumerate(order, 1):
            if p[i] > alpha / (m - j + 1):
                break
            out.add(i)
        return out
    levels = sorted({min(1.0, (m - j) * p[i]) for j, i in enumerate(order)} | {1.0})
    return [next(a for a in levels if i in rejected(a + 1e-15)) if any(i in rejected(a + 1e-15) for a in levels) else 1.0
            for i in range(m)]


def test_holm_matches_a_hand_worked_example_and_the_sequential_procedure():
    """Oracles (a) a hand-worked family: p = (0.01, 0.04, 0.03, 0.005), m = 4: sorted 0.005, 0.01, 0.03, 0.04 times
    4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, running max 0.02, 0.03, 0.06, 0.06; (c) random families (ties included)
    against Holm's step-down rejection run at every level."""
    got = stats.holm([0.01, 0.04, 0.03, 0.005])
    assert got == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-12), f"bench.seed_statistics.holm: hand example, got {got}"
    assert stats.holm([0.2, None, 0.01])[1] is None and stats.holm([0.2, None, 0.01])[2] == pytest.approx(0.02), (
        "bench.seed_statistics.holm: None is outside the family (m counts only the p-values given)")
    import random
    rng = random.Random(0)
    for _ in range(200):
        m = rng.randint(1, 8)
        p = [round(rng.random() ** 3, 3) for _ in range(m)]        # rounding makes ties
        want = _holm_by_sequential_rejection(p)
        assert stats.holm(p) == pytest.approx(want, abs=1e-9), f"bench.seed_statistics.holm({p}): expected {want}, got {stats.holm(p)}"


def test_summary_holm_adjusts_each_metric_over_the_configurations():
    """Oracles (b) + (c): each Δ's p is scipy's ttest_rel, and p_holm is Holm's sequential procedure run on one
    metric's p over every configuration (the family), not over all metrics at once."""
    import random
    rng = random.Random(1)
    seeds = [1, 2, 3, 4]
    scores = {name: {s: {m: 0.7 + shift + 0.01 * rng.random() for m in study_table.METRICS} for s in seeds}
              for name, shift in (("baseline", 0), ("a", 0.02), ("b", 0.001), ("c", -0.015))}
    summary = study_table.summarise(scores, seeds, None)
    for m in study_table.METRICS:
        names = ["a", "b", "c"]
        p = [scipy.stats.ttest_rel([scores[n][s][m] for s in seeds], [scores["baseline"][s][m] for s in seeds]).pvalue
             for n in names]
        want = _holm_by_sequential_rejection(p)
        got = [summary[n]["difference"][m]["p_holm"] for n in names]
        assert got == pytest.approx(want, rel=1e-6), f"{MOD}.summarise: Holm-adjusted p of {m}: expected {want}, got {got}"


def test_a_configuration_is_compared_with_its_control_paired_by_seed(tmp_path):
    """Oracles (b) + (c): mnr − cosine and grad_compromise − baseline_accum4 are paired by seed with scipy's ttest_rel
    p, Holm-adjusted over the controlled configurations of each metric (a family apart from the baseline's), and the
    table prints them; a configuration whose control did not run gets no such row."""
    import random
    rng = random.Random(2)
    seeds = [1, 2, 3]
    names = ("baseline", "cosine", "mnr", "baseline_accum4", "grad_compromise")
    scores = {n: {s: {m: 0.7 + 0.01 * rng.random() for m in study_table.METRICS} for s in seeds} for n in names}
    summary = study_table.summarise(scores, seeds, None)
    for m in study_table.METRICS:
        pairs = [("mnr", "cosine"), ("grad_compromise", "baseline_accum4")]
        p = [scipy.stats.ttest_rel([scores[a][s][m] for s in seeds], [scores[b][s][m] for s in seeds]).pvalue for a, b in pairs]
        for (a, b), want in zip(pairs, _holm_by_sequential_rejection(p)):
            d = summary[a]["difference_vs_control"][m]
            assert summary[a]["control"] == b, f"{MOD}.summarise: {a}'s control is {b}"
            assert d["values"] == pytest.approx([scores[a][s][m] - scores[b][s][m] for s in seeds]), f"{MOD}.summarise: {a} − {b} not paired by seed"
            assert d["p_holm"] == pytest.approx(want, rel=1e-6), f"{MOD}.summarise: Holm p of {a} − {b} ({m}): expected {want}, got {d['p_holm']}"
    header = {"budget": [], "examples_per_epoch": 0, "seeds": seeds,
              "machine": {"cpu": "cpu", "cpus": 1, "native_bf16": False, "gpu": "none", "load": [0, 0, 0]}}
    table = study_table.write_table(str(tmp_path), summary, header)
    assert "## Against its control" in table and "| mnr | cosine |" in table, f"{MOD}.write_table: no control table:\n{table}"
    alone = study_table.summarise({n: scores[n] for n in ("baseline", "mnr")}, seeds, None)
    assert "control" not in alone["mnr"], f"{MOD}.summarise: mnr without a cosine run has no control to compare with"


def test_ensemble_is_compared_with_the_members_mean_and_the_best_member():
    """Oracle (a), hand values: members' overall 0.70, 0.72, 0.71; the ensemble 0.73 gains +0.02 on their mean and
    +0.01 on the best member (seed 2: Song/Hu/Pan's comparison), whose per-task scores are used for every metric."""
    seeds = [1, 2, 3]
    member = lambda o, sst: {"sst_acc": sst, "para_acc": 0.8, "sts_pearson": 0.8, "overall": o}
    scores = {"baseline": {1: member(0.70, 0.40), 2: member(0.72, 0.38), 3: member(0.71, 0.45)}}
    row = study_table.summarise(scores, seeds, member(0.73, 0.41))["ensemble"]
    assert row["difference"]["overall"]["mean"] == pytest.approx(0.02), f"{MOD}.summarise: ensemble vs the members' mean"
    assert row["best_member"]["seed"] == 2, f"{MOD}.summarise: the best member is the one with the highest dev overall"
    assert row["difference_vs_best_member"]["overall"] == pytest.approx(0.01)
    assert row["difference_vs_best_member"]["sst_acc"] == pytest.approx(0.03), (
        f"{MOD}.summarise: per task, the ensemble is compared with the best member's own score (0.38), not each task's best")


def test_one_seed_has_no_standard_deviation(tmp_path):
    """A sample sd needs two values: with one seed the table must not print "± 0.0000" as if it were measured."""
    assert stats.mean_sd([0.3, 0.5])[1] == pytest.approx(scipy.stats.tstd([0.3, 0.5]))
    assert stats.mean_sd([0.3]) == (0.3, None), f"bench.seed_statistics.mean_sd: one value has no sample sd (None), got {stats.mean_sd([0.3])}"
    summary = study_table.summarise({"baseline": {1: dict.fromkeys(study_table.METRICS, 0.5)}}, [1], None)
    header = {"budget": ["--epochs", "1"], "examples_per_epoch": 0, "seeds": [1],
              "machine": {"cpu": "cpu", "cpus": 1, "native_bf16": False, "gpu": "none", "load": [0, 0, 0]}}
    table = study_table.write_table(str(tmp_path), summary, header)
    assert "0.5000 ±" not in table, f"{MOD}.write_table: one seed printed with a '± sd' cell:\n{table}"


def test_every_configuration_gets_the_same_examples_per_epoch():
    """6000 examples per epoch at batch 32: 188 steps of one batch, 63 PCGrad/GradVac steps of 3 task batches,
    47 Gradient Compromise steps of 4 batches (N = 4); with --grad_accum 2, half the steps."""
    budget = ["--batch_size", "32"]
    names = ("baseline", "pcgrad", "gradvac", "grad_compromise", "grad_compromise_normalize")
    got = {n: study.steps_per_epoch(n, budget, 6000) for n in names}
    want = {n: ["--steps_per_epoch", str(k)] for n, k in zip(names, (188, 63, 63, 47, 47))}
    assert got == want, f"{MOD}.steps_per_epoch: expected {want}, got {got}"
    assert study.steps_per_epoch("baseline", budget + ["--grad_accum", "2"], 6000) == ["--steps_per_epoch", "94"]
    assert study.steps_per_epoch("baseline", budget, 0) == [], "0 examples per epoch: the script's one pass"


def test_a_new_configuration_is_charged_its_batches_per_step_by_the_training_scripts_rule(monkeypatch):
    """Muppet's heterogeneous steps read K = 3 task sub-batches per update (Aghajanyan et al. 2021, §3.2, §5.2), so a study
    configuration with --heterogeneous gets 6000 / (32 x 3) -> 63 steps, as PCGrad does; a table of known names
    would give it the baseline's 188. With --grad_accum 2 as well: 6000 / (32 x 2 x 3) -> 32."""
    monkeypatch.setitem(study.CONFIGS, "muppet", ["--heterogeneous"])
    monkeypatch.setitem(study.CONFIGS, "muppet_accum2", ["--heterogeneous", "--grad_accum", "2"])
    budget = ["--batch_size", "32"]
    assert study.steps_per_epoch("muppet", budget, 6000) == ["--steps_per_epoch", "63"], \
        f"{MOD}.steps_per_epoch: --heterogeneous reads 3 task batches per step (minbert/tasks/sampling.batches_per_step)"
    assert study.steps_per_epoch("muppet_accum2", budget, 6000) == ["--steps_per_epoch", "32"], \
        f"{MOD}.steps_per_epoch: a configuration's own --grad_accum counts too"


def test_controls_differ_from_their_method_only_in_what_they_control():
    """cosine = mnr without its MNR flags (MNR's effect is mnr − cosine); baseline_accum4 makes Gradient Compromise's
    47 updates of 4 batches (6000 examples at batch 32) with no other flag, so grad_compromise − baseline_accum4
    compares the method at equal updates and examples."""
    mnr, cosine = study.CONFIGS["mnr"], study.CONFIGS["cosine"]
    assert cosine == ["--sts_head", "cosine"] and mnr[:2] == cosine and all(f.startswith("--mnr") or not f.startswith("--")
                                                                            for f in mnr[2:]), f"{MOD}.CONFIGS: cosine {cosine}, mnr {mnr}"
    budget = ["--batch_size", "32"]
    assert study.CONFIGS["baseline_accum4"] == ["--grad_accum", "4"], f"{MOD}.CONFIGS['baseline_accum4']"
    assert study.steps_per_epoch("baseline_accum4", budget, 6000) == study.steps_per_epoch("grad_compromise", budget, 6000) \
        == ["--steps_per_epoch", "47"], f"{MOD}.steps_per_epoch: the equal-updates control must make Gradient Compromise's 47 updates"


def test_charged_head_pretraining_pays_its_head_pass_from_the_fine_tuning_examples(tmp_path):
    """6 files of 300 rows: the head pass reads 900 training + 900 dev examples, 600 fine-tuning examples at 1/3 each,
    300 per epoch over 2 epochs: 6000 − 300 = 5700 examples, 179 steps of 32 (the uncharged version: 188)."""
    from conftest import write_task_files
    write_task_files(tmp_path, n=300)
    budget = ["--batch_size", "32", "--epochs", "2", "--data_dir", str(tmp_path)]
    assert study.head_pass_cost(budget) == pytest.approx(600), f"{MOD}.head_pass_cost: 1800 frozen examples at 1/3"
    assert study.steps_per_epoch("head_pretraining_charged", budget, 6000) == ["--steps_per_epoch", str(math.ceil(5700 / 32))], \
        f"{MOD}.steps_per_epoch: head_pretraining_charged must fine-tune on the budget less its head pass"
    assert study.steps_per_epoch("head_pretraining", budget, 6000) == ["--steps_per_epoch", "188"]
    assert study.steps_per_epoch("head_pretraining_charged", budget + ["--limit", "30"], 6000) == ["--steps_per_epoch", "187"], \
        f"{MOD}.head_pass_cost: --limit 30 reads 30 rows per file (180 frozen examples = 60, 30 per epoch: 5970 examples)"
    assert study.CONFIGS["head_pretraining_charged"] == study.CONFIGS["head_pretraining"]


def test_budget_helpers():
    assert study.budget_epochs(["--lr", "1", "--epochs", "3"]) == 3
    assert study.with_epochs(["--epochs", "3", "--lr", "1"], 2) == ["--lr", "1", "--epochs", "2"]
    with pytest.raises(SystemExit):
        study.parse_args(["--configs", "ensemble", "--", "--epochs", "1"])   # the ensemble needs the baseline seeds


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from conftest import tiny_run_inputs
    root = tmp_path_factory.mktemp("study")
    data, model = tiny_run_inputs(root)
    budget = ["--model", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "4", "--lr", "1e-3",
              "--hidden_dropout_prob", "0.1", "--device", "cpu", "--amp", "off", "--limit", "12"]
    argv = ["--configs", "baseline,concat,pals_after,ensemble", "--seeds", "1,2,3", "--in_process", "--examples_per_epoch", "36"]
    whole = study.main([*argv, "--out_dir", str(root / "whole"), "--results_dir", str(root / "results"), "--", *budget])
    return root, argv, budget, whole


def test_tiny_study_intervals_equal_scipy_t_intervals(tiny):
    root, _, _, summary = tiny
    table = json.loads((root / "whole" / "table.json").read_text())
    assert set(table["configurations"]) == {"baseline", "concat", "pals_after", "ensemble"}
    for name in ("concat", "pals_after"):
        for metric, d in table["configurations"][name]["difference"].items():
            diffs = d["values"]
            if scipy.stats.sem(diffs) == 0:   # scipy returns nan for a zero-width interval
                assert d["low"] == d["high"] == d["mean"], f"{MOD}: {name} {metric}: equal differences give a zero-width interval"
                continue
            want = scipy.stats.t.interval(0.95, len(diffs) - 1, loc=sum(diffs) / len(diffs), scale=scipy.stats.sem(diffs))
            assert (d["low"], d["high"]) == pytest.approx(want, abs=1e-9), \
                f"{MOD}: {name} {metric}: interval {(d['low'], d['high'])}, scipy's t-interval over seeds {want}"
            base = table["configurations"]["baseline"]["scores"][metric]["values"]
            mine = table["configurations"][name]["scores"][metric]["values"]
            assert diffs == pytest.approx([a - b for a, b in zip(mine, base)]), f"{MOD}: {name} {metric}: not paired by seed"
    for name in ("table.md", "machine.json", "commands.txt"):
        assert (root / "whole" / name).is_file(), f"{MOD}: {name} was not written"
        assert (root / "results" / name).is_file(), f"{MOD}: --results_dir did not get {name}"
    assert not (root / "whole" / "baseline" / "seed1" / "last.pt").exists(), f"{MOD}: a finished run's checkpoints must go"
    assert (root / "whole" / "baseline" / "seed1" / "outputs.pt").is_file(), f"{MOD}: outputs.pt (ensembles) must stay"
    commands = (root / "whole" / "commands.txt").read_text()
    assert commands.count("train_multitask.py") == 3 * 4 and "--pals_after" in commands and "-m minbert ensemble" in commands
    assert commands.count("--steps_per_epoch 9 ") == 3 * 4, f"{MOD}: 36 examples per epoch at batch 4 is 9 steps in every run"
    assert "cpu" in table["machine"] and "native_bf16" in table["machine"]
    try:
        import matplotlib  # noqa: F401  (optional: without it the study prints a note instead of the plot)
        assert (root / "results" / "study.png").is_file(), f"{MOD}: matplotlib is installed but study.png was not written"
    except ImportError:
        pass


def test_interrupted_study_resumes_to_the_same_table(tiny):
    """Stop after 3 runs (--max_runs), then a real Ctrl-C inside a run, then finish: the same table."""
    root, argv, budget, whole = tiny
    out = str(root / "resumed")
    assert study.main([*argv, "--out_dir", out, "--max_runs", "3", "--", *budget]) is None, "--max_runs 3 must stop the study"
    # a run cut by a real SIGINT inside its second epoch (the script saves interrupted.pt and exits 130): the
    # runner must continue it with --resume, to the scores of the run that was never interrupted
    import signal
    import train_multitask
    from test_train_multitask import signal_on_call
    run_dir = root / "resumed" / "baseline" / "seed2"
    cmd = study.train_command(budget + study.steps_per_epoch("baseline", budget, 36), study.CONFIGS["baseline"], 2, str(run_dir))
    with pytest.MonkeyPatch.context() as mp:
        signal_on_call(mp, train_multitask, "task_loss", 12, signal.SIGINT)   # 9 steps per epoch: step 3 of epoch 2
        with pytest.raises(SystemExit):
            train_multitask.main(cmd[2:])
    assert (run_dir / "interrupted.pt").is_file() and not study.finished(str(run_dir), 2), "the run should be half done"
    resumed = study.main([*argv, "--out_dir", out, "--", *budget])
    commands = (root / "resumed" / "commands.txt").read_text().splitlines()
    cut = [c for c in commands if f"{run_dir}" in c and "--out_dir" in c and c.split("--out_dir ")[1].startswith(f"{run_dir} ")]
    assert cut and "--resume" in cut[-1] and "interrupted.pt" in cut[-1], \
        f"{MOD}: the cut run must continue from its interrupted.pt (--resume), got {cut}"
    first = [c for c in commands if f"--out_dir {root / 'resumed' / 'baseline' / 'seed1'} " in c]
    assert len(first) == 1, f"{MOD}: a finished run must not be run again, got {len(first)} commands for baseline/seed1"
    a = json.loads((root / "whole" / "table.json").read_text())["configurations"]
    b = json.loads((root / "resumed" / "table.json").read_text())["configurations"]
    for name in a:
        for metric in study_table.METRICS:
            assert a[name]["scores"][metric]["values"] == pytest.approx(b[name]["scores"][metric]["values"], abs=1e-6), \
                f"{MOD}: resumed study differs from the uninterrupted one at {name} {metric}"
    assert resumed is not None


def test_a_later_session_with_only_the_committed_results_runs_nothing(tiny):
    """The run folders are not committed (models, checkpoints); --results_dir keeps each finished run's
    metrics.jsonl and outputs.pt. A fresh session with only that folder must rerun no training and end with the
    same table (the ensemble is recomputed from the kept outputs)."""
    root, argv, budget, _ = tiny
    import shutil
    later = root / "later"
    shutil.copytree(root / "results", later / "results")
    summary = study.main([*argv, "--out_dir", str(later / "runs"), "--results_dir", str(later / "results"), "--", *budget])
    session = (later / "runs" / "commands.txt").read_text().split("\n# ")[-1]   # this invocation's lines
    assert "train_multitask.py" not in session, f"{MOD}: runs kept under --results_dir were run again:\n{session}"
    kept = (later / "results" / "commands.txt").read_text()
    assert kept.count("train_multitask.py") == 3 * 4, \
        f"{MOD}: --results_dir/commands.txt must keep the first session's commands when a later session continues:\n{kept}"
    a = json.loads((root / "whole" / "table.json").read_text())["configurations"]
    b = json.loads((later / "runs" / "table.json").read_text())["configurations"]
    assert {n: a[n]["scores"] for n in a} == {n: b[n]["scores"] for n in b}, f"{MOD}: the restored study's table differs"
    assert summary is not None


def test_tables_only_rewrites_the_tables_and_keeps_the_record(tiny):
    """--tables_only (a table rewrite after a change to the statistics): nothing is trained, the kept commands.txt
    and machine.json are untouched, the header keeps the machine the records were measured on, the scores equal
    the study's; a configuration without records stops the rewrite instead of training it."""
    root, argv, budget, _ = tiny
    import shutil
    rewrite = root / "rewrite"
    shutil.copytree(root / "results", rewrite / "results")
    machine = json.loads((rewrite / "results" / "machine.json").read_text())
    machine["machine"]["cpu"] = "the machine of the records"
    (rewrite / "results" / "machine.json").write_text(json.dumps(machine))
    before = {n: (rewrite / "results" / n).read_text() for n in ("commands.txt", "machine.json")}
    summary = study.main([*argv, "--tables_only", "--out_dir", str(rewrite / "runs"), "--results_dir", str(rewrite / "results"),
                          "--", *budget])
    assert summary is not None, f"{MOD}: --tables_only stopped although every run has a record"
    for n, text in before.items():
        assert (rewrite / "results" / n).read_text() == text, f"{MOD}: --tables_only changed the kept {n}"
    table = (rewrite / "results" / "table.md").read_text()
    assert "the machine of the records" in table, f"{MOD}: --tables_only must describe the records' machine, not this one"
    a = json.loads((root / "whole" / "table.json").read_text())["configurations"]
    b = json.loads((rewrite / "results" / "table.json").read_text())["configurations"]
    assert {n: a[n]["scores"] for n in a} == {n: b[n]["scores"] for n in b}, f"{MOD}: --tables_only changed the scores"
    assert study.main([*argv, "--configs", "baseline,smart", "--tables_only", "--out_dir", str(rewrite / "runs2"),
                       "--results_dir", str(rewrite / "results"), "--", *budget]) is None, \
        f"{MOD}: --tables_only must stop (None) where a configuration has no record, not train it"


def test_the_confirmation_family_is_holm_over_its_four_claims_with_the_exploratory_sign():
    """bench/study_confirmation.py (PLAN.md's rule): each claim's fresh Δ is scipy's paired t over the seeds, Holm over
    the 4 claims; a claim is confirmed only with the exploratory sign AND Holm p < 0.05."""
    conf = bench_script("study_confirmation")
    seeds, metrics = [6, 7, 8], ("overall", "sst_acc", "para_acc")
    base = {m: [0.70, 0.71, 0.72] for m in metrics}
    shift = {("head_pretraining", "overall"): [0.020, 0.021, 0.022],    # large and steady: confirmed
             ("head_pretraining", "sst_acc"): [0.01, -0.02, 0.015],    # noise
             ("concat", "para_acc"): [-0.020, -0.021, -0.019],         # steady, but the other sign: not confirmed
             ("mnr", "para_acc"): [0.001, 0.03, 0.002]}
    fresh = {"configurations": {"baseline": {"seeds": seeds, "scores": {m: {"values": base[m]} for m in metrics}}}}
    for (name, metric), d in shift.items():
        row = fresh["configurations"].setdefault(name, {"seeds": seeds, "scores": {m: {"values": base[m]} for m in metrics}})
        row["scores"][metric] = {"values": [b + x for b, x in zip(base[metric], d)]}
    exploratory = {"configurations": {n: {"difference": {m: {"mean": 0.01, "p_holm": 0.04} for m in metrics}} for n, _ in shift}}
    rows = conf.confirmation(exploratory, fresh)
    p = [scipy.stats.ttest_rel([b + x for b, x in zip(base[m], d)], base[m]).pvalue for (n, m), d in shift.items()]
    want = _holm_by_sequential_rejection(p)
    assert [r["d"]["p_holm"] for r in rows] == pytest.approx(want, rel=1e-6), "bench/study_confirmation.py: Holm over the 4 claims"
    assert [r["verdict"] for r in rows] == ["confirmed", "not confirmed", "not confirmed", "not confirmed"], \
        f"bench/study_confirmation.py: verdicts {[r['verdict'] for r in rows]} (a steady Δ of the other sign is not a confirmation)"


def test_a_run_is_scored_at_the_final_epoch_or_the_best_one(tmp_path):
    """--select_epoch last scores epoch 2 (fixed in advance) even where epoch 1 had the better dev overall; best
    takes epoch 1 (the first on ties, as best.pt); the training command carries the same choice."""
    rows = [{"epoch": 1, "sst_acc": 0.5, "para_acc": 0.7, "sts_pearson": 0.8, "overall": 0.71},
            {"epoch": 2, "sst_acc": 0.4, "para_acc": 0.7, "sts_pearson": 0.8, "overall": 0.69}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    assert study.kept_scores(str(tmp_path), "last")["sst_acc"] == 0.4, f"{MOD}.kept_scores: last must be the final epoch"
    assert study.kept_scores(str(tmp_path), "best")["sst_acc"] == 0.5, f"{MOD}.kept_scores: best must be epoch 1"
    command = study.train_command([], [], 3, str(tmp_path), "last")
    assert command[command.index("--select_epoch") + 1] == "last", f"{MOD}.train_command: the run must keep the scored epoch"


def test_a_configuration_on_fewer_seeds_is_paired_over_the_seeds_it_shares():
    """--seeds_per_config mnr=3 with seeds 1..5: mnr's Δ is scipy's paired t over seeds 1-3 only, the baseline keeps
    all five, and a control pairs over the seeds both ran."""
    import random
    rng = random.Random(4)
    seeds = [1, 2, 3, 4, 5]
    scores = {n: {s: {m: 0.7 + 0.01 * rng.random() for m in study_table.METRICS} for s in seeds[:k]}
              for n, k in (("baseline", 5), ("cosine", 5), ("mnr", 3))}
    summary = study_table.summarise(scores, seeds, None)
    assert summary["mnr"]["seeds"] == [1, 2, 3] and summary["baseline"]["seeds"] == seeds
    for other, key in (("baseline", "difference"), ("cosine", "difference_vs_control")):
        want = scipy.stats.ttest_rel([scores["mnr"][s]["overall"] for s in seeds[:3]],
                                     [scores[other][s]["overall"] for s in seeds[:3]]).pvalue
        assert summary["mnr"][key]["overall"]["p"] == pytest.approx(want, rel=1e-8), f"{MOD}.summarise: mnr − {other} over seeds 1-3"
    args = study.parse_args(["--configs", "baseline,mnr", "--seeds", "1,2,3,4,5", "--seeds_per_config", "mnr=3"])
    assert args.seeds_of == {"baseline": seeds, "mnr": [1, 2, 3]}, f"{MOD}.parse_args: seeds_of {args.seeds_of}"
    with pytest.raises(SystemExit):
        study.parse_args(["--configs", "baseline", "--seeds", "1,2", "--seeds_per_config", "baseline=3"])


def test_the_equal_update_control_is_pcgrads_step_without_the_surgery():
    """baseline_every_task makes PCGrad's and GradVac's 63 updates of one batch of each task (6000 examples at batch 32)
    with no other flag, and is their control in the table."""
    assert study.CONFIGS["baseline_every_task"] == ["--heterogeneous", "--heterogeneous_mix", "every_task"]
    budget = ["--batch_size", "32"]
    assert study.steps_per_epoch("baseline_every_task", budget, 6000) == study.steps_per_epoch("pcgrad", budget, 6000) \
        == ["--steps_per_epoch", "63"], f"{MOD}.steps_per_epoch: the control must make PCGrad's 63 updates"
    assert study_table.CONTROLS["pcgrad"] == study_table.CONTROLS["gradvac"] == "baseline_every_task"


def test_a_run_another_process_is_training_is_left_to_it(tmp_path, monkeypatch):
    """Two studies sharing an --out_dir (a second process taking the last seeds): the second found a run the first was
    training, with the first's epoch-1 checkpoint, and resumed it, two processes writing one run folder. The runner
    holds a lock beside each run while it trains it; another process meets the lock and stops instead."""
    import subprocess
    import sys
    run_dir = tmp_path / "out" / "baseline" / "seed22"
    run_dir.mkdir(parents=True)
    (run_dir / "last.pt").write_bytes(b"the other process's checkpoint")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"f = open({str(run_dir.parent / '.seed22.lock')!r}, 'w')\n"
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        runner = study.Runner(str(tmp_path / "out"))
        monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail(
            "bench/study.py Runner.train: it trained (resumed) a run whose lock another process holds"))
        with pytest.raises(study.StopStudy, match="being trained by another process"):
            runner.train(["--epochs", "2"], [], 22, str(run_dir))
    finally:
        holder.kill()
        holder.wait()
    calls = []
    monkeypatch.setattr(runner, "run", lambda command, log: calls.append(command))
    runner.train(["--epochs", "2"], [], 22, str(run_dir))   # the holder is gone: the lock went with it
    assert calls and calls[0][-2:] == ["--resume", str(run_dir / "last.pt")], \
        f"bench/study.py Runner.train: with no other process on it (a killed holder's flock goes with it), a cut " \
        f"run resumes from its checkpoint: {calls}"
