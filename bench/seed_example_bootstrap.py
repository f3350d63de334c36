"""The seed × example bootstrap of a paired difference between two configurations of the multitask study.

The study's t-interval of Δ (bench.seed_statistics) is over seeds: it asks whether another draw of seeds
would give the same Δ on these dev sets, and treats the 1,101 SST / 2,000 Quora / 863 STS dev examples as fixed.
They are a sample too. This bootstrap resamples both, as a two-stage (hierarchical) bootstrap does (Davison &
Hinkley 1997, "Bootstrap Methods and their Application", Ch. 3, hierarchical data; percentile interval, Efron &
Tibshirani 1993, §13.3). Each resample
  1. draws n seeds with replacement from the n paired seeds (the same seeds for both configurations: paired);
  2. draws each task's dev examples with replacement, at the task's size (one draw per resample, shared by every
     seed and both configurations: they all predict the same examples, so the pairing holds across examples too);
  3. scores every run on the drawn examples from its outputs.pt (SST and Quora accuracy, STS Pearson r, dev
     overall = (SST acc + Quora acc + (r + 1)/2) / 3) and averages the paired differences over the drawn seeds.
The percentile 95% interval of those R means is the interval whose unit is seeds and dev examples together.
Runs are scored from their saved outputs with the ensemble's rule (minbert.methods.ensemble.combine with one member
of weight 1), which gives each run's own dev scores (tests/studies/test_seed_example_bootstrap.py checks it).
Left out: resampling within a seed's training (other batches, other dropout): the seeds stand for that.

One ensemble has no seeds to resample: bootstrap_overall resamples its dev examples only (step 2 alone), with the
ensemble and each of its members scored on the same resamples (bench/study.py: the uniform seed average against
its members).
"""

import torch

from minbert.tasks.metrics import cs224n_overall
from minbert.methods.ensemble import TASKS, combine
from minbert.tools.ensemble import aligned

SCORES = {"sst": "sst_acc", "para": "para_acc", "sts": "sts_pearson"}


def resampled_scores(task: str, preds: torch.Tensor, gold: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """(S, N) predictions (of S weightings or runs), (N,) gold, (R, N) resampled rows -> (S, R): the task's score of
    each on each resample, accuracy, or for STS Pearson's r over the resampled pairs (centred products)."""
    if task == "sts":
        x, y = preds[:, idx], gold[idx]                                                          # (S, R, N), (R, N)
        x, y = x - x.mean(-1, keepdim=True), y - y.mean(-1, keepdim=True)
        return (x * y).sum(-1) / (x.square().sum(-1) * y.square().sum(-1)).sqrt()
    return (preds[:, idx] == gold[idx]).double().mean(-1)


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


def run_predictions(outputs: list[dict]) -> tuple[dict, dict]:
    """Each run's dev predictions per task, stacked: ({task: (S, N) float64}, {task: (N,) gold}), rows in one order."""
    dev = aligned(outputs, "dev")
    preds = {t: torch.stack([torch.tensor(combine(t, [run[t]], [1.0], "average"), dtype=torch.float64) for run in dev])
             for t in TASKS}
    return preds, {t: dev[0][t]["labels"].double() for t in TASKS}


def scores_of(outputs: list[dict]) -> list[dict]:
    """Each run's dev scores recomputed from its outputs.pt, {sst_acc, para_acc, sts_pearson, overall}: what its
    metrics.jsonl recorded for the epoch the outputs come from (to 4 decimals)."""
    preds, gold = run_predictions(outputs)
    every = {t: torch.arange(len(gold[t]))[None] for t in TASKS}                # (1, N): each example once
    per_task = {t: resampled_scores(t, preds[t], gold[t], every[t])[:, 0] for t in TASKS}
    overall = cs224n_overall(*(per_task[t] for t in TASKS))
    return [{**{SCORES[t]: per_task[t][k].item() for t in TASKS}, "overall": overall[k].item()}
            for k in range(len(outputs))]


def seed_example_bootstrap(arm: list[dict], base: list[dict], resamples: int = 2000, seed: int = 0,
                           chunk: int = 200) -> dict[str, torch.Tensor]:
    """arm[k], base[k]: the outputs.pt of the two configurations at the same seed k. Returns {metric: (R,)} the
    resampled mean paired difference arm − base, for sst_acc, para_acc, sts_pearson and overall."""
    if len(arm) != len(base) or len(arm) < 2:
        raise ValueError(f"seed_example_bootstrap: needs the same n >= 2 seeds for both, got {len(arm)} and "
                         f"{len(base)}")
    n = len(arm)
    preds, gold = run_predictions(arm + base)                              # rows 0..n-1: arm, n..2n-1: base
    g = torch.Generator().manual_seed(seed)
    out = {m: [] for m in (*SCORES.values(), "overall")}
    for start in range(0, resamples, chunk):
        r = min(chunk, resamples - start)
        seeds = torch.randint(n, (r, n), generator=g)                      # (R, n) the drawn seeds
        per_task = {}
        for task in TASKS:
            idx = torch.randint(len(gold[task]), (r, len(gold[task])), generator=g)        # (R, N) the drawn examples
            s = resampled_scores(task, preds[task], gold[task], idx)       # (2n, R)
            per_task[task] = s[:n] - s[n:]                                 # (n, R) paired by seed
            per_task[task + "_scores"] = s
        overall = cs224n_overall(*(per_task[t + "_scores"] for t in TASKS))                # (2n, R)
        per_task["overall"] = overall[:n] - overall[n:]
        for task, metric in (*SCORES.items(), ("overall", "overall")):
            d = per_task[task]                                             # (n, R)
            out[metric].append(d.gather(0, seeds.T).mean(0))               # (R,) mean over the drawn seeds
    return {m: torch.cat(v) for m, v in out.items()}
