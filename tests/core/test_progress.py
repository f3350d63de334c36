"""The training log (minbert/core/progress.py and the loops of both scripts): progress lines in a log, steps.jsonl,
its printed line, --report_to tensorboard, and the clock a resume continues.

Oracles: (b) the numbers as train_multitask.py made them, recorded by spies outside the code under test: each
task loss as task_loss returned it, the learning rates AdamW held when it stepped, and the gradient norm computed
here in float64 from the gradients AdamW was about to apply. Time is a fake clock that moves 1 s per task batch
(no real timing), so speeds and elapsed times are exact: 4 examples a batch -> 4.0 ex/s; tqdm's clock is faked too
where its lines are counted. (c) Properties: with stdout piped (pytest captures it: not a terminal) a run prints
its lines by the step and time rules, each phase's last line at 100%; a run interrupted (Ctrl-C in its
evaluation, or a crash in epoch 2) and resumed records what the uninterrupted run records, speed and time
included, one record a step.
"""

import importlib.machinery
import json
import math
import re
import sys
import types

import pytest
import torch
import tqdm.std

import train_multitask
from minbert.adamw import AdamW
from minbert.core import progress
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
    monkeypatch.setattr(train_multitask, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    return losses, updates


def records(folder):
    return [json.loads(line) for line in (folder / "run" / "steps.jsonl").read_text().splitlines()]


def bar_lines(text, desc):
    """The progress lines of one bar in a log ("epoch 1/2:  40%|####      | 10/25 [...]"): (percent, n, total)."""
    found = re.findall(rf"^{re.escape(desc)}: +(\d+)%\|[^|]*\| (\d+)/(\d+) ", text, re.M)
    return [tuple(int(x) for x in f) for f in found]


# ---------------------------------------------------------------------------- progress lines
def test_piped_run_prints_a_step_record_line_every_n_steps_and_each_epochs_start_and_end(setup, tmp_path, capsys):
    run(setup, tmp_path, "--epochs", "2", "--log_every", "7", "--head_lr", "1e-2", "--log_seconds", "1e9")
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("step ")]
    assert [int(r.split()[1]) for r in lines] == [7, 14, 21, 28, 35], \
        f"with --log_every 7, expected a line at steps 7, 14, ..., 35 of 36, got {lines}"
    for part in ("(epoch 2)", "| loss ", "sst ", "| lr ", "heads", "| grad norm ", " ex/s"):
        assert part in lines[-1], f"a step record line must show {part!r}: {lines[-1]!r}"
    for epoch in (1, 2):   # no time rule here (--log_seconds 1e9): the bar's first and last lines alone
        shown = bar_lines(out, f"epoch {epoch}/2")
        assert shown == [(0, 0, STEPS), (100, STEPS, STEPS)], \
            f"with stdout piped, epoch {epoch} must show a line as it starts and one at 100%; got {shown}"


def fake_tqdm_clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: now[0])
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    return now


def test_time_rule_prints_a_line_at_the_first_step_end_after_log_seconds(monkeypatch, capsys):
    now = fake_tqdm_clock(monkeypatch)
    for _ in progress.bar(range(10), "epoch 1/1", 10, seconds=25):
        now[0] += 10.0   # a 10 s step
    shown = bar_lines(capsys.readouterr().out, "epoch 1/1")
    assert [n for _, n, _ in shown] == [0, 3, 6, 9, 10], \
        f"10 s steps, --log_seconds 25: lines at the start, after steps 3, 6, 9 (30 s later each) and 10; got {shown}"


def test_after_fast_steps_a_slow_one_still_brings_a_line_within_log_seconds(monkeypatch, capsys):
    """tqdm's own default learns how many steps pass between lines; after 300 fast steps (0.1 s) it would wait for
    300 more, at 60 s a step 5 h. The bar must look at the clock after every step instead."""
    now = fake_tqdm_clock(monkeypatch)
    for i in progress.bar(range(303), "epoch 1/1", 303, seconds=30):
        now[0] += 0.1 if i < 300 else 60.0
    shown = [n for _, n, _ in bar_lines(capsys.readouterr().out, "epoch 1/1")]
    assert shown == [0, 300, 301, 302, 303], \
        f"the line at 30 s (step 300), then one after each 60 s step, the last one once; got {shown}"


@pytest.mark.parametrize("terminal", [False, True])
def test_a_phase_in_a_log_ends_with_its_100_percent_line(monkeypatch, capsys, terminal):
    """Evaluation, predictions and predict's scoring (progress.phase): in a log the last line is the phase's end."""
    fake_tqdm_clock(monkeypatch)
    monkeypatch.setattr(progress, "on_terminal", lambda: terminal)
    assert list(progress.phase(iter(range(12)), "predict dev sst, para, sts", 12)) == list(range(12))
    out = capsys.readouterr().out
    if terminal:   # the bar is drawn on stderr (tqdm's), and a line names the phase first
        assert out == "predict dev sst, para, sts: 12 batches\n", out
        return
    shown = bar_lines(out, "predict dev sst, para, sts")
    assert shown[0] == (0, 0, 12) and shown[-1] == (100, 12, 12), \
        f"a phase in a log must start with a 0% line and end with its 100% line; got {shown}"


def test_a_runs_log_shows_every_phase_to_its_100_percent_line(setup, tmp_path, capsys):
    """Training, evaluation and the test set's predictions in a run; the dev set's predictions in --predict_only
    (a run writes those from its evaluation's outputs, test_train_multitask.py)."""
    run(setup, tmp_path, "--epochs", "1")
    run(setup, tmp_path, "--epochs", "1", "--predict_only", "--resume", str(tmp_path / "run"), "--overwrite")
    out = capsys.readouterr().out
    for desc in ("epoch 1/1", "eval sst, para, sts", "predict test sst, para, sts", "predict dev sst, para, sts"):
        shown = bar_lines(out, desc)
        assert shown and shown[0][0] == 0 and shown[-1][0] == 100 and shown[-1][1] == shown[-1][2], \
            f"train_multitask.py's log: the {desc!r} phase must start at 0% and end with its 100% line: {shown}"


def test_epoch_end_rewrites_metrics_jsonl_on_rank_0_only(tmp_path, monkeypatch, capsys):
    history = [{"epoch": 1, "overall": 0.5}, {"epoch": 2, "overall": 0.6}]
    for rank, folder in (("1", tmp_path / "rank1"), ("0", tmp_path)):
        monkeypatch.setenv("RANK", rank)
        progress.epoch_end(folder, history, None, 36)
    assert not (tmp_path / "rank1").exists(), "progress.epoch_end on rank 1 must write no file (rank 0 writes)"
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == history, "progress.epoch_end must rewrite metrics.jsonl with every record"
    assert capsys.readouterr().out == f"{history[-1]}\n", "progress.epoch_end prints the last record, on rank 0 only"


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
        (f"minbert.core.progress.start: resumed from {checkpoint} (records before it: {before}), "
         f"steps.jsonl holds the steps {steps}; each of 6, 12, ..., 36 must be there exactly once")


def test_report_to_tensorboard_without_the_package_is_one_line_naming_pip_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)   # as if not installed
    with pytest.raises(SystemExit) as stop:
        train_multitask.parse_args(["--report_to", "tensorboard"])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and "--report_to" in err[0] and "pip install tensorboard" in err[0], \
        f"--report_to tensorboard without the tensorboard package must stop at parse time, naming the fix: {err}"
