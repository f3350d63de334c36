"""minbert.methods.ensemble.combine: the ensemble's prediction for each example, from its members' raw head outputs.

(Beside tests/methods/test_ensemble_method.py, which grades the selection; this file grades the arithmetic of one
combination.) Oracle: (c) the rules of the module docstring written out here with numpy, example by example:
  vote     the class with the largest total weight of the members that predict it (ties: the smallest id);
  average  Σ W_i f_i / Σ W_i of the members' probabilities (sst: softmax, para: sigmoid, sts: the score),
           then sst's argmax, para's > 0.5, sts as is.
"""

import numpy as np
import pytest
import torch

from minbert.methods.ensemble import combine


def members(task, n=40, k=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (n, 5) if task == "sst" else (n,)
    return [{"outputs": torch.randn(shape, generator=g) * 2} for _ in range(k)]


WEIGHTS = [0.7, 0.1, 0.25, 0.0]   # unequal, one member off: equal weights would give other answers


@pytest.mark.parametrize("task", ["sst", "para"])
def test_vote_counts_each_members_weight_for_the_class_it_predicts(task):
    ms = members(task)
    outs = [m["outputs"].numpy().astype(np.float64) for m in ms]
    classes = [o.argmax(-1) if task == "sst" else (o > 0).astype(int) for o in outs]   # sigmoid > 0.5 <=> z > 0
    K = 5 if task == "sst" else 2
    want = []
    for i in range(len(classes[0])):
        tally = np.zeros(K)
        for w, c in zip(WEIGHTS, classes):
            tally[c[i]] += w
        want.append(int(np.flatnonzero(tally == tally.max())[0]))
    got = combine(task, ms, WEIGHTS, "vote")
    assert got == want, (f"minbert.methods.ensemble.combine({task!r}, method='vote'): examples "
                         f"{[i for i, (a, b) in enumerate(zip(got, want)) if a != b][:5]} differ from the weighted "
                         f"majority (weights {WEIGHTS}): is each member's vote counted with its weight?")
    unweighted = combine(task, ms, [1.0] * len(ms), "vote")
    assert unweighted != want, "test setup: the weights must change some vote"


@pytest.mark.parametrize("task", ["sst", "para", "sts"])
def test_average_is_the_weighted_mean_of_the_members_probabilities(task):
    ms = members(task, seed=1)
    outs = [m["outputs"].numpy().astype(np.float64) for m in ms]
    if task == "sst":
        f = [np.exp(o - o.max(-1, keepdims=True)) / np.exp(o - o.max(-1, keepdims=True)).sum(-1, keepdims=True) for o in outs]
    elif task == "para":
        f = [1 / (1 + np.exp(-o)) for o in outs]
    else:
        f = outs
    mean = sum(w * x for w, x in zip(WEIGHTS, f)) / sum(WEIGHTS)
    want = mean.argmax(-1).tolist() if task == "sst" else (mean > 0.5).astype(int).tolist() if task == "para" else mean
    got = combine(task, ms, WEIGHTS, "average")
    if task == "sts":
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9,
                                   err_msg="minbert.methods.ensemble.combine('sts', 'average'): not Σ W_i s_i / Σ W_i")
    else:
        assert got == want, (f"minbert.methods.ensemble.combine({task!r}, method='average'): differs from the argmax of "
                             f"Σ W_i f_i / Σ W_i (f = the members' probabilities) at "
                             f"{[i for i, (a, b) in enumerate(zip(got, want)) if a != b][:5]}")
