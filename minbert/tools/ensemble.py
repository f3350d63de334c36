"""Ensembles of finished multitask runs, from their stored outputs (no model is reloaded).

Song, Hu & Pan (CS224N report, §3.1 and appendix Algorithm 1) combine k fine-tuned models:

    weighted average        f(x) = Σ_i W_i f(x; θ_i) / Σ_i W_i
    weighted majority vote  f(x) = C_j  with the largest Σ_{i: f(x; θ_i) = C_j} W_i

where f(x; θ_i) is member i's class probabilities (SST: softmax of the 5 logits; Quora: sigmoid of the logit) or
its STS score; the vote counts each member's predicted class. Their 7-model ensemble reached dev overall 0.786
against 0.778 for their best single model. The weights (--weights):
  greedy          fitted on dev by forward selection WITH replacement (Caruana et al. 2004): each round adds the
                  member that gives the highest dev overall, until no addition strictly improves it; a member's
                  weight is the number of times it was added.
  ranked          the report's Algorithm 1 ("Greedy model soup", Wortsman et al. 2022, applied to outputs), per
                  TASK: members sorted by their own dev score on that task, Fin starts empty, and member i joins
                  with its prior weight ŵ_i (--prior 2,1,1; default 1 each) if it raises that task's score.
  ranked_overall  one pass ranked by dev overall, weights shared by the tasks.
  uniform, 2,1,1  no fitting.

Tie-breaking (so results are reproducible): greedy and ranked keep the member listed first on the command line;
the vote takes the smallest class id among equal totals; the average takes SST's first largest probability and
predicts Quora 1 only when the averaged probability is > 0.5; STS is a regression, always the weighted average.
Dev scores of a fitted ensemble are optimistic; the test predictions are not. With one member and any weight,
every prediction file is byte for byte the member's own.

Usage:  python -m minbert ensemble runs/a runs/b runs/c --method average --out_dir runs/ensemble
Writes OUT_DIR/predictions/ (the handout's six files) and OUT_DIR/members.md + members.json: each member's weight
and dev scores, and the ensemble's. Left out: stacking, weighting per example, averaging parameters (a model soup).
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
from minbert.tasks.data import PREDICTION_HEADERS, STAND_IN_PARA_TEST, write_predictions
from minbert.tasks.metrics import accuracy, cs224n_overall, pearson

TASKS = ("sst", "para", "sts")
METHODS = ("average", "vote")
SCORE_KEYS = {"sst": "sst_acc", "para": "para_acc", "sts": "sts_pearson"}


def probabilities(task: str, outputs: torch.Tensor) -> torch.Tensor:
    """Raw head outputs -> f(x; θ) in float64: sst (N, 5) softmax, para (N,) sigmoid, sts (N,) scores."""
    outputs = outputs.double()
    if task == "sst":
        return outputs.softmax(-1)
    if task == "para":
        return outputs.sigmoid()
    return outputs


def decide(task: str, f: torch.Tensor) -> list:
    """Averaged f -> prediction-file values: sst class, para 0/1, sts float."""
    if task == "sst":
        return f.argmax(-1).tolist()
    if task == "para":
        return (f > 0.5).long().tolist()
    return f.tolist()


def weighted_average(fs: list[torch.Tensor], weights: list[float]) -> torch.Tensor:
    """Σ_i W_i f_i / Σ_i W_i over members with weight > 0."""
    return sum(w * f for w, f in zip(weights, fs) if w > 0) / sum(weights)


def weighted_vote(classes: list[list[int]], weights: list[float], num_classes: int) -> list[int]:
    """Per example, the class with the largest summed weight; ties -> the smallest class id."""
    tally = torch.zeros(len(classes[0]), num_classes, dtype=torch.float64)     # (N, K)
    for w, c in zip(weights, classes):
        if w > 0:
            tally[torch.arange(len(c)), torch.tensor(c)] += w
    # argmax returns the first maximum, i.e. the smallest class id among tied totals
    return tally.argmax(-1).tolist()


def combine(task: str, members: list[dict], weights: list[float], method: str) -> list:
    """Prediction-file values of the ensemble for one task; members: [{"outputs": ...}, ...]."""
    if method == "vote" and task != "sts":
        classes = [decide(task, probabilities(task, m["outputs"])) for m in members]
        return weighted_vote(classes, weights, 5 if task == "sst" else 2)
    return decide(task, weighted_average([probabilities(task, m["outputs"]) for m in members], weights))


def score(task: str, values: list, labels: torch.Tensor) -> float:
    return (pearson if task == "sts" else accuracy)(values, labels.tolist())


def for_task(weights, task: str) -> list[float]:
    """One weight per member for `task`: weights is a list (every task) or {task: list} (ranked)."""
    return weights[task] if isinstance(weights, dict) else weights


def dev_scores(dev: list[dict], weights, method: str) -> dict:
    """{sst_acc, para_acc, sts_pearson, overall} of the ensemble on dev. dev: per member {task: entry};
    weights: a list, or {task: list}."""
    s = {SCORE_KEYS[t]: score(t, combine(t, [m[t] for m in dev], for_task(weights, t), method), dev[0][t]["labels"])
         for t in TASKS}
    s["overall"] = cs224n_overall(s["sst_acc"], s["para_acc"], s["sts_pearson"])
    return s


def bootstrap_overall(dev: list[dict], weightings: list[list[float]], resamples: int = 2000) -> torch.Tensor:
    """Dev overall of each weighting (e.g. the uniform average, or one member alone: [0, 0, 1, 0, 0]) on `resamples`
    bootstrap resamples of the dev examples, (R, W). Paired: every weighting is scored on the same resample, so a
    difference of two columns is a paired bootstrap difference (Efron & Tibshirani 1993, §16.4). Each task's dev
    set is resampled on its own, with replacement, at its own size; a fixed seed (0) makes the result reproducible."""
    g = torch.Generator().manual_seed(0)
    scores = {}
    for task in TASKS:
        gold = dev[0][task]["labels"].double()
        idx = torch.randint(len(gold), (resamples, len(gold)), generator=g)                  # (R, N)
        preds = torch.stack([torch.tensor(combine(task, [m[task] for m in dev], w, "average"), dtype=torch.float64)
                             for w in weightings])                                               # (W, N)
        scores[task] = resampled_scores(task, preds, gold, idx)                                  # (W, R)
    return cs224n_overall(scores["sst"], scores["para"], scores["sts"]).T                       # (R, W)


def resampled_scores(task: str, preds: torch.Tensor, gold: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """(S, N) predictions (of S weightings or runs), (N,) gold, (R, N) resampled rows -> (S, R): the task's score of
    each on each resample, accuracy, or for STS Pearson's r over the resampled pairs (centred products)."""
    if task == "sts":
        x, y = preds[:, idx], gold[idx]                                                          # (S, R, N), (R, N)
        x, y = x - x.mean(-1, keepdim=True), y - y.mean(-1, keepdim=True)
        return (x * y).sum(-1) / (x.square().sum(-1) * y.square().sum(-1)).sqrt()
    return (preds[:, idx] == gold[idx]).double().mean(-1)


