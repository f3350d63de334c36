"""The step log (minbert/run/step_log.py): steps.jsonl, its terminal line, --report_to tensorboard, and the clock a
resume continues.

Oracles: (b) the numbers as train_multitask.py made them, recorded by spies outside the code under test: each
task loss as task_loss returned it, the learning rates AdamW held when it stepped, and the gradient norm computed
here in float64 from the gradients AdamW was about to apply. Time is a fake clock that moves 1 s per task batch
(no real timing), so speeds and elapsed times are exact: 4 examples a batch -> 4.0 ex/s. (c) Properties: a run
interrupted (Ctrl-C in its evaluation, or a crash in epoch 2) and resumed records what the uninterrupted run
records, speed and time included.
"""

import importlib.machinery
import json
import sys
import types

import pytest
import torch

import train_multitask
from minbert.adamw import AdamW
from minbert.run import step_log
from conftest import signal_on_call
from test_train_multitask import run, setup  # noqa: F401  (fixture)

EVERY = 4
STEPS = 18   # 72 training examples, batch 4: 18 steps per epoch


@pytest.fixture
def spied(monkeypatch):
    """Fake time (1 s per task batch), and what train_multitask.py made: [(task, loss)], [(lrs, grad norm)] per update."""
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
    monkeypatch.setattr(step_log, "clock", lambda: now[0])
    return losses, updates


def records(folder):
    return [json.loads(line) for line in (folder / "run" / "steps.jsonl").read_text().splitlines()]


def test_a_record_every_n_steps_holds_the_window_losses_the_lr_used_and_the_gradient_norm(setup, tmp_path, spied):
    losses, updates = spied
    run(setup, tmp_path, "--epochs", "1", "--log_every", str(EVERY), "--head_lr", "1e-2")
    got = records(tmp_path)
    assert [r["step"] for r in got] == list(range(EVERY, STEPS + 1, EVERY)), \
        f"minbert.run.step_log: --log_every {EVERY} over {STEPS} steps: records at steps {[r['step'] for r in got]}"
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
    resumed = run(setup, tmp_path / "cut", "--epochs", "2", "--resume", str(tmp_path / "cut" / "run" / "interrupted.pt"))
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


def test_a_run_resumed_from_last_pt_after_a_crash_writes_the_uninterrupted_runs_records(setup, tmp_path, spied,
                                                                                        monkeypatch):
    """A crash in epoch 2 (step 25) leaves last.pt of epoch 1 and records up to step 24; the resume redoes steps
    19-24, drops their old records, and ends with the uninterrupted run's steps.jsonl, byte for byte (fake clock).
    TensorBoard gets the same numbers, dev scores at each epoch's last step, and purges from step 19 on."""
    writers = fake_tensorboard(monkeypatch)
    flags = ("--epochs", "2", "--log_every", str(EVERY), "--report_to", "tensorboard")
    run(setup, tmp_path / "full", *flags)
    real_loss, calls = train_multitask.task_loss, {"n": 0}

    def crash_at_25(*a):
        calls["n"] += 1
        if calls["n"] == 25:
            raise RuntimeError("a crash in epoch 2")
        return real_loss(*a)

    with monkeypatch.context() as m:
        m.setattr(train_multitask, "task_loss", crash_at_25)
        with pytest.raises(RuntimeError):
            run(setup, tmp_path / "cut", *flags)
    assert [r["step"] for r in records(tmp_path / "cut")] == [4, 8, 12, 16, 20, 24], "fixture: records before the crash"
    run(setup, tmp_path / "cut", *flags, "--resume", str(tmp_path / "cut" / "run" / "last.pt"))
    full, cut = ((tmp_path / name / "run" / "steps.jsonl").read_text() for name in ("full", "cut"))
    assert cut == full, f"minbert.run.step_log: the resumed run's steps.jsonl\n{cut}\nis not the uninterrupted run's\n{full}"

    full_writer, _, resumed_writer = writers
    want = [(f"train/{k}", v, r["step"]) for r in records(tmp_path / "full") for k, v in r.items()
            if k not in ("step", "epoch")]
    metrics = [json.loads(x) for x in (tmp_path / "full" / "run" / "metrics.jsonl").read_text().splitlines()]
    dev = [(f"dev/{k}", metrics[e][k], STEPS * (e + 1)) for e in range(2) for k in ("sst_acc", "para_acc",
                                                                                    "sts_pearson", "overall")]
    assert sorted(full_writer.scalars) == sorted(want + dev), \
        f"--report_to tensorboard: the scalars {full_writer.scalars} are not steps.jsonl's and metrics.jsonl's"
    assert full_writer.log_dir == str(tmp_path / "full" / "run" / "tensorboard") and full_writer.purge_step is None
    assert resumed_writer.purge_step == STEPS + 1, \
        f"a resume from last.pt (step {STEPS}) must purge TensorBoard events from step {STEPS + 1}, got {resumed_writer.purge_step}"


def test_report_to_tensorboard_without_the_package_is_one_line_naming_pip_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tensorboard", None)   # as if not installed
    with pytest.raises(SystemExit) as stop:
        train_multitask.parse_args(["--report_to", "tensorboard"])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and "--report_to" in err[0] and "pip install tensorboard" in err[0], \
        f"--report_to tensorboard without the tensorboard package must stop at parse time, naming the fix: {err}"
