"""The training log (minbert/core/progress.py): the progress lines of a run in a log, steps.jsonl, its printed line,
--report_to tensorboard, and the clock a resume continues.

Oracles: (b) the numbers as train_multitask.py made them, recorded by spies outside the code under test: each
task loss as task_loss returned it, the learning rates AdamW held when it stepped, and the gradient norm computed
here in float64 from the gradients AdamW was about to apply. Time is a fake clock that moves 1 s per task batch
(no real timing), so speeds and elapsed times are exact: 4 examples a batch -> 4.0 ex/s. (c) Properties: with
stdout piped (pytest captures it: not a terminal) a run prints its lines by the step and time rules; a run
interrupted (Ctrl-C in its evaluation, or a crash in epoch 2) and resumed records what the uninterrupted run
records, speed and time included, one record a step.
"""

import importlib.machinery
import json
import math
import sys
import types

import pytest
import torch

import train_multitask
from minbert.adamw import AdamW
from minbert.core import progress
from minbert.run.checkpoint import LoopState
from conftest import signal_on_call
from test_train_multitask import run, setup  # noqa: F401  (fixture)

EVERY = 4
STEPS = 18   # 72 training examples, batch 4: 18 steps per epoch


@pytest.fixture
def spied(monkeypatch):
    """Fake time (1 s per task batch), and what train_multitask.py made: [(task, loss)], [(lrs, grad norm)] per
    update."""
    now, losses, updates = [0.0], [], []
    real_loss, real_step = train_multitask.task_loss, AdamW.step

    def task_loss(task, out, labels):
        now[0] += 1.0   # a batch takes 1 s
        loss = real_loss(task, out, labels)
        losses.append((task, loss.item()))
        return loss

    def step(self, *a, **k):
        grads = [p.grad.double() for g in self.param_groups for p in g["params"] if p.grad is not None]
        updates.append(([g["lr"] for g in self.param_groups], float(torch.sqrt(sum((g * g).sum() for g in grads)))))
        return real_step(self, *a, **k)

    monkeypatch.setattr(train_multitask, "task_loss", task_loss)
    monkeypatch.setattr(AdamW, "step", step)
    monkeypatch.setattr(progress, "clock", lambda: now[0])
    return losses, updates


def records(folder):
    return [json.loads(line) for line in (folder / "run" / "steps.jsonl").read_text().splitlines()]


def progress_lines(text):
    return [line for line in text.splitlines() if line.startswith("epoch ") and " step " in line]


# ---------------------------------------------------------------------------- progress lines
def test_piped_run_prints_a_step_record_line_every_n_steps(setup, tmp_path, capsys):
    run(setup, tmp_path, "--epochs", "2", "--log_every", "7", "--head_lr", "1e-2")
    out = capsys.readouterr().out
    steps = math.ceil(3 * 24 / 4)   # 72 training examples, batch 4: 18 steps per epoch, 36 in the run
    lines = [line for line in out.splitlines() if line.startswith("step ")]
    assert [int(r.split()[1]) for r in lines] == [7, 14, 21, 28, 35], \
        f"minbert.core.progress: with --log_every 7, expected a line at steps 7, 14, ..., 35 of 36, got {lines}"
    for part in ("(epoch 2)", "| loss ", "sst ", "| lr ", "heads", "| grad norm ", " ex/s"):
        assert part in lines[-1], f"a step record line must show {part!r}: {lines[-1]!r}"
    shown = progress_lines(out)   # the progress lines: start, first step, last step of each epoch (fast steps)
    assert len(shown) == 6 and f"step {steps}/{steps}" in shown[-1] and "ETA" in shown[-1], shown


def test_piped_run_with_default_flags_shows_each_epoch_start_and_end(setup, tmp_path, capsys, monkeypatch):
    """Default: by time only (every 30 s), plus the start, the first and the last step of each epoch, so even a
    short run shows it is alive. The clock is frozen, so a slow machine's 30 s never add a line here (the time rule
    has its own test below)."""
    monkeypatch.setattr(progress, "clock", lambda: 0.0)
    run(setup, tmp_path, "--epochs", "2")
    lines = progress_lines(capsys.readouterr().out)
    assert [line.split(" | ")[0] for line in lines] == [
        "epoch 1/2 step 0/18 (0%)", "epoch 1/2 step 1/18 (6%)", "epoch 1/2 step 18/18 (100%)",
        "epoch 2/2 step 0/18 (0%)", "epoch 2/2 step 1/18 (6%)", "epoch 2/2 step 18/18 (100%)"], \
        f"minbert.core.progress: with stdout piped, a run must print progress lines; got {lines}"