def greedy_select(dev: list[dict], method: str = "average", max_rounds: int = 100) -> list[int]:
    """Forward selection with replacement on dev overall; returns how often each member was added."""
    counts, best = [0] * len(dev), float("-inf")
    for _ in range(max_rounds):
        round_best, pick = float("-inf"), None
        for i in range(len(dev)):
            trial = counts.copy()
            trial[i] += 1
            overall = dev_scores(dev, trial, method)["overall"]
            if overall > round_best:      # strict: ties keep the earlier member
                round_best, pick = overall, i
        if round_best <= best:            # no addition strictly improves: stop
            break
        best, counts[pick] = round_best, counts[pick] + 1
    return counts


def ranked_pass(alone: list[float], value, weight: list[float]) -> list[float]:
    """One pass over the members, best `alone` score first (sorted() is stable: ties keep command-line order): member
    i joins with weight[i] when value(weights) strictly improves on the best so far (the empty set scores −∞)."""
    chosen, best = [0.0] * len(alone), float("-inf")
    for i in sorted(range(len(alone)), key=lambda i: -alone[i]):
        trial = chosen.copy()
        trial[i] = weight[i]                                           # Fin ∪ ŵ_i θ_i
        if (v := value(trial)) > best:
            chosen, best = trial, v
    return chosen


def ranked_select(dev: list[dict], method: str = "average", prior: list[float] | None = None) -> dict[str, list[float]]:
    """The report's Algorithm 1 per task (module docstring): {task: weights}, a kept member's weight is its prior."""
    prior = prior or [1.0] * len(dev)
    weights = {}
    for task in TASKS:
        members, gold = [m[task] for m in dev], dev[0][task]["labels"]
        alone = [score(task, combine(task, [m], [1.0], method), gold) for m in members]
        weights[task] = ranked_pass(alone, lambda w: score(task, combine(task, members, w, method), gold), prior)
    return weights


def ranked_overall_select(dev: list[dict], method: str = "average") -> list[float]:
    """`--weights ranked_overall`: one pass over the members in order of their own dev overall, keeping each that
    strictly improves it."""
    alone = [dev_scores(dev, [float(j == i) for j in range(len(dev))], method)["overall"] for i in range(len(dev))]
    return ranked_pass(alone, lambda w: dev_scores(dev, w, method)["overall"], [1.0] * len(dev))


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

