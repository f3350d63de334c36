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
import json
import math

import numpy as np
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
    assert step() is True, "OptimizerStep(): a step is finite unless told otherwise"
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


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_the_stop_message_names_the_run_folder_when_none_is_given():
    w, optimizer, _ = sgd_setup()
    step = optimizer_step.OptimizerStep(optimizer)
    with pytest.raises(UserError, match=r"; the run folder/last\.pt holds the last finished epoch$"):
        for _ in range(10):
            step(False)


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


@pytest.mark.parametrize("scale", [None, 8.0])
def test_the_measured_gradient_norm_is_the_unscaled_norm_of_the_update_and_the_step_is_unchanged(scale):
    """grad_norm is ‖g‖₂ over every parameter's gradient, g = (3, 4) and (12,) here: 13. Under fp16 the
    gradients are scaled by the GradScaler's 8 until unscale_: the norm must be 13, not 104, and the step must still
    be taken once on the unscaled gradients (GradScaler.step does not unscale again). lr is the one the step used."""
    w, v = torch.nn.Parameter(torch.tensor([1.0, -2.0])), torch.nn.Parameter(torch.tensor([0.5]))
    optimizer = torch.optim.SGD([{"params": [w]}, {"params": [v], "lr": 0.01}], lr=0.1)
    scaler = scale and torch.amp.GradScaler("cpu", init_scale=scale)
    step = optimizer_step.OptimizerStep(optimizer, None, scaler)
    step.backward((w * torch.tensor([3.0, 4.0])).sum() + 12 * v.sum())
    assert step(True) is True
    assert float(step.grad_norm) == pytest.approx(13.0), \
        f"OptimizerStep.grad_norm: gradients (3, 4) and (12,) have norm 13, got {step.grad_norm} (GradScaler {scale})"
    torch.testing.assert_close(w.detach(), torch.tensor([1.0 - 0.3, -2.0 - 0.4]),
                               msg=lambda m: f"OptimizerStep with its norm (GradScaler {scale}): the step changed: {m}")
    assert step.last_lr == [0.1, 0.01], f"OptimizerStep.last_lr: the step used lr 0.1 and 0.01, got {step.last_lr}"


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


