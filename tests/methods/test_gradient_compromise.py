"""Tests for minbert/methods/gradient_compromise.py: Alg. 1 of Pritsky, Somerville & Huynh (CS224N report).

Oracles: hand computation (the numbers below were worked out from Alg. 1's lines with a
calculator, not with this code) and properties (each task at least once per update; expected
draws equal the PAL schedule's p·n). The script-level check is in tests/test_train_multitask.py.
Run: python -m pytest -q tests/methods/test_gradient_compromise.py   (offline, CPU, under a second)
"""

import re

import numpy as np
import pytest
import torch

from minbert.methods.gradient_compromise import GradientCompromise, sampling_correction
from conftest import flags_parser, refusal

TASKS = ("sst", "para", "sts")


def test_sampling_correction_matches_hand_computed_epoch_two():
    """Oracle: hand computation. Sizes (100, 800, 100), n = 10, epoch 2 of 3: α = 0.6,
    p ∝ (100^0.6, 800^0.6, 100^0.6) = (15.8489, 55.1888, 15.8489) -> p = (0.182408, 0.635183, 0.182408);
    p_b = (p·10 − 1)/7 = (0.117726, 0.764547, 0.117726) (already sums to 1, nothing clipped)."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=10, num_epochs=3)
    np.testing.assert_allclose(gc.probs(2), [0.117726, 0.764547, 0.117726], atol=2e-6,
                               err_msg="minbert.methods.gradient_compromise.GradientCompromise.probs: expected "
                                       "p_b = (p·n − 1)/(n − 3) of Alg. 1, not the annealed p itself")


def test_first_epoch_gives_every_random_slot_to_the_big_task():
    """Oracle: hand computation. Epoch 1: α = 1, p = (0.1, 0.8, 0.1), p_b = (1 − 1, 8 − 1, 1 − 1)/7 = (0, 1, 0):
    the small tasks already have their one fixed slot, i.e. p·n = 1 expected draws."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=10, num_epochs=3)
    np.testing.assert_allclose(gc.probs(1), [0.0, 1.0, 0.0], atol=1e-12,
                               err_msg="GradientCompromise.probs(1): expected (0, 1, 0)")
    rng = np.random.default_rng(0)
    for _ in range(20):
        tasks = gc.tasks(1, rng)
        assert sorted(tasks) == sorted(["sst", "sts"] + ["para"] * 8), f"GradientCompromise.tasks(1): got {tasks}"


@pytest.mark.parametrize("clip_high, expected", [(1.0, [0.0, 0.972222, 0.027778]),
                                                 (float("inf"), [0.0, 0.973333, 0.026667])])
def test_clip_readings_match_hand_computation(clip_high, expected):
    """Oracle: hand computation. p = (0.05, 0.83, 0.12), n = 10: p_b = (−0.071429, 1.042857, 0.028571).
    clip to [0, 1] -> (0, 1, 0.028571)/1.028571; clip at 0 only -> (0, 1.042857, 0.028571)/1.071429."""
    p_b = sampling_correction(np.array([0.05, 0.83, 0.12]), 10, clip_high)
    np.testing.assert_allclose(p_b, expected, atol=1e-6, err_msg=f"sampling_correction(clip_high={clip_high})")


def test_scale_divides_by_dataset_size_to_the_beta_not_by_batch_count():
    """Oracle: hand computation. Epoch 2 of 3: β = 0.2 + 0.8·1/2 = 0.6. A summed sst loss of 3 (from
    any number of batches) becomes 3 / 100^0.6 = 0.189287; para 8 / 800^0.6 = 0.144956."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=10, num_epochs=3)
    assert gc.beta(2) == pytest.approx(0.6, abs=1e-12), "GradientCompromise.beta: expected 0.2 + 0.8·(e − 1)/(N_e − 1)"
    assert gc.beta(1) == pytest.approx(0.2) and gc.beta(3) == pytest.approx(1.0)
    out = gc.scale({"sst": torch.tensor(3.0), "para": torch.tensor(8.0)}, 2)
    torch.testing.assert_close(out["sst"], torch.tensor(0.189287), atol=1e-6, rtol=0,
                               msg="GradientCompromise.scale: expected loss / S_data^β (Alg. 1's last line)")
    torch.testing.assert_close(out["para"], torch.tensor(0.144956), atol=1e-6, rtol=0)


def test_normalized_reading_divides_by_the_size_fraction():
    """Oracle: hand computation. normalize=True: sizes (100, 800, 100) -> fractions (0.1, 0.8, 0.1);
    epoch 2 of 3 (β = 0.6): 3 / 0.1^0.6 = 11.943215, 8 / 0.8^0.6 = 9.146101."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=10, num_epochs=3, normalize=True)
    out = gc.scale({"sst": torch.tensor(3.0), "para": torch.tensor(8.0)}, 2)
    torch.testing.assert_close(torch.stack([out["sst"], out["para"]]), torch.tensor([11.943215, 9.146101]),
                               atol=1e-5, rtol=0, msg="GradientCompromise.scale(normalize=True): loss / (S/ΣS)^β")


