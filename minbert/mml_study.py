"""The MML paper's study grid: train every (task, method, seed), then write its tables and figure.

Paper: Malkiel & Wolf, EACL 2021 (arXiv:1911.06182). Each run is `train_mml.main([...])` in its own
folder out_dir/TASK/METHOD/seedS, with --eval_tasks set to the other tasks of the training task's
category that exist under --glue_dir. A run whose metrics.jsonl already has every epoch (and its
cross_dataset.json, when it has eval tasks) is skipped, so an interrupted study resumes by rerunning
the same command. Outputs in out_dir:
  table1.md/.json          Table 1: dev score (the best epoch's headline metric, as best.pt keeps)
                           per task × method, mean ± sample std (ddof 1) over seeds.
  cross_dataset.md/.json   Tables 2/3: category-level accuracy of each model on the other datasets
                           of its category (rows train task, columns eval task and split), per
                           method, with the relative improvement over BERT, (m − bert)/bert × 100%.
  performance_profile.png  Figure 3 (Dolan & Moré 2002, arXiv:cs/0102001): an experiment is one
                           (train task, eval task, split) cell; r = best score / method's score;
                           ρ_m(τ) = fraction of experiments with r ≤ τ.
Method names: bert, bert-drop, mml, mv, ensemble, each optionally followed by a head count
(mv5 = MV-5 = --method mv --heads 5; mml16 = MML with 16 heads).

    python -m minbert.mml_study --tasks RTE,MRPC --methods bert,bert-drop,mv5,mml --seeds 1,2
Left out: significance tests, and running seeds in parallel (one process, one run at a time).
"""

import argparse
import json
import os
import re

import numpy as np

from minbert.glue import DEFAULT_GLUE_DIR, TASKS
from minbert.mml import METHODS
from minbert.report import markdown_table


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="RTE,MRPC", help="comma list of training tasks; a category (nli/similarity) gives cross-dataset tables")
    p.add_argument("--methods", default="bert,bert-drop,mv5,mml", help="comma list; include bert, the reference of the improvement columns")
    p.add_argument("--seeds", default="1,2", help="comma list of seeds; tables show mean ± std over them")
    p.add_argument("--model", default="bert-base-uncased", help="as train_mml.py --model; minilm-l6 runs offline")
    p.add_argument("--epochs", type=int, default=3, help="per run; the paper: 10/30/100 for large/medium/small sets")
    p.add_argument("--limit", type=int, default=0, help="at most N examples per split in every run (smoke studies)")
    p.add_argument("--batch_size", type=int, default=32, help="as train_mml.py")
    p.add_argument("--lr", type=float, default=2e-5, help="as train_mml.py")
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off", help="as train_mml.py")
    p.add_argument("--eliminate_every", type=int, default=1000, help="as train_mml.py; lower it for short runs so mml eliminates at all")
    p.add_argument("--min_bandwidth", type=float, default=0.05, help="as train_mml.py; short runs need ~0.001 (head losses barely spread yet)")
    p.add_argument("--device", default="auto", help="as train_mml.py")
    p.add_argument("--glue_dir", default=DEFAULT_GLUE_DIR, help="folder with GLUE's layout")
    p.add_argument("--out_dir", default="runs/mml_study", help="one folder per run, plus the tables and the profile")
    args = p.parse_args(argv)
    args.tasks, args.seeds = args.tasks.split(","), [int(s) for s in args.seeds.split(",")]
    args.methods = args.methods.split(",")
    for m in args.methods:
        split_method(m, p.error)
    return args


def split_method(name, error=None):
    """'mv5' -> ('mv', 5); 'bert-drop' -> ('bert-drop', None)."""
    match = re.fullmatch(r"(.*?)(\d*)", name)
    method, heads = match.group(1), match.group(2)
    if method not in METHODS:
        (error or ValueError)(f"unknown method {name!r}: expected one of {', '.join(METHODS)}, optionally + head count")
    return method, int(heads) if heads else None


def eval_tasks(task, glue_dir):
    """The other tasks of `task`'s category whose dev file exists under glue_dir."""
    info = TASKS[task]
    if info.category is None:
        return []
    return [t for t, i in TASKS.items() if t != task and i.category == info.category
            and os.path.isfile(os.path.join(glue_dir, i.folder, i.splits["dev"]))]


def finished(run_dir, epochs, needs_cross):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        return False
    with open(path) as f:
        done = {json.loads(line)["epoch"] for line in f if line.strip()}
    return done >= set(range(1, epochs + 1)) and (not needs_cross or os.path.isfile(os.path.join(run_dir, "cross_dataset.json")))


def mean_std(values):
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0


def fmt(ms):
    return f"{ms[0]:.4f} ± {ms[1]:.4f}"