# ---------------------------------------------------------------------------- train_multitask.py's loop
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A tiny model and the three task files; run(out, *flags) trains train_multitask.py on them."""
    import train_multitask
    from conftest import save_tiny_model, write_task_files
    root = tmp_path_factory.mktemp("loop")
    (root / "data").mkdir()
    write_task_files(root / "data")
    model = save_tiny_model(root / "model")

    def run(out, *flags):
        args = ["--model", str(model), "--data_dir", str(root / "data"), "--out_dir", str(out / "run"),
                "--batch_size", "4", "--lr", "1e-3", "--seed", "3", "--device", "cpu", "--amp", "off",
                "--keep_resume_state"]
        for task in ("sst", "para", "sts"):
            for split in ("dev", "test"):
                args += [f"--{task}_{split}_out", str(out / "predictions" / f"{task}-{split}-output.csv")]
        return train_multitask.main(args + list(flags))
    return train_multitask, run


def test_surgery_accumulation_hands_each_task_its_loss_over_grad_accum(tiny_run, tmp_path, monkeypatch):
    """--surgery pcgrad --grad_accum 2: PCGrad.accumulate gets, per micro-batch, each task's batch loss / 2
    (the mean over the step's micro-batches, as plain training's backward of sum(losses) / grad_accum)."""
    train_multitask, run = tiny_run
    from minbert.methods import gradvac, pcgrad
    log, seen, real_loss = [], [], train_multitask.task_loss

    def logged(task, out, labels):
        loss = real_loss(task, out, labels)
        log.append((task, loss.item()))
        return loss

    base = getattr(pcgrad, "PCGrad", None) or gradvac.PCGrad

    class Recording(base):
        def accumulate(self, losses, scaler=None):
            seen.append(([None if l is None else l.item() for l in losses], list(log)))
            log.clear()
            return super().accumulate(losses, scaler)

    monkeypatch.setattr(train_multitask, "task_loss", logged)
    for module in (pcgrad, gradvac):   # wherever the script's from_args finds the class
        monkeypatch.setattr(module, "PCGrad", Recording, raising=False)
    run(tmp_path, "--epochs", "1", "--surgery", "pcgrad", "--grad_accum", "2", "--steps_per_epoch", "2")
    assert len(seen) == 4, f"2 steps x 2 micro-batches: expected 4 accumulate() calls, got {len(seen)}"
    for call, (got, batches) in enumerate(seen):
        want = [v / 2 for _, v in batches]
        assert [t for t, _ in batches] == ["sst", "para", "sts"] and got == pytest.approx(want, rel=1e-6), \
            (f"train_multitask.py --surgery pcgrad --grad_accum 2, micro-batch {call}: PCGrad.accumulate got {got}, "
             f"expected each task's loss / grad_accum = {want}")


def test_a_non_finite_loss_in_an_earlier_micro_batch_skips_the_whole_update(tiny_run, tmp_path, monkeypatch):
    """--grad_accum 2: a NaN loss in the FIRST micro-batch of step 1 puts NaN into the accumulated gradients, so the
    whole update must be skipped, even though the second micro-batch's loss is finite. Through train_multitask.py's
    own loop: AdamW steps twice in 3 steps (steps 2 and 3), and every weight stays finite."""
    train_multitask, run = tiny_run
    from minbert.adamw import AdamW
    calls, steps, real_loss, real_step = {"n": 0}, [], train_multitask.task_loss, AdamW.step

    def nan_first(task, out, labels):
        calls["n"] += 1
        loss = real_loss(task, out, labels)
        return loss * float("nan") if calls["n"] == 1 else loss   # step 1, micro-batch 1 of 2

    def counted(self, *a, **k):
        steps.append(calls["n"])   # task losses made before this update
        return real_step(self, *a, **k)

    monkeypatch.setattr(train_multitask, "task_loss", nan_first)
    monkeypatch.setattr(AdamW, "step", counted)
    run(tmp_path, "--epochs", "1", "--grad_accum", "2", "--steps_per_epoch", "3", "--hidden_dropout_prob", "0.1")
    assert steps == [4, 6], (f"train_multitask.py --grad_accum 2 with a NaN loss in step 1's first micro-batch: AdamW "
                             f"stepped after task losses {steps}; expected the updates of steps 2 and 3 only ([4, 6]): "
                             f"a non-finite loss in ANY micro-batch must skip the update")
    weights = torch.load(tmp_path / "run" / "last.pt", weights_only=True)["model"]
    bad = [k for k, v in weights.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    assert not bad, f"train_multitask.py --grad_accum 2: the NaN of an earlier micro-batch reached the weights {bad[:3]}"
    epoch = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    nan = [k for k, v in epoch.items() if k.startswith("loss_") and not math.isfinite(v)]
    assert not nan, (f"train_multitask.py: the skipped step's NaN loss went into the epoch's mean {nan} in "
                     f"metrics.jsonl; the running loss sums must count finite losses only")


def test_every_task_steps_draw_the_batches_pcgrad_draws(tiny_run, tmp_path, monkeypatch):
    """The equal-update control of PCGrad (--heterogeneous --heterogeneous_mix every_task) must read, step by step,
    the same task batches as --surgery pcgrad at the same seed (one of each task), so the two differ only in the
    surgery."""
    train_multitask, run = tiny_run
    real = train_multitask.to_device
    for flags in (["--surgery", "pcgrad"], ["--heterogeneous", "--heterogeneous_mix", "every_task"]):
        seen = []

        def recording(batch, device):
            seen.append(tuple(batch["ids"]))
            return real(batch, device)
        monkeypatch.setattr(train_multitask, "to_device", recording)
        run(tmp_path / flags[0][2:], "--epochs", "1", "--steps_per_epoch", "3", *flags)
        if flags[0] == "--surgery":
            surgery = seen
    assert len(seen) == 9 and seen == surgery, \
        f"train_multitask.py: every_task steps read {seen}, --surgery pcgrad {surgery} (3 steps x 3 task batches each)"


def test_best_pt_keeps_the_best_epoch_not_the_last(tiny_run, tmp_path, monkeypatch):
    """Dev overall 0.9 after epoch 1 and 0.5 after epoch 2: best.pt must hold epoch 1's weights and scores
    (the weights last.pt held after epoch 1), and the run's record names epoch 1 as the best."""
    train_multitask, run = tiny_run
    overall = iter([0.9, 0.5])
    real_scores = train_multitask.task_scores

    def scripted(*a, **k):
        scores = real_scores(*a, **k)
        return {**scores, "overall": next(overall)}

    snapshots, real_save_last = [], checkpoint.save_last

    def saving(out_dir, state):
        snapshots.append({k: v.clone() for k, v in state["model"].items()})
        return real_save_last(out_dir, state)

    monkeypatch.setattr(train_multitask, "task_scores", scripted)
    monkeypatch.setattr(checkpoint, "save_last", saving)
    history = run(tmp_path, "--epochs", "2", "--steps_per_epoch", "2")
    best = checkpoint.load(tmp_path / "run" / "best.pt")
    assert best["scores"]["overall"] == 0.9, f"best.pt scores: {best['scores']} (expected epoch 1's, overall 0.9)"
    assert [r["overall"] for r in history] == [0.9, 0.5]
    assert any((snapshots[0][k] != snapshots[1][k]).any() for k in snapshots[0]), "fixture: epoch 2 must change weights"
    for k, v in best["model"].items():
        assert torch.equal(v, snapshots[0][k]), f"best.pt['model'][{k}] is not epoch 1's weights (the best epoch)"