def logged_steps(monkeypatch, durations, total, epochs=1, seconds=30.0, first=0, numbers=None):
    """Drive a Log as a training loop does, with steps of the given fake durations (s), 4 examples each, from step
    `first` of epoch 1; returns the log (its lines are on stdout)."""
    now = [0.0]
    monkeypatch.setattr(progress, "clock", lambda: now[0])
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    args = types.SimpleNamespace(epochs=epochs, log_every=10 ** 6, log_seconds=seconds, out_dir="unused",
                                 report_to="none")
    loop = LoopState(running={"sst": [1.5, 1]}, step=first)
    log = progress.Log(args, types.SimpleNamespace(last_lr=[0.1], grad_norm=torch.tensor(1.0)), loop, total)
    for step, took in zip(log.steps(1), durations):
        loop.step = step
        now[0] += took
        log.step(4, **(numbers or {}))
    return log


def test_time_rule_prints_when_log_seconds_have_passed(monkeypatch, capsys):
    logged_steps(monkeypatch, [10.0] * 10, total=10, seconds=25, numbers={"active": 3})
    lines = progress_lines(capsys.readouterr().out)
    # the start, after step 1, then whenever 25 s passed since the last line, and at the last step
    want = [f"epoch 1/1 step {n}/10 ({10 * n}%)" for n in (0, 1, 4, 7, 10)]
    assert [line.split(" | ")[0] for line in lines] == want, \
        f"minbert.core.progress.Log: expected lines at the start and after steps 1, 4, 7 (25 s later) and 10: {lines}"
    assert lines[-1].endswith("| 0.10 steps/s, 0 ex/s | ETA epoch 0m00s, run 0m00s | sst 1.500 active 3"), \
        f"a line shows the recent rate, the ETA, the running losses (3 places) and the extra numbers: {lines[-1]}"


def test_a_line_is_printed_as_the_epoch_starts_before_the_first_step(monkeypatch, capsys):
    """The first step pays one-off setup (and the model load is just before it): a log must show the loop has
    begun before that step runs, not only after it (a run looked hung for a minute)."""
    logged_steps(monkeypatch, [], total=956, epochs=2, first=86)
    assert capsys.readouterr().out.splitlines() == [
        "epoch 1/2 step 86/956 (9%) | starting; a line after the first step, then every 30 s"], \
        "minbert.core.progress.Log: expected one start line before the first step"


def test_the_eta_follows_the_rate_of_the_last_steps_not_the_average_since_the_start(monkeypatch, capsys):
    """100 steps at 1 s, then the machine gets busy: 3 s a step. At step 150 of 200 the 50 steps left take 150 s at
    the recent rate (the last RATE_WINDOW = 50 steps were all 3 s); the average since the start (250 s / 150 steps)
    would say 83 s. The next epoch's 200 steps add 600 s to the run's ETA."""
    assert progress.RATE_WINDOW == 50
    # lines: the start, step 1 (t = 1 s), then by time: 249 s later, t = 250 s, is step 150 (100 x 1 s + 50 x 3 s)
    logged_steps(monkeypatch, [1.0] * 100 + [3.0] * 50, total=200, epochs=2, seconds=249)
    last = progress_lines(capsys.readouterr().out)[-1]
    assert last.startswith("epoch 1/2 step 150/200"), last
    assert "0.33 steps/s, 1 ex/s | ETA epoch 2m30s, run 12m30s" in last, \
        (f"minbert.core.progress.Log: after 50 steps at 3 s, 50 steps left must be ETA 2m30s (the recent rate), "
         f"and the run 2m30s + 200 x 3 s = 12m30s; got {last!r}")


def test_recent_rate_counts_only_training_time_and_the_window():
    rate = progress.RecentRate(window=3)
    rate.restart(0.0)
    for now, examples in ((1.0, 10), (2.0, 10), (3.0, 10)):
        rate.add(now, examples)
    rate.restart(100.0)                    # an evaluation between epochs: not training time
    rate.add(104.0, 40)                    # a slow step: the window now holds 1 s, 1 s, 4 s
    assert rate.steps_per_s() == 3 / 6 and rate.examples_per_s() == 60 / 6, \
        (f"minbert.core.progress.RecentRate: the last 3 steps took 1, 1, 4 s for 10, 10, 40 examples: expected "
         f"0.5 steps/s and 10 ex/s, got {rate.steps_per_s()}, {rate.examples_per_s()}")