def test_scale_keeps_the_autograd_graph():
    """Oracle: property. The scaled loss is still differentiable (GradVac takes its gradient)."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=10, num_epochs=3)
    w = torch.tensor(2.0, requires_grad=True)
    gc.scale({"sts": w * 5}, 3)["sts"].backward()
    assert w.grad.item() == pytest.approx(5 / 100), "GradientCompromise.scale at β = 1: d(5w/100)/dw = 0.05"


def test_expected_draws_equal_the_pal_schedule_within_3_sigma():
    """Oracle: property of the correction. Unclipped, E[count_i] = 1 + (n − 3)·p_b = p_i·n
    (epoch 2 above: 1.824, 6.352, 1.824 of 10)."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=10, num_epochs=3)
    rng = np.random.default_rng(1)
    R = 4000
    counts = np.array([[t.count(name) for name in TASKS] for t in (gc.tasks(2, rng) for _ in range(R))])   # (R, K)
    expected = np.array([0.182408, 0.635183, 0.182408]) * 10
    sigma = np.sqrt(7 * gc.probs(2) * (1 - gc.probs(2)) / R)             # std of the mean draw count
    assert (counts.min(0) >= 1).all(), "GradientCompromise.tasks: every task must appear at least once per update"
    assert (counts.sum(1) == 10).all(), "GradientCompromise.tasks: an update has exactly n_batches batches"
    assert (abs(counts.mean(0) - expected) < 3 * sigma).all(), \
        f"GradientCompromise.tasks: mean counts {counts.mean(0)} should be p·n = {expected}"


def test_n_equal_to_task_count_is_round_robin_and_smaller_n_is_rejected():
    """Oracle: definition. n = 3: no random slot (Alg. 1 would divide by n − 3 = 0); n < 3 cannot hold each task once."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=3, num_epochs=2)
    assert gc.probs(1) is None
    assert sorted(gc.tasks(2, np.random.default_rng(0))) == sorted(TASKS)
    with pytest.raises(ValueError, match="at least the number of tasks"):
        GradientCompromise(TASKS, [100, 800, 100], n_batches=2, num_epochs=2)


def test_same_generator_state_replays_the_same_schedule():
    """Oracle: property. The schedule depends only on the caller's generator (resume replays it)."""
    gc = GradientCompromise(TASKS, [100, 800, 100], n_batches=7, num_epochs=3)
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [gc.tasks(2, a) for _ in range(5)] == [gc.tasks(2, b) for _ in range(5)]


# ---------------------------------------------------------------------------- flags
def gc_parser():
    from minbert.methods import gradient_compromise
    return flags_parser(gradient_compromise, surgery="none")   # --surgery: train_multitask.py's, read by check_args


def test_clip_high_flag_takes_inf_as_documented():
    """Oracle: the documented reading (module docstring, docs/methods.md): `--grad_compromise_clip_high inf` clips
    at 0 only. It must parse to math.inf, and a zero, negative or non-number value must still stop at parse time."""
    import math
    assert gc_parser().parse_args(["--grad_compromise_clip_high", "inf"]).grad_compromise_clip_high == math.inf, \
        "minbert.methods.gradient_compromise.add_args: --grad_compromise_clip_high inf (clip at 0 only) must be accepted"
    assert gc_parser().parse_args(["--grad_compromise_clip_high", "0.5"]).grad_compromise_clip_high == 0.5
    for bad in ("0", "-1", "nan", "-inf", "high"):
        with pytest.raises(SystemExit):
            gc_parser().parse_args(["--grad_compromise_clip_high", bad])


def test_default_clip_is_to_one_in_the_function_and_the_class():
    """Oracle: hand computation of Alg. 1 line 3 with the default clip to [0, 1]. p = (0.6, 0.3, 0.1), n = 4:
    p_b = 4p − 1 = (1.4, 0.2, −0.6) -> clip -> (1, 0.2, 0) -> (5/6, 1/6, 0). (Clipping at 2 or not at all would give
    (1.4, 0.2, 0)/1.6 = (7/8, 1/8, 0).) The class: sizes (6, 3, 1), one epoch (α = 1) gives the same p."""
    np.testing.assert_allclose(sampling_correction(np.array([0.6, 0.3, 0.1]), 4), [5 / 6, 1 / 6, 0.0], atol=1e-12,
                               err_msg="minbert.methods.gradient_compromise.sampling_correction: the default clip is to [0, 1]")
    np.testing.assert_allclose(GradientCompromise(TASKS, [6, 3, 1], n_batches=4, num_epochs=1).probs(1), [5 / 6, 1 / 6, 0.0],
                               atol=1e-12, err_msg="GradientCompromise(clip_high default).probs: expected the [0, 1] clip")
    np.testing.assert_allclose(GradientCompromise(TASKS, [6, 3, 1], n_batches=4, num_epochs=1, clip_high=2.0).probs(1),
                               [7 / 8, 1 / 8, 0.0], atol=1e-12, err_msg="GradientCompromise.probs must use its clip_high")


