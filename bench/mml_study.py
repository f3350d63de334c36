"""The MML paper's study grid: train every (task, method, seed), then write its tables and figure.

Paper: Malkiel & Wolf, EACL 2021 (arXiv:1911.06182), §4.1-4.2, Tables 1-5, Figure 3. Each run is
`train_mml.main([...])` in its own folder out_dir/TASK/METHOD/seedS, with --eval_tasks set to every
dataset of the paper's Tables 2-5 in the training task's category (NLI: MNLI, QNLI, RTE, SNLI;
similarity: QQP, MRPC, STS-B*) that exists under --glue_dir, the training task included (the
diagonal cells). Other datasets of a category (the CS224N Quora files, which
`python -m minbert download cs224n` puts under the GLUE folder) enter only when named in
--extra_datasets: they are not in the paper's tables, and counting them would change the
improvement columns and Figure 3. A run whose metrics.jsonl has every epoch and whose
cross_dataset.json scores every eval task is skipped, so an interrupted study resumes by rerunning
the same command. Method names: bert, bert-drop, mml, mv, ensemble, each optionally followed by a
head count (mv5 = MV-5 = --method mv --heads 5; ensemble1024 = BERT-Ensemble). Outputs in out_dir:

  table1.md/.json   Table 1: rows methods, columns tasks + Average. A cell is the dev score, ×100, of
                    the best epoch, best by the task's paper metric (minbert.methods.mml_protocol.PAPER_METRIC:
                    accuracy, CoLA Matthews, STS-B Spearman), mean ± sample std (ddof 1) over seeds;
                    the last row, "MML #heads", is the active heads of that best-epoch MML model. Below it,
                    each method's difference from BERT paired by seed, per task and for the Average, with
                    a 95% t-interval over seeds (bench.seed_statistics); "(noise)" where it contains 0.
  cross_dataset.md/.json  Tables 2-5, one per category: a row per (method, training task), a
                    column per dataset of the category, cells "train/dev" accuracy ×100 in the
                    category's binary space (seed means). The diagonal is the in-dataset score. The
                    last column is the row's relative average improvement over BERT trained on the
                    same task, over the hold-out datasets only (the diagonal excluded), train and dev
                    separately:  impr(m, t) = mean_{e ≠ t} (acc_m,t(e) / acc_bert,t(e) − 1) × 100%.
                    The appendix's "impr." rows average the same ratio down a column instead: for
                    dataset e, over the training tasks t ≠ e. (Checked against Tables 3 and 5.)
                    Below each table, every hold-out cell's accuracy difference from BERT trained on
                    the same task, paired by seed, with a 95% t-interval (the paper gives none).
  performance_profile.png  Figure 3 (Dolan & Moré 2002, arXiv:cs/0102001) on ERROR, as its caption
                    says: an experiment is one hold-out cell (train task t, eval task e ≠ t, split),
                    error = 1 − seed-mean accuracy; r_m = error_m / min over methods of error;
                    ρ_m(τ) = fraction of experiments with r_m ≤ τ. The §4.2 text reads it as a score
                    ratio instead (best / score ≤ τ): --profile_on score.

Usage:  python bench/mml_study.py --tasks RTE,MRPC --model minilm-l6 --seeds 1,2,3   # default methods
Under each table of differences: each difference's paired t-test p, Holm-adjusted over the methods of its
column (bench.seed_statistics.holm), with the verdict at 0.05 on the adjusted p and the exact sign-flip p
beside it; then the difference each cell's seeds detect with 80% power (seed_statistics.detectable_effect).
Left out: the test-set rows of Table 1 (GLUE's test labels are private), simultaneous (adjusted) intervals,
and running seeds in parallel (one process, one run at a time).
"""

import json
import os
import re
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from anywhere
import train_mml  # noqa: E402

from minbert.core import flags  # noqa: E402
from minbert.core.device import AMP_CHOICES  # noqa: E402
from minbert.core.errors import UserError, cli  # noqa: E402
from minbert.core.flags import at_least, between, positive  # noqa: E402
from minbert.core.report import markdown_table, pyplot  # noqa: E402
from minbert.methods.mml import METHODS  # noqa: E402
from minbert.methods.mml_protocol import PAPER_METRIC, paper_epochs  # noqa: E402
from minbert.tasks.glue import DEFAULT_GLUE_DIR, TASKS, read_glue  # noqa: E402
from bench.seed_statistics import add_holm, format_difference, format_holm, format_mean_sd, format_power  # noqa: E402
from bench.seed_statistics import mean_sd, paired_difference, power_note, sign_flip_note  # noqa: E402

