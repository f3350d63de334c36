"""Grades bench.mml_study's table arithmetic: the Dolan-Moré profile on error (Figure 3), the
relative-improvement column and "impr." rows of Tables 2-5, best-epoch selection by the paper's
metric, and the default method list of Table 1.

Oracles: (a) the paper's own numbers — MML's improvement column of Table 3 and its "MML impr." row
of Table 5, recomputed from the accuracies printed there (the paper truncates to 2 decimals);
(a) hand computation — a 3-method toy error table whose profile is worked out in the docstring.
The end-to-end study run is in tests/test_train_mml.py.

Run: python -m pytest -q tests/studies/test_mml_study.py   (offline, CPU, < 1 s)
"""

import pytest

from bench import mml_study

MOD = "bench.mml_study"


# ---------------------------------------------------------------------------- Figure 3
def test_profile_is_dolan_more_on_error_for_a_three_method_toy_table():
    """Errors (lower is better) and r = error / lowest error of the experiment:
         exp 1: a .125 b .25 c .5    -> r = 1, 2, 4
         exp 2: a .5   b .25 c .25   -> r = 2, 1, 1
         exp 3: a .375 b .5  c .25   -> r = 1.5, 2, 1
    ρ(τ) = fraction of the 3 experiments with r ≤ τ:
         τ = 1:   a 1/3, b 1/3, c 2/3;   τ = 1.5: a 2/3, b 1/3, c 2/3;
         τ = 2:   a 1,   b 1,   c 2/3;   τ = 4:   a 1,   b 1,   c 1."""
    errors = [{"a": 0.125, "b": 0.25, "c": 0.5}, {"a": 0.5, "b": 0.25, "c": 0.25}, {"a": 0.375, "b": 0.5, "c": 0.25}]
    rho = mml_study.profile(errors, ["a", "b", "c"], [1.0, 1.5, 2.0, 4.0])
    expected = {"a": [1 / 3, 2 / 3, 1.0, 1.0], "b": [1 / 3, 1 / 3, 1.0, 1.0], "c": [2 / 3, 2 / 3, 2 / 3, 1.0]}
    for m in expected:
        assert rho[m] == pytest.approx(expected[m]), f"{MOD}.profile: method {m}: expected {expected[m]}, got {rho[m]} (r = error / min error)"


def test_profile_with_a_zero_best_error_counts_only_the_exact_ties():
    rho = mml_study.profile([{"a": 0.0, "b": 0.1}, {"a": 0.2, "b": 0.1}], ["a", "b"], [1.0, 10.0])
    assert rho == {"a": [0.5, 1.0], "b": [0.5, 0.5]}, f"{MOD}.profile: best error 0 gives r = 1 for ties, ∞ otherwise; got {rho}"


# ---------------------------------------------------------------------------- Tables 2-5
# Table 3 / Table 5 of the paper (similarity category), train/dev accuracy in %.
DATASETS = ["QQP", "MRPC", "STS-B*"]
BERT = {"QQP": [(99.73, 91.57), (66.90, 68.85), (88.34, 90.12)],
        "MRPC": [(65.28, 65.18), (99.37, 87.25), (82.53, 88.58)],
        "STS-B*": [(73.13, 73.11), (75.59, 75.49), (100.0, 95.49)]}
MML = {"QQP": [(99.74, 91.68), (67.77, 68.87), (89.11, 90.55)],
       "MRPC": [(68.37, 68.15), (99.23, 88.97), (86.12, 91.32)],
       "STS-B*": [(74.13, 74.40), (75.51, 77.94), (99.85, 96.70)]}


def accuracies(rows):
    return {t: {e: {"train": tr, "dev": dv} for e, (tr, dv) in zip(DATASETS, cells)} for t, cells in rows.items()}


ACC = {"bert": accuracies(BERT), "mml": accuracies(MML)}


@pytest.mark.parametrize("task,train,dev", [("QQP", 1.08, 0.25), ("MRPC", 4.54, 3.82), ("STS-B*", 0.63, 2.50)])
def test_row_improvement_reproduces_table_3(task, train, dev):
    """The last column: mean over the two hold-out datasets (diagonal excluded) of acc_MML / acc_BERT − 1."""
    for split, paper in (("train", train), ("dev", dev)):
        got = mml_study.row_improvement(ACC, "mml", task, DATASETS, split)
        assert got is not None and abs(got - paper) <= 0.01, \
            f"{MOD}.row_improvement(MML-{task}, {split}): Table 3 prints {paper:+.2f}%, got {got}"