@pytest.mark.parametrize("select, kept_epoch", [("best", 1), ("last", 2)])
def test_select_epoch_picks_the_model_behind_the_predictions_and_outputs(tiny_run, tmp_path, monkeypatch, select,
                                                                        kept_epoch):
    """Dev overall 0.9 after epoch 1 and 0.5 after epoch 2: the predictions (and outputs.pt) come from epoch 1's
    weights with --select_epoch best, and from the final epoch's with --select_epoch last (selection kept apart
    from the dev set it would otherwise be chosen on)."""
    train_multitask, run = tiny_run
    overall, real_scores = iter([0.9, 0.5]), train_multitask.task_scores
    monkeypatch.setattr(train_multitask, "task_scores", lambda *a, **k: {**real_scores(*a, **k), "overall": next(overall)})
    snapshots, written = [], []
    real_save_last, real_write = checkpoint.save_last, train_multitask.write_all_predictions

    def saving(out_dir, state):
        snapshots.append({k: v.clone() for k, v in state["model"].items()})
        return real_save_last(out_dir, state)

    def writing(args, stop, model, *rest):
        written.append({k: v.clone() for k, v in model.state_dict().items()})
        return real_write(args, stop, model, *rest)

    monkeypatch.setattr(checkpoint, "save_last", saving)
    monkeypatch.setattr(train_multitask, "write_all_predictions", writing)
    run(tmp_path, "--epochs", "2", "--steps_per_epoch", "2", "--select_epoch", select)
    assert len(written) == 1 and len(snapshots) == 2
    for k, v in written[0].items():
        assert torch.equal(v, snapshots[kept_epoch - 1][k]), \
            f"--select_epoch {select}: the predictions' weights {k} are not epoch {kept_epoch}'s (train_multitask.finish)"


def test_epoch_record_holds_the_mean_training_loss_of_each_task(tiny_run, tmp_path, monkeypatch):
    """metrics.jsonl's loss_<task> of an epoch: the mean of that epoch's batch losses of the task (each
    epoch starting afresh), computed here from the losses as they were made."""
    train_multitask, run = tiny_run
    log, real_loss = [], train_multitask.task_loss

    def logged(task, out, labels):
        loss = real_loss(task, out, labels)
        log.append((task, loss.item()))
        return loss

    from minbert.core import progress
    ends, real_epoch_end = [], progress.Log.epoch_end

    def marking(self, history):
        ends.append(len(log))
        return real_epoch_end(self, history)

    monkeypatch.setattr(train_multitask, "task_loss", logged)
    monkeypatch.setattr(progress.Log, "epoch_end", marking)
    history = run(tmp_path, "--epochs", "2", "--steps_per_epoch", "4", "--surgery", "pcgrad")
    for epoch, (start, end) in enumerate(zip([0] + ends[:-1], ends)):
        for task in ("sst", "para", "sts"):
            values = [v for t, v in log[start:end] if t == task]
            want = round(sum(values) / len(values), 4)
            assert history[epoch][f"loss_{task}"] == pytest.approx(want, abs=1e-4), \
                (f"train_multitask.py epoch {epoch + 1}: loss_{task} = {history[epoch][f'loss_{task}']}, expected the "
                 f"mean of its {len(values)} batch losses {want} (loop.running counts one per batch, reset per epoch)")


