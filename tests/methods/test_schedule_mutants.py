"""Schedule and counter boundaries: MeanShift's iteration count and input handling, MML's
elimination cadence, minimum heads and counters, a head's output range.

Each test here was written for a mutant that survived the rest of the suite (bench/mutation.py,
bench/results/mutation.md names them).
Oracles: (b) scikit-learn's MeanShift / estimate_bandwidth (live), with their own max_iter;
(a) hand-computed cases from Algorithm 1 of Malkiel & Wolf 2021 (MML, arXiv:1911.06182: a round
every K steps while Σβ ≥ 5, the EMA a_j ← γ a_j + (1 − γ) ℓ_j) and from the documented
bandwidth-0 rule (clusters ordered by count, then value, both descending).
Run: python -m pytest -q tests/methods/test_schedule_mutants.py   (offline, CPU, ~2 s)
"""

import argparse
import inspect

import numpy as np
import pytest
import torch

from minbert.methods import meanshift, mml

MS = "minbert.methods.meanshift.mean_shift"
EB = "minbert.methods.meanshift.estimate_bandwidth"


# ---------------------------------------------------------------------------- MeanShift
@pytest.mark.parametrize("max_iter", [0, 1, 2, 3])
def test_mean_shift_stops_after_sklearns_number_of_iterations(max_iter):
    """Seeds here need several moves; cut at max_iter they stop where sklearn's stop (max_iter + 1 means)."""
    cluster = pytest.importorskip("sklearn.cluster")
    x = np.array([8.25, 0.0, 8.5, 0.25, 7.25, 1.75, 8.75, 5.5])
    ref = cluster.MeanShift(bandwidth=0.5, max_iter=max_iter).fit(x.reshape(-1, 1))
    centers, labels = meanshift.mean_shift(x, 0.5, max_iter=max_iter)
    np.testing.assert_allclose(centers, ref.cluster_centers_.ravel(), atol=1e-12,
                               err_msg=f"{MS}(max_iter={max_iter}): centres differ from sklearn's; count the iterations")
    np.testing.assert_array_equal(labels, ref.labels_, err_msg=f"{MS}(max_iter={max_iter}): labels differ from sklearn's")


def test_mean_shift_default_max_iter_is_sklearns():
    cluster = pytest.importorskip("sklearn.cluster")
    ours = inspect.signature(meanshift.mean_shift).parameters["max_iter"].default
    theirs = inspect.signature(cluster.MeanShift).parameters["max_iter"].default
    assert ours == theirs, f"{MS}: default max_iter {ours}, sklearn's MeanShift uses {theirs}"


def test_mean_shift_and_bandwidth_take_ints_and_a_column_like_floats():
    """A list of ints and an (n, 1) column give sklearn's answer on the float values."""
    cluster = pytest.importorskip("sklearn.cluster")
    values = [0, 0, 1, 5, 6, 6, 7, 13]
    ref = cluster.MeanShift(bandwidth=2).fit(np.array(values, dtype=float).reshape(-1, 1))
    ref_bw = cluster.estimate_bandwidth(np.array(values, dtype=float).reshape(-1, 1), quantile=0.3)
    for x in (values, np.array(values).reshape(-1, 1)):
        centers, labels = meanshift.mean_shift(x, 2)
        np.testing.assert_allclose(centers, ref.cluster_centers_.ravel(), atol=1e-12,
                                   err_msg=f"{MS} on ints / a column: centres differ from sklearn's (cast to float64, flatten)")
        np.testing.assert_array_equal(labels, ref.labels_)
        assert abs(meanshift.estimate_bandwidth(x) - ref_bw) < 1e-12, f"{EB} on ints / a column differs from sklearn's"


def test_one_value_is_one_cluster_and_empty_input_is_an_error():
    cluster = pytest.importorskip("sklearn.cluster")
    centers, labels = meanshift.mean_shift([0.5], 0.1)
    assert centers.tolist() == [0.5] and labels.tolist() == [0], f"{MS}([0.5]): got {centers}, {labels}"
    ref = cluster.estimate_bandwidth(np.array([[0.5]]), quantile=0.3)
    assert meanshift.estimate_bandwidth([0.5]) == ref, f"{EB}([0.5]) must equal sklearn's {ref}"
    with pytest.raises(ValueError, match=r"^minbert\.methods\.meanshift\.mean_shift: x is empty$"):
        meanshift.mean_shift([], 0.1)
    with pytest.raises(ValueError, match=r"^minbert\.methods\.meanshift\.estimate_bandwidth: x is empty$"):
        meanshift.estimate_bandwidth([])


def test_bandwidth_zero_orders_ties_by_the_larger_value():
    """bw = 0: one cluster per value, by count then value, both descending: counts 1→2, 2→2, 3→1."""
    centers, labels = meanshift.mean_shift([1.0, 1.0, 2.0, 2.0, 3.0], 0.0)
    assert centers.tolist() == [2.0, 1.0, 3.0], f"{MS}(bw=0): centres {centers.tolist()}, expected [2, 1, 3]"
    assert labels.tolist() == [1, 1, 0, 0, 2], f"{MS}(bw=0): labels {labels.tolist()}, expected [1, 1, 0, 0, 2]"