@pytest.mark.parametrize("dataset,train,dev", [("QQP", 3.05, 3.16), ("MRPC", 0.59, 1.63), ("STS-B*", 2.61, 1.78)])
def test_column_improvement_reproduces_table_5_mml_impr_row(dataset, train, dev):
    """The "MML impr." row: per column, the mean over the models trained on the other datasets."""
    for split, paper in (("train", train), ("dev", dev)):
        got = mml_study.column_improvement(ACC, "mml", dataset, DATASETS, split)
        assert got is not None and abs(got - paper) <= 0.01, \
            f"{MOD}.column_improvement(MML, {dataset}, {split}): Table 5 prints {paper:+.2f}%, got {got}"


# ---------------------------------------------------------------------------- Table 1
def test_best_epoch_is_chosen_by_the_paper_metric():
    """MRPC is reported by accuracy in the paper (GLUE's headline is F1): epoch 2 wins on accuracy."""
    records = [{"epoch": 1, "f1": 0.90, "accuracy": 0.84, "active_heads": 40},
               {"epoch": 2, "f1": 0.88, "accuracy": 0.86, "active_heads": 12},
               {"epoch": 3, "f1": 0.89, "accuracy": 0.86, "active_heads": 9}]
    best = mml_study.best_epoch(records, "MRPC")
    assert best["epoch"] == 2, f"{MOD}.best_epoch: MRPC by accuracy, first of the tied epochs: expected 2, got {best['epoch']}"
    stsb = [{"epoch": 1, "pearson": 0.80, "spearman": 0.85, "active_heads": 3}, {"epoch": 2, "pearson": 0.82, "spearman": 0.84, "active_heads": 3}]
    assert mml_study.best_epoch(stsb, "STS-B")["epoch"] == 1, f"{MOD}.best_epoch: STS-B is chosen by Spearman"


def test_table_1_difference_from_bert_is_a_paired_t_interval(tmp_path):
    """Each method's Table 1 difference from BERT is paired by seed: d_s = score(method, s) − score(BERT, s), and
    its interval is scipy's t-interval of the d_s (n − 1 df). The Average column pairs the per-seed task means."""
    import argparse
    import json

    import scipy.stats
    rte = {"bert": [60.0, 62.0, 57.0], "mml": [61.0, 63.5, 58.2]}
    mrpc = {"bert": [80.0, 79.0, 81.0], "mml": [79.0, 79.5, 80.0]}
    runs = {}
    for m in rte:
        for i, s in enumerate((1, 2, 3)):
            runs["RTE", m, s] = ({"accuracy": rte[m][i] / 100, "active_heads": 7}, {})
            runs["MRPC", m, s] = ({"accuracy": mrpc[m][i] / 100, "active_heads": 7}, {})
    args = argparse.Namespace(methods=["bert", "mml"], tasks=["RTE", "MRPC"], seeds=[1, 2, 3], out_dir=str(tmp_path))
    got = mml_study.write_table1(args, runs)["difference_from_bert"]["mml"]

    def scipy_interval(d):
        return scipy.stats.t.interval(0.95, len(d) - 1, loc=sum(d) / len(d), scale=scipy.stats.sem(d))

    d_rte = [1.0, 1.5, 1.2]
    d_avg = [(a + b) / 2 for a, b in zip(d_rte, [-1.0, 0.5, -1.0])]
    for task, d in (("RTE", d_rte), ("Average", d_avg)):
        want = scipy_interval(d)
        assert got[task]["mean"] == pytest.approx(sum(d) / 3), f"{MOD}.write_table1: {task} paired mean, want {sum(d) / 3}"
        assert (got[task]["low"], got[task]["high"]) == pytest.approx(want), \
            f"{MOD}.write_table1: {task} difference from BERT: expected scipy's paired t-interval {want}, got {got[task]}"
    assert not got["RTE"]["inside_noise"] and got["MRPC"]["inside_noise"], f"{MOD}.write_table1: RTE's interval excludes 0"
    md = (tmp_path / "table1.md").read_text()
    assert "Difference from BERT" in md and "(noise)" in md, f"{MOD}.write_table1: table1.md lacks the difference table:\n{md}"
    assert json.loads((tmp_path / "table1.json").read_text())["difference_from_bert"]["mml"]["RTE"]["values"] == pytest.approx(d_rte)