# ---------------------------------------------------------------------------- steps per epoch, sampling flags
def sampling_args(argv):
    parser = argparse.ArgumentParser(exit_on_error=False)
    sampling.add_args(parser)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--grad_accum", type=int, default=1)
    parser.add_argument("--steps_per_epoch", type=int, default=None)
    parser.add_argument("--surgery", default="none")
    parser.add_argument("--grad_compromise", type=int, default=0)
    return parser.parse_args(argv)


def test_steps_per_epoch_count_every_batch_a_step_takes():
    """One pass over 200 examples in expectation, counting batches of 4 per micro-batch, by hand:
    plain 200/4 = 50 steps; --grad_accum 2: 25; surgery or --heterogeneous (3 tasks per micro-batch)
    with --grad_accum 2: ceil(200/24) = 9; --grad_compromise 5: 200/20 = 10; 2 ranks: 25;
    --extra_sst_pass over 30 SST examples with --grad_accum 2: ceil(30/8) = 4 more."""
    sizes = [100, 60, 40]
    cases = [([], 1, (50, 50)), (["--grad_accum", "2"], 1, (25, 25)),
             (["--grad_accum", "2", "--surgery", "pcgrad"], 1, (9, 9)),
             (["--grad_accum", "2", "--heterogeneous"], 1, (9, 9)), (["--grad_compromise", "5"], 1, (10, 10)),
             ([], 2, (25, 25)), (["--grad_accum", "2", "--extra_sst_pass"], 1, (25, 29)),
             (["--steps_per_epoch", "7", "--extra_sst_pass"], 1, (7, 15))]
    for argv, world, want in cases:
        got = sampling.steps_per_epoch(sampling_args(argv), sizes, 30, world) if world != 1 else \
            sampling.steps_per_epoch(sampling_args(argv), sizes, 30)
        assert got == want, f"minbert.tasks.sampling.steps_per_epoch({argv}, world size {world}): got {got}, expected {want}"


def test_sampling_flags_defaults_and_choices():
    args = sampling_args([])
    assert (args.schedule, args.heterogeneous, args.heterogeneous_mix, args.extra_sst_pass) == \
        ("proportional", False, "natural", False), f"minbert.tasks.sampling.add_args defaults: {args}"
    args = sampling_args(["--schedule", "annealed", "--heterogeneous", "--heterogeneous_mix", "every_task", "--extra_sst_pass"])
    assert (args.schedule, args.heterogeneous, args.heterogeneous_mix, args.extra_sst_pass) == \
        ("annealed", True, "every_task", True)
    for bad in (["--schedule", "random"], ["--heterogeneous_mix", "all"]):
        with pytest.raises((SystemExit, argparse.ArgumentError)):
            sampling_args(bad)


def test_task_sampler_starts_at_epoch_one_and_rejects_bad_sizes():
    """Stickland & Murray's annealing: α = 1 at the first epoch, so p_i = N_i / ΣN (proportional)."""
    sizes = [100, 60, 40]
    want = np.array([0.5, 0.3, 0.2])
    np.testing.assert_allclose(sampling.task_probs(sizes, "annealed"), want, rtol=1e-12,
                               err_msg="task_probs(sizes, 'annealed') with the default epoch is epoch 1 of 1: α = 1")
    np.testing.assert_allclose(sampling.TaskSampler(sizes, "annealed", num_epochs=3, seed=0).probs, want, rtol=1e-12,
                               err_msg="a new TaskSampler draws with epoch 1's probabilities (α = 1)")
    for bad in ([[100, 60]], [], [100, 0]):
        with pytest.raises(ValueError, match=r"^sizes must be a non-empty list of positive example counts"):
            sampling.task_probs(bad, "proportional")


