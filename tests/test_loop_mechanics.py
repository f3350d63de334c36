"""The training loop's mechanics: the optimizer step and its skip counter, what a pass over a task's
data reshuffles, what the loop's position and best score keep, what best.pt holds.

Many tests here were written for a mutant that survived the rest of the suite (bench/mutation.py,
bench/results/mutation.md names them): a small change to the scripts' step, minbert/run/checkpoint.py or
minbert/tasks/sampling.py that no other test failed on.
Oracles: torch itself (AdamW's step as recorded by a spy, GradScaler's scale, the torch.Generator draws a pass is
documented to use), an uninterrupted run beside a run with a bad step, and hand-counted cases.
Run: python -m pytest -q tests/test_loop_mechanics.py   (offline, CPU)
"""

import argparse
import json
import math

import numpy as np
import pytest
import torch

from minbert.core.errors import UserError
from minbert.run import checkpoint
from minbert.tasks import sampling
from test_train_mml import setup as mml_setup  # noqa: F401  (pytest fixture)


# ---------------------------------------------------------------------------- the step: skip, schedule, scaler, norm
def nan_on(monkeypatch, calls):
    """train_mml with --method mv: the multiverse penalty is NaN at the listed calls (one a step), so those steps
    are non-finite; returns the call counter."""
    from minbert.methods.mml import MultiverseHeads
    real, seen = MultiverseHeads.multiverse_loss, {"n": 0}

    def penalty(self):
        seen["n"] += 1
        return real(self) * (float("nan") if seen["n"] in calls else 1.0)

    monkeypatch.setattr(MultiverseHeads, "multiverse_loss", penalty)
    return seen


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")   # skipped steps: on purpose
def test_ten_non_finite_steps_in_a_row_stop_the_run_and_a_finite_one_resets_the_count(mml_setup, tmp_path,
                                                                                       monkeypatch):
    """Steps 1-9 and 11-20 non-finite, step 10 finite: the 10th bad step in a row is step 20 (not step 11, as it
    would be if the finite step left the count alone), and it stops the run naming the run folder's last.pt."""
    from test_train_mml import run as run_mml
    seen = nan_on(monkeypatch, set(range(1, 10)) | set(range(11, 21)))
    with pytest.raises(UserError, match=r"^10 optimizer steps in a row had a non-finite loss: lower --lr or use "
                                        r"--amp off; .*/run/last\.pt holds the last finished epoch$"):
        run_mml(mml_setup, tmp_path / "run", "--heads", "4", "--epochs", "5", method="mv")
    assert seen["n"] == 20, f"the run must stop at the 10th bad step in a row, step 20; it stopped at step {seen['n']}"


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")   # skipped steps: on purpose
def test_a_non_finite_step_keeps_the_weights_and_moves_the_schedule(tmp_path, monkeypatch):
    """train_multitask's learning rates (warmup, then decay) as AdamW used them at each update, recorded by a spy:
    with step 3 non-finite, AdamW is not called at step 3 (the weights stay), and steps 4, 5, ... use the rates of
    the run without the bad step (the schedule moved on)."""
    import train_multitask
    from minbert.adamw import AdamW
    from test_train_multitask import run
    used, real_step, real_loss = [], AdamW.step, train_multitask.task_loss
    calls = {"n": 0}

    def step(self, *a, **k):
        used.append((calls["n"], [g["lr"] for g in self.param_groups]))
        return real_step(self, *a, **k)

    def loss_nan_at_3(task, out, labels):
        calls["n"] += 1
        loss = real_loss(task, out, labels)
        return loss * float("nan") if calls["n"] == 3 and bad["on"] else loss

    bad = {"on": False}
    monkeypatch.setattr(AdamW, "step", step)
    monkeypatch.setattr(train_multitask, "task_loss", loss_nan_at_3)
    setup = multitask_setup(tmp_path)
    run(setup, tmp_path / "clean", "--epochs", "1", "--warmup", "0.5")
    clean, used[:], calls["n"], bad["on"] = list(used), [], 0, True
    run(setup, tmp_path / "bad", "--epochs", "1", "--warmup", "0.5")
    assert [n for n, _ in used] == [n for n, _ in clean if n != 3], \
        f"the non-finite step 3 must not reach AdamW; updates at steps {[n for n, _ in used]}"
    assert used == [x for x in clean if x[0] != 3], \
        "after the skipped step 3 each update must use the learning rate of the same step in the clean run"