DEFAULT_METHODS = "bert,bert-drop,mv5,mv1024,ensemble1024,mml"   # Table 1's six rows
PAPER_DATASETS = ("MNLI", "QNLI", "RTE", "SNLI", "QQP", "MRPC", "STS-B*")   # the columns of Tables 2-5
SPLITS = ("train", "dev")


def add_args(p) -> None:
    """The study's flags: the grid, and the train_mml.py flags every run shares."""
    g = p.add_argument_group("MML study (Malkiel & Wolf 2021: Table 1, Tables 2-5, Figure 3)")
    g.add_argument("--tasks", default="RTE,MRPC",
                   help="comma list of training tasks; two of one category (nli/similarity) give hold-out cells")
    g.add_argument("--methods", default=DEFAULT_METHODS,
                   help="comma list; keep bert, the reference of every improvement column")
    g.add_argument("--seeds", default="1,2,3", help="comma list of seeds; tables show mean ± std over them")
    g.add_argument("--model", default="bert-base-uncased", help="as train_mml.py --model; minilm-l6 runs offline")
    g.add_argument("--epochs", type=at_least(1), default=None,
                   help="per run; default: the paper's 10/30/100 for large/medium/small sets "
                        "(minbert.methods.mml_protocol.paper_epochs)")
    g.add_argument("--limit", type=at_least(0), default=0,
                   help="at most N examples per split in every run (smoke studies)")
    g.add_argument("--batch_size", type=at_least(1), default=32, help="as train_mml.py")
    g.add_argument("--max_seq_len", type=between(5, 512, int), default=128,
                   help="as train_mml.py; 64 halves CPU time on RTE/MRPC at a small cost")
    g.add_argument("--lr", type=positive, default=2e-5, help="as train_mml.py")
    g.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="as train_mml.py (auto: bf16 where the machine has it natively)")
    g.add_argument("--eliminate_every", type=at_least(1), default=1000,
                   help="as train_mml.py; lower it for short runs so mml eliminates at all")
    g.add_argument("--min_bandwidth", type=at_least(0.0, float), default=0.05,
                   help="as train_mml.py; short runs need ~0.001 (head losses barely spread yet)")
    g.add_argument("--device", default="auto", help="as train_mml.py")
    g.add_argument("--glue_dir", default=DEFAULT_GLUE_DIR, help="folder with GLUE's layout")
    g.add_argument("--profile_on", choices=["error", "score"], default="error",
                   help="Figure 3: error (its caption: error ≤ τ × lowest error) or score (§4.2's text: "
                        "best/score ≤ τ)")
    g.add_argument("--delete_checkpoints", action="store_true",
                   help="delete best.pt/last.pt of each finished run once scored (the tables need none; "
                        "MiniLM: ~0.4 GB per run)")
    g.add_argument("--extra_datasets", default="",
                   help="comma list of category datasets outside the paper's tables to evaluate on too, e.g. Quora")
    g.add_argument("--out_dir", default="runs/mml_study", help="one folder per run, plus the tables and the profile")
    g.add_argument("--tables_only", action="store_true",
                   help="train nothing: rewrite the tables from the finished records (stops if one is missing)")
    g.add_argument("--results_dir", default=None,
                   help="also keep here each finished run's metrics.jsonl and cross_dataset.json (runs/...) and the "
                        "tables (e.g. bench/results/mml_study): commit it, and a later session skips those runs")


def check_args(args, p) -> None:
    """Comma lists -> lists, each item checked (the parser's error names the flag)."""
    args.extra_datasets = [t for t in args.extra_datasets.split(",") if t]
    for t in args.extra_datasets:
        if t not in TASKS or TASKS[t].category is None:
            categorised = [t for t, i in TASKS.items() if i.category]
            p.error(f"--extra_datasets: {flags.unknown('dataset of a category', t, categorised)}")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds {args.seeds}: expected a comma list of integers, e.g. 1,2,3")
    args.tasks = args.tasks.split(",")
    for t in args.tasks:
        if t not in TASKS:
            p.error(f"--tasks: {flags.unknown('task', t, TASKS)}")
    args.methods = args.methods.split(",")
    for m in args.methods:
        split_method(m, p.error)


