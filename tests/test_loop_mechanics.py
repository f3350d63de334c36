"""The training loop's mechanics: the optimizer step and its skip counter, what a pass over a task's
data reshuffles, what the loop's position and best score keep, what best.pt holds.

Each test here was written for a mutant that survived the rest of the suite (bench/mutation.py,
bench/results/mutation.md names them): a small change to minbert/run/optimizer_step.py,
minbert/run/checkpoint.py or minbert/tasks/sampling.py that no other test failed on.
Oracles: torch itself (torch.optim.SGD's step, LambdaLR's schedule, GradScaler's scale, the
torch.Generator draws a pass is documented to use) and hand-counted cases.
Run: python -m pytest -q tests/test_loop_mechanics.py   (offline, CPU, ~1 s)
"""

import argparse
import math

import pytest
import torch

from minbert.core.errors import UserError
from minbert.run import checkpoint, optimizer_step
from minbert.tasks import sampling


def sgd_setup(lr=0.1):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    optimizer = torch.optim.SGD([w], lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
    return w, optimizer, scheduler


# ---------------------------------------------------------------------------- OptimizerStep
def test_a_finite_step_is_sgds_step_then_the_schedule_then_zeroed_grads():
    w, optimizer, scheduler = sgd_setup()
    step = optimizer_step.OptimizerStep(optimizer, scheduler)
    step.backward((w * torch.tensor([3.0, 4.0])).sum())                # grad (3, 4)
    assert step(True) is True
    torch.testing.assert_close(w.detach(), torch.tensor([1.0 - 0.3, -2.0 - 0.4]),
                               msg=lambda m: f"OptimizerStep(finite=True) must take SGD's step w − lr·g: {m}")
    assert w.grad is None, "OptimizerStep must zero the gradients with set_to_none=True after the step"
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.05), "the LR schedule must move once per step"


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")   # skipped steps: on purpose
def test_a_non_finite_step_keeps_the_weights_but_moves_the_schedule():
    w, optimizer, scheduler = sgd_setup()
    step = optimizer_step.OptimizerStep(optimizer, scheduler)
    step.backward((w * torch.tensor([3.0, 4.0])).sum())
    assert step(False) is False
    torch.testing.assert_close(w.detach(), torch.tensor([1.0, -2.0]),
                               msg=lambda m: f"OptimizerStep(finite=False) must not update the weights: {m}")
    assert w.grad is None and optimizer.param_groups[0]["lr"] == pytest.approx(0.05), \
        "a skipped step still zeroes the gradients and moves the schedule (resume sees the same LRs)"


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")   # skipped steps: on purpose
def test_ten_non_finite_steps_in_a_row_stop_the_run_and_a_finite_one_resets_the_count():
    w, optimizer, scheduler = sgd_setup()
    step = optimizer_step.OptimizerStep(optimizer, scheduler, out_dir="runs/x")
    for _ in range(9):
        step(False)
    step(True)                                                        # resets the count
    for _ in range(9):
        step(False)                                                   # 9 in a row: still running
    with pytest.raises(UserError, match=r"^10 optimizer steps in a row had a non-finite loss: lower --lr or use "
                                        r"--amp off; runs/x/last\.pt holds the last finished epoch$"):
        step(False)                                                   # the 10th in a row


def test_backward_scales_the_loss_by_the_grad_scaler():
    w, optimizer, scheduler = sgd_setup()
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    step = optimizer_step.OptimizerStep(optimizer, scheduler, scaler)
    step.backward((w * torch.tensor([3.0, 4.0])).sum())
    torch.testing.assert_close(w.grad, torch.tensor([24.0, 32.0]), msg=lambda m: f"OptimizerStep.backward with a "
                               f"GradScaler must backprop scaler.scale(loss) (scale 8): {m}")
    assert step(True) is True
    torch.testing.assert_close(w.detach(), torch.tensor([1.0 - 0.3, -2.0 - 0.4]),
                               msg=lambda m: f"OptimizerStep with a GradScaler: the step must be taken on unscaled grads: {m}")


# ---------------------------------------------------------------------------- LoopState
def test_best_is_kept_only_when_beaten():
    loop = checkpoint.LoopState(running={"sst": [0.0, 0]})
    assert loop.best == -math.inf and loop.improved(-1e9), "the first score, however low, is the best so far"
    assert loop.improved(0.5) and not loop.improved(0.5) and not loop.improved(0.4), \
        "LoopState.improved: only a score above every earlier one is a new best (a tie keeps the first best.pt)"
    assert loop.best == 0.5


def test_next_epoch_resets_the_running_sums_and_the_step():
    loop = checkpoint.LoopState(running={"sst": [0.0, 0], "para": [0.0, 0]})
    loop.running["sst"][0] += 2.5
    loop.running["sst"][1] += 1
    loop.step = 7
    loop.next_epoch()
    assert (loop.epoch, loop.step, loop.running) == (2, 0, {"sst": [0.0, 0], "para": [0.0, 0]}), \
        f"LoopState.next_epoch: expected epoch 2, step 0 and zeroed running sums, got {loop.epoch}, {loop.step}, {loop.running}"
    loop.running["para"][1] += 3
    loop.next_epoch()
    assert loop.running == {"sst": [0.0, 0], "para": [0.0, 0]}, "the fresh running sums must be a new copy each epoch"


# ---------------------------------------------------------------------------- best.pt
def test_best_pt_holds_the_weights_at_save_time_the_flags_and_the_scores(tmp_path):
    model = torch.nn.Linear(2, 1)
    args = argparse.Namespace(lr=0.1, epochs=3)
    checkpoint.save_weights(tmp_path / "best.pt", model, args, scores={"overall": 0.7})
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.weight.add_(1.0)                                        # training goes on after the save
    ck = torch.load(tmp_path / "best.pt", weights_only=True)
    assert set(ck) == {"model", "args", "scores"}, f"best.pt keys: {sorted(ck)} (only model, args, scores)"
    for k in saved:
        torch.testing.assert_close(ck["model"][k], saved[k], msg=lambda m: f"best.pt['model'][{k}]: {m}")
    assert ck["scores"] == {"overall": 0.7} and checkpoint.saved_args(ck) == {"lr": 0.1, "epochs": 3}


# ---------------------------------------------------------------------------- BatchStream passes
class Permutations:
    """Stand-in for TaskData: a pass is randperm(n) from the generator the stream hands in, in batches."""

    def __init__(self, n):
        self.n, self.calls = n, []

    def batches(self, batch_size, shuffle, generator=None):
        self.calls.append(shuffle)
        perm = torch.randperm(self.n, generator=generator).tolist()
        return iter([perm[s:s + batch_size] for s in range(0, self.n, batch_size)])


def test_each_pass_is_a_new_shuffle_of_every_example():
    data = Permutations(8)
    stream = sampling.BatchStream(data, batch_size=2, seed=5)
    passes = [[i for _ in range(4) for i in stream.next()] for _ in range(3)]
    for k, p in enumerate(passes):
        assert sorted(p) == list(range(8)), f"BatchStream pass {k} must cover every example once, got {p}"
    assert len({tuple(p) for p in passes}) == 3, f"BatchStream: every pass must be shuffled anew, got {passes}"
    assert all(data.calls), "BatchStream must ask for shuffled batches"
    assert stream.state_dict() == {"passes": 2, "position": 4}, f"after 3 passes of 4 batches: {stream.state_dict()}"
    other = sampling.BatchStream(Permutations(8), batch_size=2, seed=6)
    assert [i for _ in range(4) for i in other.next()] != passes[0], "another seed must give another first pass"