def test_float32_inputs_are_computed_in_float64():
    """Oracle: the same computation written here in float64 (numpy), tolerance 1e-13: a float32 p or float32 sizes
    must not make Alg. 1 round at float32's 1e-7."""
    p32 = np.array([0.2, 0.5, 0.3], dtype=np.float32)
    p = p32.astype(np.float64)
    expected = (p * 7 - 1) / 4
    expected = np.clip(expected, 0, 1) / np.clip(expected, 0, 1).sum()
    np.testing.assert_allclose(sampling_correction(p32, 7), expected, rtol=0, atol=1e-13,
                               err_msg="minbert.methods.gradient_compromise.sampling_correction: compute in float64")
    sizes32 = np.array([3, 70, 11], dtype=np.float32)
    s = np.array([3, 70, 11], dtype=np.float64) ** 0.6
    s = s / s.sum()
    b = np.clip((s * 7 - 1) / 4, 0, 1)
    np.testing.assert_allclose(GradientCompromise(TASKS, sizes32, n_batches=7, num_epochs=3).probs(2), b / b.sum(), rtol=0,
                               atol=1e-13, err_msg="GradientCompromise: S_data^α must be computed in float64")


def test_bad_sizes_or_n_say_what_is_wrong():
    """Oracle: the documented preconditions: one size > 0 per task (a size of 1 is a valid dataset), and
    sampling_correction needs n > K random-slot room (n = K would divide by n − K = 0)."""
    GradientCompromise(TASKS, [1, 1, 1], n_batches=4, num_epochs=2)   # one example per task is allowed
    for sizes in ([100, 800], [100, 800, 100, 5], [100, 0, 100], [100, -3, 100]):
        with pytest.raises(ValueError, match=r"^GradientCompromise: need one positive size per task \['sst', 'para', 'sts'\], "
                                             rf"got {re.escape(str(sizes))}$"):
            GradientCompromise(TASKS, sizes, n_batches=4, num_epochs=2)
    for n in (3, 2):
        with pytest.raises(ValueError, match=rf"^sampling_correction: n_batches must exceed the number of tasks \(3\), got {n}$"):
            sampling_correction(np.array([0.2, 0.5, 0.3]), n)


def test_flags_defaults_and_values():
    """Oracle: the flags' contract: off (0), clip to 1 (a probability), raw sizes; 0 is off, not an error."""
    args = gc_parser().parse_args([])
    assert (args.grad_compromise, args.grad_compromise_clip_high, args.grad_compromise_normalize) == (0, 1.0, False), \
        f"minbert.methods.gradient_compromise.add_args defaults: {args}"
    args = gc_parser().parse_args(["--grad_compromise", "8", "--grad_compromise_clip_high", "2", "--grad_compromise_normalize"])
    assert (args.grad_compromise, args.grad_compromise_clip_high, args.grad_compromise_normalize) == (8, 2.0, True), \
        f"minbert.methods.gradient_compromise.add_args: {args}"
    assert gc_parser().parse_args(["--grad_compromise", "0"]).grad_compromise == 0
    for bad in (["--grad_compromise", "-1"], ["--grad_compromise", "2.5"], ["--grad_compromise_normalize", "1"]):
        with pytest.raises(SystemExit):
            gc_parser().parse_args(bad)


@pytest.mark.parametrize("argv, error", [
    ([], None), (["--grad_compromise", "3"], None), (["--grad_compromise", "0", "--surgery", "pcgrad"], None),
    (["--grad_compromise", "2"], "--grad_compromise must be at least the number of tasks (3)"),
    (["--grad_compromise", "1"], "--grad_compromise must be at least the number of tasks (3)"),
    (["--grad_compromise", "5", "--surgery", "gradvac"], "--grad_compromise already combines the task gradients with GradVac: drop --surgery"),
])
def test_check_args(argv, error, capsys):
    """Oracle: the rules: n ≥ K = 3 (each task once per update), and GradVac is already inside (no --surgery)."""
    from minbert.methods import gradient_compromise
    said = refusal(gradient_compromise, gc_parser(), argv, capsys)
    assert (said is None if error is None else f": error: {error}\n" in (said or "")), \
        f"minbert.methods.gradient_compromise.check_args({argv}): expected {error!r}, got {said!r}"


def test_from_args_passes_every_flag():
    """Oracle: the flag -> constructor map written out by hand; off (0) builds nothing."""
    import argparse
    from minbert.methods import gradient_compromise
    args = argparse.Namespace(grad_compromise=0, epochs=4, grad_compromise_clip_high=2.0, grad_compromise_normalize=True)
    assert gradient_compromise.from_args(args, TASKS, [5, 6, 7]) is None
    args.grad_compromise = 9
    gc = gradient_compromise.from_args(args, TASKS, [5, 6, 7])
    assert (gc.task_names, gc.sizes.tolist(), gc.n_batches, gc.num_epochs, gc.clip_high, gc.normalize) == \
        (list(TASKS), [5.0, 6.0, 7.0], 9, 4, 2.0, True), f"minbert.methods.gradient_compromise.from_args: {vars(gc)}"