def parse_args(argv=None):
    p = flags.ArgumentParser(prog="python bench/mml_study.py", description=__doc__)
    add_args(p)
    args = p.parse(argv)
    check_args(args, p)
    return args


def split_method(name, error=None):
    """'mv5' -> ('mv', 5); 'bert-drop' -> ('bert-drop', None)."""
    match = re.fullmatch(r"(.*?)(\d*)", name)
    method, heads = match.group(1), match.group(2)
    if method not in METHODS:
        (error or ValueError)(f"--methods: {flags.unknown('method', name, METHODS)} (each optionally + a head count)")
    return method, int(heads) if heads else None


def paper_name(name):
    """The paper's row label: mv5 -> MV-5, ensemble1024 -> BERT-Ensemble, mml -> MML."""
    method, heads = split_method(name)
    base = {"bert": "BERT", "bert-drop": "BERT-Drop", "mml": "MML", "mv": "MV", "ensemble": "BERT-Ensemble"}[method]
    if heads is None or (method == "ensemble" and heads == 1024):
        return base
    return f"{base}-{heads}"


def category_tasks(task, glue_dir, extra=()):
    """The paper's datasets of `task`'s category (plus `extra`) whose dev file exists under glue_dir, `task`
    included."""
    info = TASKS[task]
    if info.category is None:
        return []
    return [t for t, i in TASKS.items() if i.category == info.category
            and (t in PAPER_DATASETS or t in extra or t == task)
            and os.path.isfile(os.path.join(glue_dir, i.folder, i.splits["dev"]))]


def latest_checkpoint(run_dir):
    """The newer of interrupted.pt and last.pt in run_dir, or None: where an unfinished run continues."""
    found = [p for p in (os.path.join(run_dir, n) for n in ("interrupted.pt", "last.pt")) if os.path.isfile(p)]
    return max(found, key=os.path.getmtime) if found else None


def finished(run_dir, epochs, evals):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        done = {json.loads(line)["epoch"] for line in f if line.strip()}
    if not done >= set(range(1, epochs + 1)):
        return False
    if not evals:
        return True
    cross = os.path.join(run_dir, "cross_dataset.json")
    return os.path.isfile(cross) and set(evals) <= set(json.load(open(cross))["results"])


def best_epoch(records, task):
    """The epoch record with the highest paper metric (the first on ties, as train_mml keeps best.pt)."""
    metric = PAPER_METRIC[task]
    return max(records, key=lambda r: (r[metric], -r["epoch"]))


def improvement(score, reference):
    """Relative improvement in percent, (score / reference − 1) × 100; None without a reference."""
    return None if score is None or not reference else (score / reference - 1) * 100


def row_improvement(acc, method, task, datasets, split):
    """Tables 2-5's last column: mean over hold-out datasets e ≠ task of improvement(method, bert).
    acc[method][train task][eval task][split] = accuracy."""
    gains = [improvement(acc[method][task].get(e, {}).get(split), acc["bert"][task].get(e, {}).get(split))
             for e in datasets if e != task]
    gains = [g for g in gains if g is not None]
    return float(np.mean(gains)) if gains else None


def column_improvement(acc, method, dataset, tasks, split):
    """The appendix's "impr." rows: mean over training tasks t ≠ dataset of improvement(method, bert)."""
    gains = [improvement(acc[method][t].get(dataset, {}).get(split), acc["bert"][t].get(dataset, {}).get(split))
             for t in tasks if t != dataset]
    gains = [g for g in gains if g is not None]
    return float(np.mean(gains)) if gains else None


def cost(accuracy, profile_on="error"):
    """What Figure 3 ranks, lower is better: the error 1 − acc (the caption), or 1 / acc, whose ratio to the
    lowest is best score / score (the §4.2 text's "at least as high as a constant times the best result")."""
    return 1 - accuracy if profile_on == "error" else 1 / accuracy if accuracy > 0 else float("inf")