def test_hold_out_difference_from_bert_is_a_paired_t_interval(tmp_path):
    """Tables 2-5 also give each hold-out cell's difference from BERT trained on the same task, paired by seed:
    d_s = acc(method, s) − acc(BERT, s) (×100), with scipy's t-interval of the d_s. The diagonal has none."""
    import argparse
    import json

    import scipy.stats
    from minbert.tasks.glue import TASKS
    for name in ("MRPC", "STS-B*"):
        (tmp_path / TASKS[name].folder).mkdir(exist_ok=True)
        (tmp_path / TASKS[name].folder / TASKS[name].splits["dev"]).write_text("")
    on_sts = {"bert": [0.70, 0.74, 0.69], "mml": [0.72, 0.73, 0.75]}   # MRPC-trained models scored on STS-B* dev
    runs = {}
    for m, accs in on_sts.items():
        for s, a in zip((1, 2, 3), accs):
            runs["MRPC", m, s] = ({}, {"MRPC": {"dev": {"accuracy": 0.8}}, "STS-B*": {"dev": {"accuracy": a}}})
            runs["STS-B*", m, s] = ({}, {"MRPC": {"dev": {"accuracy": 0.7}}, "STS-B*": {"dev": {"accuracy": 0.9}}})
    args = argparse.Namespace(methods=["bert", "mml"], tasks=["MRPC", "STS-B*"], seeds=[1, 2, 3], out_dir=str(tmp_path),
                              glue_dir=str(tmp_path), extra_datasets=[], profile_on="error")
    report, _ = mml_study.write_cross(args, runs)
    got = report["similarity"]["difference_from_bert"]["mml"]
    d = [2.0, -1.0, 6.0]
    want = scipy.stats.t.interval(0.95, 2, loc=sum(d) / 3, scale=scipy.stats.sem(d))
    cell = got["MRPC"]["STS-B* dev"]
    assert cell["mean"] == pytest.approx(sum(d) / 3) and (cell["low"], cell["high"]) == pytest.approx(want), \
        f"{MOD}.holdout_differences: MML-MRPC on STS-B* dev: expected the paired t-interval {want} of {d}, got {cell}"
    assert "MRPC dev" not in got["MRPC"], f"{MOD}.holdout_differences: the diagonal (MRPC on MRPC) is not a hold-out cell"
    assert "bert" not in report["similarity"]["difference_from_bert"], f"{MOD}.holdout_differences: BERT is the reference"
    md = (tmp_path / "cross_dataset.md").read_text()
    assert "Hold-out cells: difference from BERT" in md, f"{MOD}.write_cross: cross_dataset.md lacks the hold-out differences"
    assert json.loads((tmp_path / "cross_dataset.json").read_text())["similarity"]["difference_from_bert"]["mml"]["MRPC"]


def test_default_methods_are_table_1_s_six_rows():
    methods = mml_study.parse_args([]).methods
    names = [mml_study.paper_name(m) for m in methods]
    assert sorted(names) == sorted(["BERT", "BERT-Drop", "MV-5", "MV-1024", "BERT-Ensemble", "MML"]), \
        f"{MOD}.DEFAULT_METHODS: expected Table 1's six models, got {names}"
    assert mml_study.split_method("ensemble1024") == ("ensemble", 1024), "BERT-Ensemble has 1024 heads (§4.1)"


def test_cost_is_the_error_or_the_inverse_score():
    """--profile_on error ranks 1 − acc (Figure 3's caption); score ranks 1/acc, whose ratio is best/score."""
    assert mml_study.cost(0.8) == pytest.approx(0.2) and mml_study.cost(0.9) == pytest.approx(0.1), f"{MOD}.cost: error = 1 − accuracy"
    ratio = mml_study.cost(0.8, "score") / mml_study.cost(0.9, "score")
    assert ratio == pytest.approx(0.9 / 0.8), f"{MOD}.cost(score): the ratio to the best must be best/score = 1.125, got {ratio}"


