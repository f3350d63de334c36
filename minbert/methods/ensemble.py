"""Ensembles of fine-tuned models from their outputs: weighted average and weighted majority vote, with weights
chosen by greedy forward selection or by the report's ranked Algorithm 1.

Song, Hu & Pan (CS224N report, §3.1 and appendix Algorithm 1) combine k fine-tuned models:

    weighted average        f(x) = Σ_i W_i f(x; θ_i) / Σ_i W_i
    weighted majority vote  f(x) = C_j  with the largest Σ_{i: f(x; θ_i) = C_j} W_i

where f(x; θ_i) is member i's class probabilities (SST: softmax of the 5 logits; Quora: sigmoid of the logit) or
its STS score; the vote counts each member's predicted class. The weights (--weights):
  greedy          fitted on dev by forward selection WITH replacement (Caruana et al. 2004): each round adds the
                  member that gives the highest dev overall, until no addition strictly improves it; a member's
                  weight is the number of times it was added.
  ranked          the report's Algorithm 1 ("Greedy model soup", Wortsman et al. 2022, applied to outputs), per
                  TASK: members sorted by their own dev score on that task, Fin starts empty, and member i joins
                  with its prior weight ŵ_i (--prior 2,1,1; default 1 each) if it raises that task's score.
  ranked_overall  one pass ranked by dev overall, weights shared by the tasks.
  uniform, 2,1,1  no fitting.

A member is a dict {task: {"outputs": raw head outputs, "labels": gold (dev)}}; N examples, K classes (SST 5,
Quora 2). The command that reads runs' outputs.pt and writes the prediction files is minbert/tools/ensemble.py.
Ties are broken reproducibly (# Notes at the end). Dev scores of a fitted ensemble are optimistic; the test
predictions are not. Left out: stacking, weighting per example, averaging parameters (a model soup).
"""

import torch

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
    return sum(w * f for w, f in zip(weights, fs) if w > 0) / sum(weights)   # the shape of one f: (N, 5) or (N,)


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
        classes = [decide(task, probabilities(task, m["outputs"])) for m in members]    # per member, N class ids
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


# Notes
# - Tie-breaking, so that results are reproducible: greedy and ranked keep the member listed first on the command
#   line; the vote takes the smallest class id among equal totals; the average takes SST's first largest
#   probability and predicts Quora 1 only when the averaged probability is > 0.5; STS is a regression, always the
#   weighted average. With one member and any weight, the ensemble's predictions are the member's own.
# - The report's 7-model ensemble reached dev overall 0.786 against 0.778 for its best single model.