def profile(errors, methods, taus):
    """Dolan-Moré ρ_m(τ) on errors: each experiment {method: error}; r = error / best (lowest) error.
    When the best error is 0, methods with error 0 have r = 1 and the others r = ∞."""
    ratios = {m: [] for m in methods}
    for e in errors:
        best = min(e[m] for m in methods)
        for m in methods:
            ratios[m].append(e[m] / best if best > 0 else (1.0 if e[m] == 0 else np.inf))
    return {m: [float(np.mean(np.asarray(r) <= tau)) for tau in taus] for m, r in ratios.items()}


def pct(x, signed=False):
    return "–" if x is None else (f"{x:+.2f}%" if signed else f"{100 * x:.2f}")


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    # ------------------------------------------------------------------ runs
    runs = {}   # (task, method, seed) -> (best-epoch record, cross_dataset results)
    epochs = {t: args.epochs or paper_epochs(len(read_glue(args.glue_dir, t, "train")[: args.limit or None]))
              for t in args.tasks}
    # Seed-major order: a study stopped early has every (task, method) for the seeds it finished.
    for seed in args.seeds:
        for task, name in ((t, m) for t in args.tasks for m in args.methods):
            method, heads = split_method(name)
            evals = category_tasks(task, args.glue_dir, args.extra_datasets)
            run_dir = os.path.join(args.out_dir, task, name, f"seed{seed}")
            kept = os.path.join(args.results_dir, "runs", task, name, f"seed{seed}") if args.results_dir else None
            if kept and not finished(run_dir, epochs[task], evals) and finished(kept, epochs[task], evals):
                copy_small_files(kept, run_dir)   # finished in an earlier session: its committed record stands
            if finished(run_dir, epochs[task], evals):
                print(f"skip {run_dir}: finished")
            elif args.tables_only:
                raise UserError(f"{run_dir}: no finished record, and --tables_only trains nothing; "
                                "drop the flag to run it")
            else:
                argv_run = ["--task", task, "--method", method, "--model", args.model, "--glue_dir", args.glue_dir,
                            "--epochs", str(epochs[task]), "--limit", str(args.limit), "--batch_size",
                            str(args.batch_size),
                            "--max_seq_len", str(args.max_seq_len), "--lr", str(args.lr), "--amp", args.amp,
                            "--eliminate_every", str(args.eliminate_every), "--min_bandwidth", str(args.min_bandwidth),
                            "--device", args.device, "--seed", str(seed), "--out_dir", run_dir, "--eval_tasks",
                            ",".join(evals)]
                if heads is not None:
                    argv_run += ["--heads", str(heads)]
                resume = latest_checkpoint(run_dir)
                if resume:   # a run cut short (Ctrl-C: interrupted.pt; killed: last.pt): continue it exactly
                    argv_run += ["--resume", resume]
                print("run train_mml.py", " ".join(argv_run))
                train_mml.main(argv_run)
            # scored: the tables need no weights
            if args.delete_checkpoints and finished(run_dir, epochs[task], evals):
                for checkpoint in ("best.pt", "last.pt", "interrupted.pt"):
                    if os.path.isfile(os.path.join(run_dir, checkpoint)):
                        os.remove(os.path.join(run_dir, checkpoint))
            if kept:
                copy_small_files(run_dir, kept)
            with open(os.path.join(run_dir, "metrics.jsonl")) as f:
                records = [json.loads(line) for line in f if line.strip()]
            cross_path = os.path.join(run_dir, "cross_dataset.json")
            cross = json.load(open(cross_path))["results"] if os.path.isfile(cross_path) else {}
            runs[task, name, seed] = (best_epoch(records, task), cross)
    tables = {"table1": write_table1(args, runs)}
    tables["cross"], errors = write_cross(args, runs)
    tables["errors"] = errors
    plot_profile(os.path.join(args.out_dir, "performance_profile.png"), errors, args.methods, args.profile_on)
    if args.results_dir:   # the tables and the profile, beside the kept runs
        for name in ("table1.md", "table1.json", "cross_dataset.md", "cross_dataset.json", "performance_profile.png"):
            if os.path.isfile(os.path.join(args.out_dir, name)):
                shutil.copy(os.path.join(args.out_dir, name), os.path.join(args.results_dir, name))
    return tables


def copy_small_files(source, dest) -> None:
    """A run's record that the tables read (metrics.jsonl, cross_dataset.json), without its weights."""
    os.makedirs(dest, exist_ok=True)
    for name in ("metrics.jsonl", "cross_dataset.json"):
        if os.path.isfile(os.path.join(source, name)):
            shutil.copy(os.path.join(source, name), os.path.join(dest, name))