def test_epoch_end_rewrites_metrics_jsonl_on_rank_0_only(tmp_path, monkeypatch, capsys):
    history = [{"epoch": 1, "overall": 0.5}, {"epoch": 2, "overall": 0.6}]
    for rank, folder in (("1", tmp_path / "rank1"), ("0", tmp_path)):
        monkeypatch.setenv("RANK", rank)
        args = types.SimpleNamespace(out_dir=str(folder), report_to="none")
        progress.Log(args, None, LoopState(running={}), 1).epoch_end(history)
    assert not (tmp_path / "rank1").exists(), "Log.epoch_end on rank 1 must write no file (rank 0 writes)"
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == history, "Log.epoch_end must rewrite metrics.jsonl with every record"
    assert capsys.readouterr().out == f"{history[-1]}\n", "Log.epoch_end prints the last record, on rank 0 only"


# ---------------------------------------------------------------------------- steps.jsonl
def test_a_record_every_n_steps_holds_the_window_losses_the_lr_used_and_the_gradient_norm(setup, tmp_path, spied):
    losses, updates = spied
    run(setup, tmp_path, "--epochs", "1", "--log_every", str(EVERY), "--head_lr", "1e-2")
    got = records(tmp_path)
    assert [r["step"] for r in got] == list(range(EVERY, STEPS + 1, EVERY)), \
        f"minbert.core.progress: --log_every {EVERY} over {STEPS} steps: records at steps {[r['step'] for r in got]}"
    assert len(losses) == len(updates) == STEPS, "fixture: one task batch and one AdamW step per optimizer step"
    for r in got:
        window = losses[r["step"] - EVERY:r["step"]]
        for task in ("sst", "para", "sts"):
            values = [v for t, v in window if t == task]
            if values:
                assert r[f"loss_{task}"] == pytest.approx(sum(values) / len(values), abs=1e-4), \
                    f"step {r['step']}: loss_{task} {r[f'loss_{task}']} is not the mean of its batches {values}"
            else:
                assert f"loss_{task}" not in r, f"step {r['step']}: no {task} batch since the last record, yet {r}"
        lrs, norm = updates[r["step"] - 1]
        assert (r["lr"], r["head_lr"]) == (lrs[0], lrs[-1]), \
            f"step {r['step']}: lr {r['lr']}, head_lr {r['head_lr']}; AdamW stepped with {lrs[0]} and {lrs[-1]}"
        assert r["grad_norm"] == pytest.approx(norm, rel=1e-5), \
            f"step {r['step']}: grad_norm {r['grad_norm']}, the gradients AdamW applied have norm {norm}"
        assert r["examples_per_s"] == 4.0 and r["elapsed_s"] == r["step"] and r["epoch"] == 1, \
            f"step {r['step']}: 4 examples per 1 s batch: expected 4.0 ex/s and {r['step']} s elapsed, got {r}"


def test_a_run_resumed_after_a_ctrl_c_in_its_evaluation_records_true_speed_and_time(setup, tmp_path, spied,
                                                                                     monkeypatch):
    """The epoch's 18 steps all ran before the Ctrl-C (in the dev evaluation after them), so the resumed session
    trains none of them: metrics.jsonl recorded 0.0 ex/s for that epoch, and elapsed_s restarted at 0."""
    full = run(setup, tmp_path / "full", "--epochs", "2")
    with monkeypatch.context() as m:
        signal_on_call(m, train_multitask, "run_heads", 1)   # epoch 1's dev evaluation
        with pytest.raises(SystemExit):
            run(setup, tmp_path / "cut", "--epochs", "2")
    resumed = run(setup, tmp_path / "cut", "--epochs", "2", "--resume",
                  str(tmp_path / "cut" / "run" / "interrupted.pt"))
    want = [(r["train_examples_per_s"], r["elapsed_s"]) for r in full]
    assert want == [(4.0, 18.0), (4.0, 36.0)], f"fixture: 72 examples in 18 fake seconds per epoch, got {want}"
    got = [(r["train_examples_per_s"], r["elapsed_s"]) for r in resumed]
    assert got == want, (f"train_multitask.py resumed from a Ctrl-C in epoch 1's evaluation: metrics.jsonl's "
                         f"(train_examples_per_s, elapsed_s) are {got}; the uninterrupted run's {want}")


def fake_tensorboard(monkeypatch):
    """A stand-in for the optional tensorboard package and torch.utils.tensorboard's SummaryWriter."""
    writers = []

    class SummaryWriter:
        def __init__(self, log_dir, purge_step=None):
            self.log_dir, self.purge_step, self.scalars = log_dir, purge_step, []
            writers.append(self)

        def add_scalar(self, tag, value, step):
            self.scalars.append((tag, value, step))

        def flush(self):
            pass

    package = types.ModuleType("tensorboard")
    package.__spec__ = importlib.machinery.ModuleSpec("tensorboard", None)
    monkeypatch.setitem(sys.modules, "tensorboard", package)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=SummaryWriter))
    return writers