# ---------------------------------------------------------------------------- which datasets enter Tables 2-5
def test_quora_is_not_an_extra_dataset_of_tables_3_and_5(tmp_path):
    """Tables 3/5 (similarity) have the columns QQP, MRPC, STS-B*. The CS224N Quora files that
    `python -m minbert download cs224n` puts under the GLUE folder must not become a fourth column (it would
    change the improvement columns and Figure 3's experiments) unless asked for with --extra_datasets."""
    from minbert.tasks.glue import TASKS
    for name in ("MRPC", "QQP", "STS-B*", "Quora", "RTE"):
        info = TASKS[name]
        (tmp_path / info.folder).mkdir(exist_ok=True)
        (tmp_path / info.folder / info.splits["dev"]).write_text("")
    got = mml_study.category_tasks("MRPC", str(tmp_path))
    assert got == ["MRPC", "QQP", "STS-B*"], f"{MOD}.category_tasks(MRPC): expected the paper's Table 3 columns, got {got}"
    got = mml_study.category_tasks("MRPC", str(tmp_path), ["Quora"])
    assert "Quora" in got, f"{MOD}.category_tasks with extra Quora: expected Quora among {got}"
    assert mml_study.category_tasks("Quora", str(tmp_path))[-1] == "Quora", "a Quora-trained model keeps its own diagonal cell"


def test_usage_line_names_the_module(capsys):
    with pytest.raises(SystemExit):
        mml_study.parse_args(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: python bench/mml_study.py"), f"{MOD}: usage line should name `python bench/mml_study.py`, got {out[:60]!r}"


def test_table_1_holm_adjusts_each_column_over_the_methods(tmp_path):
    """Oracles (b) scipy.stats.ttest_rel for each difference's p; (a) Holm by hand for the RTE column: three methods
    against BERT, p sorted ascending times 3, 2, 1, then the running maximum (Holm 1979)."""
    import argparse

    import scipy.stats
    rte = {"bert": [60.0, 62.0, 57.0], "mml": [61.0, 63.5, 58.2], "mv5": [59.0, 62.5, 57.1], "bert-drop": [64.0, 66.0, 60.0]}
    runs = {("RTE", m, s): ({"accuracy": v[i] / 100, "active_heads": 3}, {}) for m, v in rte.items() for i, s in enumerate((1, 2, 3))}
    args = argparse.Namespace(methods=list(rte), tasks=["RTE"], seeds=[1, 2, 3], out_dir=str(tmp_path))
    got = mml_study.write_table1(args, runs)["difference_from_bert"]
    p = {m: scipy.stats.ttest_rel(rte[m], rte["bert"]).pvalue for m in ("mml", "mv5", "bert-drop")}
    order = sorted(p, key=p.get)
    want, running = {}, 0.0
    for k, m in enumerate(order):
        running = max(running, min(1.0, (3 - k) * p[m]))
        want[m] = running
    for m in p:
        assert got[m]["RTE"]["p"] == pytest.approx(p[m], rel=1e-8), f"{MOD}.write_table1: {m} RTE p, want scipy's {p[m]}"
        assert got[m]["RTE"]["p_holm"] == pytest.approx(want[m], rel=1e-8), \
            f"{MOD}.write_table1: {m} RTE Holm-adjusted p over the 3 methods of the column, want {want[m]}, got {got[m]['RTE']['p_holm']}"
    assert "Holm-adjusted" in (tmp_path / "table1.md").read_text(), f"{MOD}.write_table1: table1.md lacks the Holm table"


def test_tables_only_rebuilds_from_records_and_never_trains(tmp_path, monkeypatch):
    """--tables_only: a finished record (metrics.jsonl with every epoch) is tabulated; a missing one stops the
    rewrite with a UserError instead of starting train_mml (which is replaced here by a function that fails)."""
    import json

    import train_mml
    from minbert.core.errors import UserError
    monkeypatch.setattr(train_mml, "main", lambda argv: pytest.fail(f"{MOD}.main trained under --tables_only: {argv}"))
    run = tmp_path / "runs" / "STS-B" / "bert" / "seed1"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "pearson": 0.8, "spearman": 0.81, "active_heads": 1}) + "\n")
    argv = ["--tables_only", "--tasks", "STS-B", "--methods", "bert", "--epochs", "1", "--out_dir", str(tmp_path / "runs")]
    tables = mml_study.main([*argv, "--seeds", "1"])
    assert tables["table1"]["per_seed"]["bert"]["STS-B"] == pytest.approx([81.0]), f"{MOD}.main --tables_only: {tables['table1']}"
    with pytest.raises(UserError, match="tables_only"):
        mml_study.main([*argv, "--seeds", "1,2"])