def main(argv=None):
    import train_mml   # the script at the repo root; imported here so `import minbert.mml_study` stays cheap

    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    # ------------------------------------------------------------------ runs
    results = {}   # (task, method, seed) -> (dev headline score, cross_dataset results)
    for task in args.tasks:
        others = eval_tasks(task, args.glue_dir)
        for name in args.methods:
            method, heads = split_method(name)
            for seed in args.seeds:
                run_dir = os.path.join(args.out_dir, task, name, f"seed{seed}")
                if finished(run_dir, args.epochs, bool(others)):
                    print(f"skip {run_dir}: finished")
                else:
                    argv_run = ["--task", task, "--method", method, "--model", args.model, "--glue_dir", args.glue_dir,
                                "--epochs", str(args.epochs), "--limit", str(args.limit), "--batch_size", str(args.batch_size),
                                "--lr", str(args.lr), "--amp", args.amp, "--eliminate_every", str(args.eliminate_every),
                                "--min_bandwidth", str(args.min_bandwidth), "--device", args.device, "--seed", str(seed),
                                "--out_dir", run_dir, "--eval_tasks", ",".join(others)]
                    if heads is not None:
                        argv_run += ["--heads", str(heads)]
                    if os.path.isfile(os.path.join(run_dir, "last.pt")):   # a run cut short: continue it
                        argv_run += ["--resume", os.path.join(run_dir, "last.pt")]
                    print("run train_mml.py", " ".join(argv_run))
                    train_mml.main(argv_run)
                with open(os.path.join(run_dir, "metrics.jsonl")) as f:
                    headline = TASKS[task].metrics[0]
                    dev = max(json.loads(line)[headline] for line in f if line.strip())
                cross_path = os.path.join(run_dir, "cross_dataset.json")
                cross = {}
                if os.path.isfile(cross_path):
                    with open(cross_path) as f:
                        cross = json.load(f)["results"]
                results[task, name, seed] = (dev, cross)

    # ------------------------------------------------------------------ Table 1: dev scores
    table1 = {t: {m: mean_std([results[t, m, s][0] for s in args.seeds]) for m in args.methods} for t in args.tasks}
    rows = [{"task": f"{t} ({TASKS[t].metrics[0]})", **{m: fmt(table1[t][m]) for m in args.methods}} for t in args.tasks]
    md1 = markdown_table(rows, ["task", *args.methods])
    with open(os.path.join(args.out_dir, "table1.md"), "w") as f:
        f.write(f"# Table 1: dev score, mean ± std over seeds {args.seeds}\n\n{md1}\n")
    with open(os.path.join(args.out_dir, "table1.json"), "w") as f:
        json.dump({t: {m: dict(zip(("mean", "std"), v)) for m, v in d.items()} for t, d in table1.items()}, f, indent=1)

    # ------------------------------------------------------------------ Tables 2/3: cross-dataset accuracy
    cross = {}   # train task -> eval task -> method -> split -> {mean, std, improvement_pct}
    for t in args.tasks:
        for e in eval_tasks(t, args.glue_dir):
            for split in ("train", "dev"):
                per_method = {}
                for m in args.methods:
                    scores = [results[t, m, s][1].get(e, {}).get(split, {}).get("accuracy") for s in args.seeds]
                    if all(x is not None for x in scores):
                        per_method[m] = mean_std(scores)
                for m, (mu, sd) in per_method.items():
                    ref = per_method.get("bert", (None,))[0]
                    gain = round((mu - ref) / ref * 100, 2) if ref else None
                    cell = cross.setdefault(t, {}).setdefault(e, {}).setdefault(m, {})
                    cell[split] = {"mean": mu, "std": sd, "improvement_pct": gain}
    md2 = []
    for m in args.methods:
        rows = []
        for t, evals in cross.items():
            row = {"train task": t}
            for e, by_method in evals.items():
                for split, c in by_method.get(m, {}).items():
                    gain = "" if c["improvement_pct"] is None else f" ({c['improvement_pct']:+.2f}%)"
                    row[f"{e} {split}"] = f"{c['mean']:.4f}{gain}"
            rows.append(row)
        columns = sorted({c for r in rows for c in r if c != "train task"})
        md2.append(f"## {m}: category accuracy (relative improvement over bert)\n\n" + markdown_table(rows, ["train task", *columns]))
    with open(os.path.join(args.out_dir, "cross_dataset.md"), "w") as f:
        f.write("# Tables 2/3: cross-dataset accuracy in the category's binary space\n\n" + "\n\n".join(md2) + "\n")
    with open(os.path.join(args.out_dir, "cross_dataset.json"), "w") as f:
        json.dump(cross, f, indent=1)

    # ------------------------------------------------------------------ Figure 3: performance profile
    experiments = [{m: c[m][split]["mean"] for m in args.methods}
                   for evals in cross.values() for c in evals.values() for split in ("train", "dev")
                   if all(split in c.get(m, {}) for m in args.methods)]
    plot_profile(os.path.join(args.out_dir, "performance_profile.png"), experiments, args.methods)
    print(md1 + "\n\n" + "\n\n".join(md2))
    return {"table1": table1, "cross": cross, "experiments": experiments}


def profile(experiments, methods, taus):
    """ρ_m(τ) for each method: fraction of experiments with best/score ≤ τ (score 0: r = ∞)."""
    ratios = {m: [] for m in methods}
    for scores in experiments:
        best = max(scores.values())
        for m in methods:
            ratios[m].append(best / scores[m] if scores[m] > 0 else np.inf)
    return {m: [float(np.mean(np.asarray(r) <= tau)) for tau in taus] for m, r in ratios.items()}


def plot_profile(path, experiments, methods) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")   # files only, no window
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no {path}")
        return False
    finite = [max(s.values()) / v for s in experiments for v in s.values() if v > 0]
    taus = np.linspace(1.0, max(finite + [1.0]) * 1.05 + 1e-3, 200)
    rho = profile(experiments, methods, taus) if experiments else {m: [0.0] * len(taus) for m in methods}
    fig, ax = plt.subplots(figsize=(5, 4))
    for m in methods:
        ax.step(taus, rho[m], where="post", label=m)
    ax.set(xlabel="τ (best score / method score)", ylabel="fraction of experiments",
           title=f"performance profile ({len(experiments)} experiments)", ylim=(0, 1.05))
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


if __name__ == "__main__":
    main()