def crash_at_batch(monkeypatch, n):
    """train_multitask's n-th task loss raises, as a crash would."""
    real_loss, calls = train_multitask.task_loss, {"n": 0}

    def crash(*a):
        calls["n"] += 1
        if calls["n"] == n:
            raise RuntimeError(f"a crash at batch {n}")
        return real_loss(*a)

    monkeypatch.setattr(train_multitask, "task_loss", crash)


def test_a_run_resumed_from_last_pt_after_a_crash_writes_the_uninterrupted_runs_records(setup, tmp_path, spied,
                                                                                        monkeypatch):
    """A crash in epoch 2 (step 25) leaves last.pt of epoch 1 and records up to step 24; the resume redoes steps
    19-24, drops their old records, and ends with the uninterrupted run's steps.jsonl, byte for byte (fake clock).
    TensorBoard gets the same numbers, dev scores at each epoch's last step, and purges from step 19 on."""
    writers = fake_tensorboard(monkeypatch)
    flags = ("--epochs", "2", "--log_every", str(EVERY), "--report_to", "tensorboard")
    run(setup, tmp_path / "full", *flags)
    with monkeypatch.context() as m:
        crash_at_batch(m, 25)
        with pytest.raises(RuntimeError):
            run(setup, tmp_path / "cut", *flags)
    assert [r["step"] for r in records(tmp_path / "cut")] == [4, 8, 12, 16, 20, 24], "fixture: records before the crash"
    run(setup, tmp_path / "cut", *flags, "--resume", str(tmp_path / "cut" / "run" / "last.pt"))
    full, cut = ((tmp_path / name / "run" / "steps.jsonl").read_text() for name in ("full", "cut"))
    assert cut == full, \
        f"minbert.core.progress: the resumed run's steps.jsonl\n{cut}\nis not the uninterrupted run's\n{full}"

    full_writer, _, resumed_writer = writers
    want = [(f"train/{k}", v, r["step"]) for r in records(tmp_path / "full") for k, v in r.items()
            if k not in ("step", "epoch")]
    metrics = [json.loads(x) for x in (tmp_path / "full" / "run" / "metrics.jsonl").read_text().splitlines()]
    dev = [(f"dev/{k}", metrics[e][k], STEPS * (e + 1)) for e in range(2) for k in ("sst_acc", "para_acc",
                                                                                    "sts_pearson", "overall")]
    assert sorted(full_writer.scalars) == sorted(want + dev), \
        f"--report_to tensorboard: the scalars {full_writer.scalars} are not steps.jsonl's and metrics.jsonl's"
    assert full_writer.log_dir == str(tmp_path / "full" / "run" / "tensorboard") and full_writer.purge_step is None
    assert resumed_writer.purge_step == STEPS + 1, (f"a resume from last.pt (step {STEPS}) must purge TensorBoard "
                                                   f"events from step {STEPS + 1}, got {resumed_writer.purge_step}")


@pytest.mark.parametrize("checkpoint", ["last.pt", "interrupted.pt"])
def test_a_resume_from_a_step_that_has_a_record_keeps_exactly_one_record_per_step(setup, tmp_path, spied,
                                                                                 monkeypatch, checkpoint):
    """--log_every 6: epoch 1's last step, 18, has a record, and so does step 12. last.pt is saved at step 18 (a
    crash at batch 25 leaves records 6-24); interrupted.pt at step 12 (a Ctrl-C in step 12's batch: the step
    finishes, writes its record, and the run stops before step 13). The resume must keep the checkpoint step's
    record, drop only the redone steps' records, and so end with steps 6, 12, ..., 36, each once."""
    flags = ("--epochs", "2", "--log_every", "6")
    with monkeypatch.context() as m:
        if checkpoint == "last.pt":
            crash_at_batch(m, 25)
        else:
            signal_on_call(m, train_multitask, "task_loss", 12)
        with pytest.raises((RuntimeError, SystemExit)):
            run(setup, tmp_path, *flags)
    before = [r["step"] for r in records(tmp_path)]
    run(setup, tmp_path, *flags, "--resume", str(tmp_path / "run" / checkpoint))
    steps = [r["step"] for r in records(tmp_path)]
    assert steps == [6, 12, 18, 24, 30, 36], \
        (f"minbert.core.progress.Log.load_state_dict: resumed from {checkpoint} (records before it: {before}), "
         f"steps.jsonl holds the steps {steps}; each of 6, 12, ..., 36 must be there exactly once")


def test_report_to_tensorboard_without_the_package_is_one_line_naming_pip_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)   # as if not installed
    with pytest.raises(SystemExit) as stop:
        train_multitask.parse_args(["--report_to", "tensorboard"])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and "--report_to" in err[0] and "pip install tensorboard" in err[0], \
        f"--report_to tensorboard without the tensorboard package must stop at parse time, naming the fix: {err}"