def test_natural_mix_draws_each_sub_batch_from_the_sampler():
    """heterogeneous_tasks(sampler, 2) (default mix 'natural') takes two draws: round robin 0, 1."""
    sampler = sampling.TaskSampler([10, 10, 10], "round_robin", num_epochs=1, seed=0)
    assert sampling.heterogeneous_tasks(sampler, 2) == [0, 1] and sampler.position == 2, \
        "heterogeneous_tasks: the default mix must be 'natural' (each sub-batch a draw of the sampler)"
    assert sampling.heterogeneous_tasks(sampler, 2, "every_task") == [0, 1] and sampler.position == 2
    with pytest.raises(ValueError, match=r"^heterogeneous_tasks: mix must be one of \('natural', 'every_task'\), got 'all'"):
        sampling.heterogeneous_tasks(sampler, 2, "all")


def test_a_draw_past_the_last_cumulative_probability_is_the_last_task():
    """Ten tasks of p = 0.1: the cumulative sum ends at 0.9999999999999999, and a draw u above it
    (u < 1 is possible) must still pick the last task, 9."""
    sampler = sampling.TaskSampler([1] * 10, "proportional", num_epochs=1, seed=0)
    assert np.cumsum(sampler.probs)[-1] < 1.0, "fixture: the cumulative sum must end below 1"

    class Top:
        def random(self):
            return np.nextafter(1.0, 0.0)                             # the largest float below 1

    sampler.rng = Top()
    assert sampler.next() == 9, "TaskSampler.next: a draw above the last cumulative probability is the last task"


# ---------------------------------------------------------------------------- checkpoints and resume
def test_run_folder_flags_and_predict_only_needs_resume(capsys):
    parser = argparse.ArgumentParser()
    checkpoint.add_args(parser, out_dir="runs/here")
    args = parser.parse_args([])
    assert (args.out_dir, args.resume, args.predict_only) == ("runs/here", None, False), f"defaults: {args}"
    assert parser.parse_args(["--predict_only", "--resume", "x.pt"]).predict_only is True
    checkpoint.check_args(parser.parse_args(["--predict_only", "--resume", "x.pt"]), parser)   # fine
    with pytest.raises(SystemExit):
        checkpoint.check_args(parser.parse_args(["--predict_only"]), parser)
    assert "--predict_only needs --resume RUN_DIR, a finished run's --out_dir (e.g. runs/here)" \
        in capsys.readouterr().err


def test_save_makes_the_folders_and_save_last_retires_interrupted_pt(tmp_path):
    checkpoint.save(tmp_path / "a" / "b" / "x.pt", {"n": 1})
    assert torch.load(tmp_path / "a" / "b" / "x.pt", weights_only=True) == {"n": 1}, "save must create missing folders"
    (tmp_path / "interrupted.pt").write_bytes(b"old")
    checkpoint.save_last(tmp_path, {"n": 2})
    assert torch.load(tmp_path / "last.pt", weights_only=True) == {"n": 2}, "save_last writes OUT_DIR/last.pt"
    assert not (tmp_path / "interrupted.pt").exists(), "save_last must remove the older OUT_DIR/interrupted.pt"
    assert checkpoint.saved_args({"model": {}}) == {}, "a checkpoint without flags has none"