def test_under_fp16_backward_runs_on_the_loss_times_the_grad_scalers_scale(mml_setup, tmp_path, monkeypatch):
    """torch.amp's recipe: scaler.scale(loss).backward(), so small fp16 gradients do not underflow. GradScaler's
    documented first scale is 2**16, a power of two: the tensor backward starts from is exactly 65536 x the task loss
    (train_mml --method bert: no penalty term), recorded by spies on task_loss and Tensor.backward."""
    from minbert.methods.mml import MultiverseHeads
    from test_train_mml import run as run_mml
    monkeypatch.setattr("minbert.core.device.resolve_amp", lambda amp, device: (amp, "forced for the test"))
    losses, started, real_loss, real_backward = [], [], MultiverseHeads.task_loss, torch.Tensor.backward

    def task_loss(self, *a, **k):
        loss, per_head = real_loss(self, *a, **k)
        losses.append(loss.item())
        return loss, per_head

    def backward(self, *a, **k):
        started.append(self.item())
        return real_backward(self, *a, **k)

    monkeypatch.setattr(MultiverseHeads, "task_loss", task_loss)
    monkeypatch.setattr(torch.Tensor, "backward", backward)
    run_mml(mml_setup, tmp_path / "run", "--epochs", "1", "--amp", "fp16", method="bert")
    assert started[0] == 65536 * losses[0], \
        f"--amp fp16: backward must start from the loss x 65536 (GradScaler's first scale): {started[0]} vs {losses[0]}"


def multitask_setup(root):
    from conftest import save_tiny_model, write_task_files
    (root / "data").mkdir(parents=True, exist_ok=True)
    write_task_files(root / "data")
    return root / "data", save_tiny_model(root / "model")


def test_under_fp16_the_logged_gradient_norm_is_the_unscaled_norm_of_the_update(tmp_path, monkeypatch):
    """The GradScaler multiplies the loss (so the gradients) by its scale, 65536 at first: steps.jsonl's grad_norm
    must be the norm of the gradients AdamW applies (unscaled), computed here in float64 by a spy on AdamW.step."""
    from minbert.adamw import AdamW
    from test_train_multitask import run
    monkeypatch.setattr("minbert.core.device.resolve_amp", lambda amp, device: (amp, "forced for the test"))
    norms, real_step = [], AdamW.step

    def step(self, *a, **k):
        grads = [p.grad.double() for g in self.param_groups for p in g["params"] if p.grad is not None]
        norms.append(float(torch.sqrt(sum((g * g).sum() for g in grads))))
        return real_step(self, *a, **k)

    monkeypatch.setattr(AdamW, "step", step)
    run(multitask_setup(tmp_path), tmp_path, "--epochs", "1", "--amp", "fp16", "--log_every", "1")
    records = [json.loads(x) for x in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()]
    assert len(norms) > 1, "fixture: some fp16 updates must be taken"
    logged = [r["grad_norm"] for r in records if r["grad_norm"] is not None]   # null: overflowed, no update
    assert len(logged) == len(norms) and logged == pytest.approx(norms, rel=1e-3), \
        f"--amp fp16: steps.jsonl's grad_norm {logged[:3]} must be the unscaled norms {norms[:3]}, not x65536"


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
    ends, real_epoch_end = [], progress.epoch_end

    def marking(*a):
        ends.append(len(log))
        return real_epoch_end(*a)

    monkeypatch.setattr(train_multitask, "task_loss", logged)
    monkeypatch.setattr(progress, "epoch_end", marking)
    history = run(tmp_path, "--epochs", "2", "--steps_per_epoch", "4", "--surgery", "pcgrad")
    for epoch, (start, end) in enumerate(zip([0] + ends[:-1], ends)):
        for task in ("sst", "para", "sts"):
            values = [v for t, v in log[start:end] if t == task]
            want = round(sum(values) / len(values), 4)
            assert history[epoch][f"loss_{task}"] == pytest.approx(want, abs=1e-4), \
                (f"train_multitask.py epoch {epoch + 1}: loss_{task} = {history[epoch][f'loss_{task}']}, expected the "
                 f"mean of its {len(values)} batch losses {want} (the loop's sums count one per batch, reset per epoch)")


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
    class Part:
        def __init__(self):
            self.loaded = None

        def load_state_dict(self, state):
            self.loaded = state
    on = Part()
    loop = {"epoch": 2, "step": 3, "best": 0.5, "history": []}
    ck = {**checkpoint.rng_states(), "loop": loop, "off": {"x": 1}, "on": {"y": 2}, "absent": None}
    assert checkpoint.restore(ck, {"off": None, "on": on, "absent": Part()}) is loop
    assert on.loaded == {"y": 2}, "restore must load each object that is on, and pass over those that are off"
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
