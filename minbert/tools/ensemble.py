"""python -m minbert ensemble: combine finished multitask runs from their stored outputs (no model is reloaded).

The method (Song, Hu & Pan §3.1 and Algorithm 1: weighted average or weighted majority vote; weights greedy,
ranked, ranked_overall, uniform or given; their tie-breaking) is minbert/methods/ensemble.py; this is the command
around it: each run's outputs.pt read and its rows aligned to the first run's ids, --weights and --prior parsed,
the files written. With one member and any weight, every prediction file is byte for byte the member's own.

Usage:  python -m minbert ensemble runs/a runs/b runs/c --method average --out_dir runs/ensemble
Writes OUT_DIR/predictions/ (the handout's six files) and OUT_DIR/members.md + members.json: each member's weight
and dev scores, and the ensemble's.
"""

import os
import sys
from pathlib import Path

import torch

from minbert.core import flags
from minbert.core.errors import UserError
from minbert.core.export import load_outputs, write_json
from minbert.run.run_dir import refuse_to_replace
from minbert.core.report import markdown_table
from minbert.methods.ensemble import (METHODS, TASKS, combine, dev_scores, for_task, greedy_select,
                                      ranked_overall_select, ranked_select)
from minbert.tasks.data import PREDICTION_HEADERS, STAND_IN_PARA_TEST, write_predictions


def aligned(runs: list[dict], split: str) -> list[dict]:
    """Each member's {task: entry} of `split`, rows reordered to the first member's id order.
    Only tasks every member has (a run may skip a test file) are kept."""
    tasks = [t for t in TASKS if all(t in r.get(split, {}) for r in runs)]
    out = [{} for _ in runs]
    for task in tasks:
        ids = runs[0][split][task]["ids"]
        for k, run in enumerate(runs):
            entry = run[split][task]
            position = {x: j for j, x in enumerate(entry["ids"])}
            if len(position) != len(ids) or set(position) != set(ids):
                raise UserError(f"member {k + 1}: its {split} {task} ids differ from member 1's; "
                                "ensembles need runs on the same data files (and the same --limit)")
            order = torch.tensor([position[x] for x in ids])
            out[k][task] = {key: (v[order] if torch.is_tensor(v) else ids) for key, v in entry.items()}
    return out


FITTED = ("greedy", "ranked", "ranked_overall")


def per_run(flag: str, text: str, n: int, ok, expected: str) -> list[float]:
    """`text` as one number per RUN_DIR ('2,1,1'), each list passing `ok`; else a UserError saying what was expected."""
    try:
        values = [float(w) for w in text.split(",")]
    except ValueError:
        values = []
    if len(values) != n or not ok(values):
        raise UserError(f"{flag} {text}: expected {expected.format(n=n)} separated by commas, one per RUN_DIR")
    return values


def add_args(p) -> None:
    g = p.add_argument_group("Ensembles (Song, Hu & Pan §3.1, Algorithm 1; Caruana et al. 2004)")
    g.add_argument("runs", nargs="+",
                   help="--out_dir folders of finished train_multitask.py runs (each holds outputs.pt)")
    g.add_argument("--method", choices=METHODS, default="average",
                   help="average: weighted mean of probabilities/scores (the report's best); vote: weighted "
                        "majority vote of classes")
    g.add_argument("--weights", default="greedy",
                   help="greedy: fitted on dev by forward selection with replacement; ranked: the report's Algorithm "
                        "1, per task, with --prior; "
                        "ranked_overall: one pass ranked by dev overall; uniform; or one number per run, e.g. 2,1,1")
    g.add_argument("--prior", default=None,
                   help="with --weights ranked: Algorithm 1's prior weight of each run, e.g. 2,1,1 (default 1 each)")
    g.add_argument("--out_dir", default="runs/ensemble",
                   help="predictions/ (the handout's six files), members.md, members.json")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the predictions/, members.md and members.json already in --out_dir (default: refuse)")


def check_args(args, p) -> None:
    if args.prior is not None and args.weights != "ranked":
        p.error("--prior is Algorithm 1's prior weight: it needs --weights ranked")


def main(argv=None):
    p = flags.ArgumentParser(prog="python -m minbert ensemble", description=__doc__)
    add_args(p)
    args = p.parse(argv, sys.modules[__name__])   # then check_args
    if not args.overwrite:   # e.g. --out_dir of a run: its own predictions/ are never replaced without asking
        refuse_to_replace([os.path.join(args.out_dir, n) for n in ("predictions", "members.md", "members.json")])

    runs = [load_outputs(r) for r in args.runs]
    dev, test = aligned(runs, "dev"), aligned(runs, "test")
    if len(dev[0]) != len(TASKS):
        raise UserError(f"every run needs dev outputs of {TASKS}; got {sorted(dev[0])}")
    n = len(runs)
    prior = None if args.prior is None else per_run("--prior", args.prior, n, lambda w: min(w) > 0,
                                                    "{n} positive numbers (Algorithm 1's prior weights ŵ_i)")
    if args.weights == "ranked":
        weights = ranked_select(dev, args.method, prior)
    elif args.weights in FITTED:
        select = greedy_select if args.weights == "greedy" else ranked_overall_select
        weights = [float(c) for c in select(dev, args.method)]
    else:
        weights = [1.0] * n if args.weights == "uniform" else per_run(
            "--weights", args.weights, n, lambda w: min(w) >= 0 and sum(w) > 0,
            "'greedy', 'ranked', 'ranked_overall', 'uniform' or {n} non-negative numbers, not all 0,")

    def shown(k):   # one weight, or sst/para/sts weights when they differ per task
        w = [for_task(weights, t)[k] for t in TASKS]
        return w[0] if len(set(w)) == 1 else "/".join(f"{x:g}" for x in w)

    rows = []
    for k, run_dir in enumerate(args.runs):
        one = [1.0 if j == k else 0.0 for j in range(len(runs))]
        rows.append({"member": run_dir, "weight": shown(k),
                     **{key: round(v, 4) for key, v in dev_scores(dev, one, "average").items()}})
    ensemble = dev_scores(dev, weights, args.method)
    rows.append({"member": f"ensemble ({args.method}, {args.weights} weights)", "weight": "",
                 **{key: round(v, 4) for key, v in ensemble.items()}})

    for split, members in (("dev", dev), ("test", test)):
        for task in members[0]:
            values = combine(task, [m[task] for m in members], for_task(weights, task), args.method)
            ids = members[0][task]["ids"]
            # the Quora test file was the dev sample standing in (train_multitask.py names it so): say so here too
            stand_in = split == "test" and task == "para" and ids == dev[0].get("para", {}).get("ids")
            name = STAND_IN_PARA_TEST if stand_in else f"{task}-{split}-output.csv"
            path = os.path.join(args.out_dir, "predictions", name)
            write_predictions(path, PREDICTION_HEADERS[task], ids, values)
    table = markdown_table(rows, ["member", "weight", "sst_acc", "para_acc", "sts_pearson", "overall"])
    Path(args.out_dir, "members.md").write_text(table + "\n")
    write_json(os.path.join(args.out_dir, "members.json"),
               {"method": args.method, "weights_from": args.weights, "prior": prior, "weights": weights, "rows": rows})
    print(table)
    print(f"dev overall: ensemble {ensemble['overall']:.4f}, best member {max(r['overall'] for r in rows[:-1]):.4f}"
          + (" (weights fitted on this dev set: the ensemble's dev score is optimistic)" if args.weights in FITTED
             else ""))
    return rows