def test_resume_takes_unset_flags_from_the_checkpoint_and_names_every_difference(tmp_path):
    from types import SimpleNamespace
    torch.save({"model": {}, "optimizer": {}, "args": json.dumps({"lr": 0.1, "epochs": 7})}, tmp_path / "last.pt")
    args = SimpleNamespace(resume=str(tmp_path / "last.pt"), predict_only=False, lr=0.1, epochs=None)
    checkpoint.load_for_resume(args, "train_mml.py")
    assert args.epochs == 7, "a flag left at None takes the checkpoint's value (train_mml's --epochs)"
    args = SimpleNamespace(resume=str(tmp_path / "last.pt"), predict_only=False, lr=0.2, epochs=None, smart=1.0)
    with pytest.raises(UserError) as e:
        checkpoint.load_for_resume(args, "train_mml.py")
    message = str(e.value)
    assert message.startswith(f"--resume {tmp_path / 'last.pt'} was trained with other flags") and \
        "\n  --lr: checkpoint 0.1, this command 0.2\n  --smart: checkpoint None, this command 1.0\n" in message, \
        f"every differing flag, one a line (a flag only this command has too): {message}"


def test_resume_errors_name_the_file_to_use(tmp_path):
    from types import SimpleNamespace
    torch.save({"model": {}, "args": "{}"}, tmp_path / "best.pt")
    with pytest.raises(UserError, match=rf"Continue an unfinished run with --resume {tmp_path / 'last.pt'} "):
        checkpoint.load_for_resume(SimpleNamespace(resume=str(tmp_path / "best.pt"), predict_only=False), "train_multitask.py")
    torch.save({"args": "{}"}, tmp_path / "other.pt")
    with pytest.raises(UserError) as e:
        checkpoint.load_for_resume(SimpleNamespace(resume=str(tmp_path / "other.pt"), predict_only=False), "x.py")
    assert str(e.value).startswith(f"--resume {tmp_path / 'other.pt'}: ") and "not a checkpoint written by x.py" in str(e.value) \
        and "'model' key" in str(e.value), f"say which file, which script and what is missing: {e.value}"


def test_restore_skips_parts_that_are_off(capsys):
    loop = checkpoint.LoopState(running={})

    class Part:
        def __init__(self):
            self.loaded = None

        def load_state_dict(self, state):
            self.loaded = state
    on = Part()
    ck = {**checkpoint.rng_states(), "epoch": 2, "step": 3, "best": 0.5, "history": [], "running": {}, "extra": {},
          "off": {"x": 1}, "on": {"y": 2}, "absent": None}
    checkpoint.restore(ck, {"off": None, "on": on, "absent": Part()}, loop)
    assert on.loaded == {"y": 2} and (loop.epoch, loop.step, loop.best) == (2, 3, 0.5)
    out = capsys.readouterr().out
    assert "epoch 2" in out and "step 3" in out, f"restore must say where the run resumes: {out!r}"


def test_load_asks_torch_for_weights_only_and_the_device_and_names_the_file(tmp_path, monkeypatch):
    """torch < 2.6 (requirements.txt allows 2.1) loads pickles unless weights_only=True is passed, so
    load() must pass it, and the map_location it was given; every failure names the file."""
    checkpoint.save(tmp_path / "ok.pt", {"n": 1})
    seen, real_load = [], torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: seen.append(k) or real_load(*a, **k))
    assert checkpoint.load(tmp_path / "ok.pt", map_location="meta") == {"n": 1}
    assert seen == [{"map_location": "meta", "weights_only": True}], f"checkpoint.load called torch.load with {seen}"
    monkeypatch.undo()
    with pytest.raises(UserError, match=rf"^{tmp_path / 'missing.pt'}: no such checkpoint file$"):
        checkpoint.load(tmp_path / "missing.pt")
    (tmp_path / "cut.pt").write_bytes((tmp_path / "ok.pt").read_bytes()[:40])
    with pytest.raises(UserError) as caught:
        checkpoint.load(tmp_path / "cut.pt")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'cut.pt'}: not a readable minbert checkpoint") and "NoneType" not in message, message


class Payload:
    """A pickled object in a checkpoint (what weights-only loading refuses)."""


def test_a_pickled_object_is_refused_naming_the_file_and_the_danger(tmp_path):
    torch.save({"model": {}, "payload": Payload()}, tmp_path / "shared.pt")
    with pytest.raises(UserError) as e:
        checkpoint.load(tmp_path / "shared.pt")
    message = str(e.value)
    assert message.startswith(f"{tmp_path / 'shared.pt'}: ") and "pickled Python objects" in message \
        and "someone else's code" in message and "refused" in message, message