def write_table1(args, runs):
    """Table 1 (dev rows): paper metric ×100 of the best epoch, mean ± std over seeds; MML #heads. Then each
    method's paired difference from BERT on the same seed, per task and for the Average, with a 95% t-interval."""
    per_seed = {m: {t: [100 * runs[t, m, s][0][PAPER_METRIC[t]] for s in args.seeds] for t in args.tasks}
                for m in args.methods}
    for m in per_seed:   # the Average column, seed by seed (so that its difference is paired too)
        per_seed[m]["Average"] = [float(np.mean(v)) for v in zip(*(per_seed[m][t] for t in args.tasks))]
    table, rows, diff_rows, difference = {}, [], [], {}
    for m in args.methods:
        table[m] = {t: mean_sd(per_seed[m][t]) for t in args.tasks}
        row = {"model": paper_name(m), **{t: format_mean_sd(mu, sd, 1) for t, (mu, sd) in table[m].items()}}
        row["Average"] = f"{mean_sd(per_seed[m]['Average'])[0]:.1f}"   # = the mean of the task means
        rows.append(row)
        if m != "bert" and "bert" in per_seed:
            difference[m] = {t: paired_difference(per_seed[m][t], per_seed["bert"][t])
                             for t in [*args.tasks, "Average"]}
            diff_rows.append({"model": paper_name(m), **{t: format_difference(d, 1) for t, d in difference[m].items()}})
    for t in [*args.tasks, "Average"]:   # one Holm family per column: every method against BERT
        add_holm([difference[m][t] for m in difference])
    holm_rows = [{"model": paper_name(m), **{t: format_holm(d) for t, d in difference[m].items()}} for m in difference]
    heads = {m: {t: mean_sd([runs[t, m, s][0]["active_heads"] for s in args.seeds]) for t in args.tasks}
             for m in args.methods if split_method(m)[0] == "mml"}
    for m, by_task in heads.items():
        rows.append({"model": f"{paper_name(m)} #heads",
                     **{t: format_mean_sd(mu, sd, 0) for t, (mu, sd) in by_task.items()},
                     "Average": "–"})
    columns = ["model", *[f"{t}" for t in args.tasks], "Average"]
    metrics = ", ".join(f"{t} {PAPER_METRIC[t]}" for t in args.tasks)
    md = (f"# Table 1 (development set): best-epoch score ×100, mean ± std over seeds {args.seeds}\n\n"
          f"Metric per task as in the paper ({metrics}); the best epoch is chosen by it. "
          f"#heads: active heads of that best-epoch model.\n\n" + markdown_table(rows, columns) + "\n")
    if diff_rows:
        md += ("\n## Difference from BERT, paired by seed (×100)\n\nmean [95% t-interval over seeds, n − 1 df]; "
               "\"(noise)\": the interval contains 0. Average: the mean over the tasks, per seed.\n\n"
               + markdown_table(diff_rows, columns) + "\n")
        md += (f"\n## Multiplicity: Holm-adjusted p of each difference above\n\nPaired t-test over seeds (two-sided), "
               f"Holm-adjusted over the {len(difference)} methods of each column (every method against BERT). Cell: "
               "adjusted p, the verdict at 0.05 on it (higher / lower than BERT, or noise), then the unadjusted p. "
               "Read verdicts from this table; the intervals above are unadjusted. " + sign_flip_note(len(args.seeds))
               + "\n\n" + markdown_table(holm_rows, columns) + "\n")
        power_rows = [{"model": paper_name(m),
                       **{t: format_power(d, len(args.seeds), len(difference), 1) for t, d in difference[m].items()}}
                      for m in difference]
        md += ("\n## Power: the difference these seeds could detect (×100)\n\n"
               + power_note(len(args.seeds), len(difference))
               + f" Cell: at 0.05 / at 0.05/{len(difference)}.\n\n" + markdown_table(power_rows, columns) + "\n")
    with open(os.path.join(args.out_dir, "table1.md"), "w") as f:
        f.write(md)
    out = {"scores": {m: {t: dict(zip(("mean", "std"), v)) for t, v in d.items()} for m, d in table.items()},
           "per_seed": per_seed, "difference_from_bert": difference,
           "mml_heads": {m: {t: dict(zip(("mean", "std"), v)) for t, v in d.items()} for m, d in heads.items()},
           "metric": {t: PAPER_METRIC[t] for t in args.tasks}, "seeds": args.seeds}
    with open(os.path.join(args.out_dir, "table1.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(md)
    return out


def write_cross(args, runs):
    """Tables 2-5 per category, and the hold-out errors that Figure 3 profiles."""
    per_seed = {}   # method -> train task -> eval task -> split -> per-seed accuracies
    for t, m in ((t, m) for t in args.tasks for m in args.methods):
        for e in category_tasks(t, args.glue_dir, args.extra_datasets):
            for split in SPLITS:
                scores = [runs[t, m, s][1].get(e, {}).get(split, {}).get("accuracy") for s in args.seeds]
                if all(x is not None for x in scores):
                    per_seed.setdefault(m, {}).setdefault(t, {}).setdefault(e, {})[split] = scores

    def over_seeds(i):   # the same nesting with mean_sd(scores)[i] in every cell: 0 the seed mean, 1 the sd
        return {m: {t: {e: {s: mean_sd(v)[i] for s, v in by_split.items()} for e, by_split in by_eval.items()}
                    for t, by_eval in by_task.items()} for m, by_task in per_seed.items()}
    acc, std = over_seeds(0), over_seeds(1)
    md, report, errors = [], {}, []
    categories = sorted({TASKS[t].category for t in args.tasks if TASKS[t].category})
    for cat in categories:
        tasks = [t for t in args.tasks if TASKS[t].category == cat]
        datasets = [e for e in TASKS if any(e in acc.get(m, {}).get(t, {}) for m in args.methods for t in tasks)]
        rows, rep = [], {"datasets": datasets, "rows": [], "impr": {}}
        for t in tasks:
            for m in args.methods:
                cells = acc.get(m, {}).get(t, {})
                row = {"model": f"{paper_name(m)}-{t}"}
                for e in datasets:
                    row[e] = "/".join(pct(cells.get(e, {}).get(s)) for s in SPLITS)
                gains = {s: (row_improvement(acc, m, t, datasets, s) if m != "bert" and "bert" in acc else None)
                         for s in SPLITS}
                row["Improvement compared to BERT"] = "-" if m == "bert" else "/".join(pct(gains[s], True)
                                                                                       for s in SPLITS)
                rows.append(row)
                rep["rows"].append({"method": m, "train_task": t, "accuracy": cells,
                                    "std": std.get(m, {}).get(t, {}), "improvement_pct": gains})
        for m in args.methods:
            if m == "bert" or "bert" not in acc:
                continue
            gains = {e: {s: column_improvement(acc, m, e, tasks, s) for s in SPLITS} for e in datasets}
            rows.append({"model": f"{paper_name(m)} impr.",
                         **{e: "/".join(pct(g[s], True) for s in SPLITS) for e, g in gains.items()}})
            rep["impr"][m] = gains
        md.append(f"## {cat}: train/dev accuracy ×100 (seed means)\n\n"
                  + markdown_table(rows, ["model", *datasets, "Improvement compared to BERT"]))
        rep["difference_from_bert"], diff_md = holdout_differences(per_seed, tasks, datasets, args.methods)
        if diff_md:
            md.append(diff_md)
        report[cat] = rep
        for t in tasks:   # Figure 3's experiments: hold-out cells that every method has
            for e in datasets:
                for s in SPLITS:
                    cell = [acc.get(m, {}).get(t, {}).get(e, {}).get(s) for m in args.methods]
                    if e != t and all(x is not None for x in cell):
                        errors.append({m: cost(a, args.profile_on) for m, a in zip(args.methods, cell)})
    head = ("# Tables 2-5: cross-dataset evaluation (rows: model trained on one task; cells train/dev accuracy ×100 "
            "in the category's binary space; the diagonal is the in-dataset score). Last column: "
            "mean over the hold-out "
            "datasets (diagonal excluded) of (acc / acc of BERT trained on the same task − 1), train/dev. "
            "\"impr.\" rows: the same ratio averaged down each column over the models trained on the other tasks.\n\n")
    with open(os.path.join(args.out_dir, "cross_dataset.md"), "w") as f:
        f.write(head + "\n\n".join(md) + "\n")
    with open(os.path.join(args.out_dir, "cross_dataset.json"), "w") as f:
        json.dump(report, f, indent=1)
    print("\n\n".join(md))
    return report, errors


def holdout_differences(per_seed, tasks, datasets, methods):
    """Each hold-out cell's accuracy (×100) minus that of BERT trained on the same task, paired by seed, with a
    95% t-interval: {method: {train task: {"eval split": difference}}}, and its markdown table ("" if none)."""
    def scores(m, t, e, s):   # per-seed accuracies ×100, or None
        x = per_seed.get(m, {}).get(t, {}).get(e, {}).get(s)
        return None if x is None else [100 * a for a in x]
    out, rows = {}, []
    for t in tasks:
        for m in (m for m in methods if m != "bert"):
            row = {f"{e} {s}": paired_difference(scores(m, t, e, s), scores("bert", t, e, s))
                   for e in datasets if e != t for s in SPLITS
                   if scores(m, t, e, s) is not None and scores("bert", t, e, s) is not None}
            if row:
                out.setdefault(m, {})[t] = row
                rows.append({"model": f"{paper_name(m)}-{t}", **{c: format_difference(d, 1) for c, d in row.items()}})
    if not rows:
        return out, ""
    columns = [f"{e} {s}" for e in datasets for s in SPLITS if any(f"{e} {s}" in r for r in rows)]
    keys = [(m, t) for m in out for t in out[m]]   # one Holm family per column: every (method, training task) row
    for c in columns:
        add_holm([out[m][t].get(c) for m, t in keys])
    holm_rows = [{"model": f"{paper_name(m)}-{t}", **{c: format_holm(d) for c, d in out[m][t].items()}}
                 for t in tasks for m in methods if t in out.get(m, {})]
    n = len(next(d for m, t in keys for d in out[m][t].values())["values"])   # seeds per cell
    family = {c: sum(c in out[m][t] for m, t in keys) for c in columns}   # Holm's m: the rows that have the column
    power_rows = [{"model": f"{paper_name(m)}-{t}",
                   **{c: format_power(d, n, family[c], 1) for c, d in out[m][t].items()}}
                  for t in tasks for m in methods if t in out.get(m, {})]
    m_shown = max(family.values())   # every column of the shipped tables has the same number of rows
    return out, ("### Hold-out cells: difference from BERT trained on the same task, paired by seed (×100)\n\n"
                 "mean [95% t-interval over seeds, n − 1 df]; \"(noise)\": the interval contains 0.\n\n"
                 + markdown_table(rows, ["model", *columns])
                 + "\n\nHolm-adjusted p of each cell above (paired t-test over seeds, Holm over the "
                   "rows of each column; "
                 "verdict at 0.05 on the adjusted p, then the unadjusted p and the sign-flip p). " + sign_flip_note(n)
                 + "\n\n"
                 + markdown_table(holm_rows, ["model", *columns])
                 + "\n\nPower (×100): " + power_note(n, m_shown)
                 + " Cell: at 0.05 / at 0.05/m, m the rows of its column"
                 + (f" ({m_shown})" if len(set(family.values())) == 1 else "") + ".\n\n"
                 + markdown_table(power_rows, ["model", *columns]))


def plot_profile(path, errors, methods, profile_on="error") -> bool:
    """Figure 3: ρ_m(τ) against τ for every method, as a step plot."""
    plt = pyplot(path)   # None (and a note) without matplotlib
    if plt is None:
        return False
    finite = [e[m] / min(e.values()) for e in errors for m in methods if min(e.values()) > 0]
    taus = np.linspace(1.0, max(finite + [1.0]) * 1.05 + 1e-3, 400)
    rho = profile(errors, methods, taus) if errors else {m: [0.0] * len(taus) for m in methods}
    fig, ax = plt.subplots(figsize=(5, 4))
    for i, m in enumerate(methods):   # line styles cycle so that identical curves stay visible
        ax.step(taus, rho[m], where="post", label=paper_name(m), ls=("-", "--", "-.", ":")[i % 4], lw=1.5)
    what = "error" if profile_on == "error" else "1/accuracy"
    ax.set(xlabel=f"τ ({what} / lowest {what} of any method)", ylabel=f"fraction of experiments with {what} ≤ τ·best",
           title=f"Dolan-Moré profile ({len(errors)} hold-out experiments)", ylim=(0, 1.05))
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


if __name__ == "__main__":
    cli(main)