# ---------------------------------------------------------------------------- MML
def test_heads_start_in_nn_linears_range():
    """Weights and biases start uniform in ±1/√D, nn.Linear(D, K)'s range (torch's init, read off a
    real nn.Linear): every value inside it, and the values reach both ends."""
    D, K, M = 16, 2, 400
    torch.manual_seed(0)
    linear = torch.nn.Linear(D, K * M)
    bound = 1 / D ** 0.5
    assert linear.weight.abs().max() <= bound and linear.bias.abs().max() <= bound  # the reference range
    heads = mml.MultiverseHeads(D, K, M)
    for name, t in (("weight", heads.weight), ("bias", heads.bias)):
        lo, hi = float(t.detach().min()), float(t.detach().max())
        assert -bound <= lo < -0.9 * bound and 0.9 * bound < hi <= bound, \
            f"minbert.methods.mml.MultiverseHeads.reset_parameters: {name} spans [{lo:.3f}, {hi:.3f}], expected U(−{bound:.3f}, {bound:.3f}) as nn.Linear"


def test_first_round_runs_at_step_every_even_when_every_is_1():
    """Alg. 1: a round at step K, 2K, ...; with K = 1 the very first step is a round (nothing was checked before)."""
    heads = mml.MultiverseHeads(4, 2, 6)
    eliminator = mml.HeadEliminator(heads, every=1, min_bandwidth=0.05)
    eliminator.observe(torch.tensor([0.1, 0.1, 0.1, 2.0, 2.0, 2.0]))
    event = eliminator.maybe_eliminate(1)
    assert event is not None and event["eliminated"] == [3, 4, 5], \
        f"minbert.methods.mml.HeadEliminator.maybe_eliminate(1) with every=1: expected heads 3-5 eliminated, got {event}"


def test_paper_epochs_at_the_size_thresholds():
    """EPOCHS_BY_SIZE reads 'at least N train examples': exactly 100,000 is large (10), 10,000 medium (30)."""
    import importlib
    home = mml if hasattr(mml, "paper_epochs") else importlib.import_module("minbert.methods.mml_protocol")
    got = [home.paper_epochs(n) for n in (100_000, 99_999, 10_000, 9_999)]
    assert got == [10, 30, 30, 100], f"minbert.methods.mml.paper_epochs(100000, 99999, 10000, 9999) = {got}, expected [10, 30, 30, 100]"


def test_mml_errors_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"^minbert\.methods\.mml\.resolve_num_heads: bert uses 1 head\(s\), got num_heads=3"):
        mml.resolve_num_heads("bert", 8, 3)
    heads = mml.MultiverseHeads(4, 2, 3)
    with pytest.raises(ValueError, match=r"^minbert\.methods\.mml\.MultiverseHeads\.task_loss: reduction must be 'sum' or 'mean', got 'avg'"):
        heads.task_loss(torch.zeros(2, 3, 2), torch.zeros(2), reduction="avg")


def mml_args(argv):
    parser = argparse.ArgumentParser(exit_on_error=False)
    mml.add_args(parser)
    return parser.parse_args(argv)


def test_mml_flags_build_the_heads_and_eliminator_asked_for(capsys):
    """The paper's Alg. 1 constants as defaults (K_elim = 1000 steps), and each flag reaching the object."""
    args = mml_args([])
    assert (args.method, args.heads, args.head_reduction, args.eliminate_every, args.min_bandwidth) == ("mml", None, "sum", 1000, 0.05), \
        f"minbert.methods.mml.add_args defaults: {args}"
    heads, eliminator = mml.from_args(mml_args(["--heads", "7", "--eliminate_every", "3", "--min_bandwidth", "0.5"]), 8, 2)
    assert heads.num_heads == 7 and heads.dim == 8 and heads.num_outputs == 2
    assert heads.dropout.p == 0.1, f"MML's heads use dropout 0.1 on d (BERT's), got {heads.dropout.p}"
    assert (eliminator.every, eliminator.min_bandwidth, eliminator.heads) == (3, 0.5, heads), \
        f"minbert.methods.mml.from_args: --eliminate_every/--min_bandwidth not passed: {eliminator.every}, {eliminator.min_bandwidth}"
    heads, eliminator = mml.from_args(mml_args([]), 8, 2)
    assert heads.num_heads == 8 and eliminator.every == 1000, "default M = D heads, K_elim = 1000"
    for method, dropout in (("bert", 0.1), ("bert-drop", 0.3), ("mv", 0.1), ("ensemble", 0.1)):
        heads, eliminator = mml.from_args(mml_args(["--method", method]), 8, 2)
        assert eliminator is None and heads.dropout.p == dropout, \
            f"--method {method}: no elimination and dropout {dropout} (Malkiel & Wolf §4.1), got {eliminator}, {heads.dropout.p}"
    assert mml_args(["--head_reduction", "sum"]).head_reduction == "sum", "--head_reduction sum must parse"
    args = mml_args(["--heads", "1", "--eliminate_every", "1", "--head_reduction", "mean", "--min_bandwidth", "0"])
    assert (args.heads, args.eliminate_every, args.head_reduction, args.min_bandwidth) == (1, 1, "mean", 0.0), \
        f"the smallest valid values (1 head, a round every step, bandwidth floor 0) and 'mean' must parse: {args}"
    parser = argparse.ArgumentParser()
    mml.add_args(parser)
    for ok in (["--method", "bert"], ["--method", "bert-drop", "--heads", "1"], ["--method", "mml", "--heads", "3"]):
        mml.check_args(parser.parse_args(ok), parser)
    for bad in (["--method", "bert", "--heads", "3"], ["--method", "bert-drop", "--heads", "2"]):
        with pytest.raises(SystemExit):
            mml.check_args(parser.parse_args(bad), parser)
        assert f"--method {bad[1]} has one head; drop --heads" in capsys.readouterr().err, "mml.check_args: say what to drop"
    for bad in (["--method", "MML"], ["--heads", "0"], ["--eliminate_every", "0"], ["--min_bandwidth", "-1"], ["--head_reduction", "avg"]):
        with pytest.raises((SystemExit, argparse.ArgumentError)):
            mml_args(bad)
