"""Ctrl-C and SIGTERM at any moment: the run saves, and `--resume` reproduces the uninterrupted run.

Oracle: (c) a property with an independent reference run. A REAL signal (os.kill of this
process) is delivered deterministically from inside a patched function, in each phase of a
step (forward, backward, optimizer step, scheduler step), during evaluation and during a
checkpoint write. The resumed run must end with exactly the uninterrupted run's dev scores and
byte-identical prediction files. A SIGKILL is imitated by resuming from last.pt alone.
"""

import os
import signal
from types import SimpleNamespace

import pytest
import torch

import train_mml
import train_multitask
from minbert.methods import mml
from minbert.run import checkpoint, run_dir
from minbert.tasks import multitask
from minbert.core.interrupt import Interrupted, StopSignal
from test_train_mml import run as run_mml
from test_train_mml import setup as mml_setup  # noqa: F401  (pytest fixture)
from conftest import signal_on_call
from test_train_multitask import run as run_multitask
from test_train_multitask import setup  # noqa: F401  (pytest fixture)

SCORES = ("sst_acc", "para_acc", "sts_pearson", "overall", "loss_sst", "loss_para", "loss_sts")


@pytest.fixture(scope="module")
def reference(setup, tmp_path_factory):
    """The uninterrupted run: its history and its six prediction files."""
    out = tmp_path_factory.mktemp("reference")
    history = run_multitask(setup, out)
    return history, {p.name: p.read_bytes() for p in (out / "predictions").iterdir()}


PHASES = {   # phase -> (object, attribute, which call gets the signal, only-count-when)
    "forward": (multitask.MultitaskBert, "features", 7, torch.is_grad_enabled),
    "backward": (torch.Tensor, "backward", 7, None),
    "optimizer_step": (train_multitask.AdamW, "step", 7, None),
    "scheduler_step": (torch.optim.lr_scheduler.LambdaLR, "step", 8, None),   # call 1 is the scheduler's own init
    "evaluation": (multitask.MultitaskBert, "forward", 3, torch.is_inference_mode_enabled),
    "checkpoint_write": (checkpoint, "save", 1, None),                        # best.pt of epoch 1
}


@pytest.mark.parametrize("phase", sorted(PHASES))
def test_sigint_in_any_phase_resumes_to_the_uninterrupted_results(setup, reference, tmp_path, monkeypatch, phase):
    owner, name, n, when = PHASES[phase]
    with monkeypatch.context() as m:
        signal_on_call(m, owner, name, n, when=when)
        with pytest.raises(SystemExit) as e:
            run_multitask(setup, tmp_path)
    assert e.value.code == 130, f"train_multitask: a SIGINT during {phase} must exit with status 130, got {e.value.code}"
    saved = tmp_path / "run" / "interrupted.pt"
    assert saved.is_file(), f"train_multitask: a SIGINT during {phase} must leave interrupted.pt"
    history = run_multitask(setup, tmp_path, "--resume", str(saved))
    want, files = reference
    got = [[r[k] for k in SCORES] for r in history]
    assert got == [[r[k] for k in SCORES] for r in want], \
        f"SIGINT during {phase}, then --resume: dev scores per epoch {got} differ from the uninterrupted run's"
    for file, content in files.items():
        assert (tmp_path / "predictions" / file).read_bytes() == content, \
            f"SIGINT during {phase}, then --resume: {file} differs from the uninterrupted run's"


def test_sigterm_saves_like_ctrl_c(setup, reference, tmp_path, monkeypatch):
    with monkeypatch.context() as m:
        signal_on_call(m, train_multitask.AdamW, "step", 20, sig=signal.SIGTERM)   # epoch 2
        with pytest.raises(SystemExit):
            run_multitask(setup, tmp_path)
    history = run_multitask(setup, tmp_path, "--resume", str(tmp_path / "run" / "interrupted.pt"))
    assert history[-1]["overall"] == reference[0][-1]["overall"], "SIGTERM then --resume diverged from the uninterrupted run"


class Killed(BaseException):
    """Stands in for SIGKILL: nothing in the script catches it, so no handler saves anything."""


def test_killed_run_resumes_from_last_pt(setup, reference, tmp_path, monkeypatch):
    real, calls = train_multitask.AdamW.step, {"n": 0}

    def die_in_epoch_2(*a, **k):
        calls["n"] += 1
        if calls["n"] == 25:
            raise Killed
        return real(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(train_multitask.AdamW, "step", die_in_epoch_2)
        with pytest.raises(Killed):
            run_multitask(setup, tmp_path)
    assert not (tmp_path / "run" / "interrupted.pt").exists()
    history = run_multitask(setup, tmp_path, "--resume", str(tmp_path / "run" / "last.pt"))
    want, files = reference
    assert [[r[k] for k in SCORES] for r in history] == [[r[k] for k in SCORES] for r in want], \
        "a run killed in epoch 2 and resumed from last.pt must end with the uninterrupted run's scores"
    metrics = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 2, f"metrics.jsonl must hold one line per epoch after a resume, got {len(metrics)}"
    for file, content in files.items():
        assert (tmp_path / "predictions" / file).read_bytes() == content, f"killed + resumed: {file} differs"


def test_train_mml_sigint_in_optimizer_step_and_evaluation_resumes_exactly(mml_setup, tmp_path, monkeypatch):
    extra = ("--heads", "16", "--eliminate_every", "4", "--min_bandwidth", "0.001")
    full = run_mml(mml_setup, tmp_path / "full", *extra)
    phases = {"optimizer_step": (train_mml.AdamW, "step", 8, None),
              "evaluation": (mml.MultiverseHeads, "predict", 1, None)}
    for phase, (owner, name, n, when) in phases.items():
        with monkeypatch.context() as m:
            signal_on_call(m, owner, name, n, when=when)
            with pytest.raises(SystemExit):
                run_mml(mml_setup, tmp_path / phase, *extra)
        resumed = run_mml(mml_setup, tmp_path / phase, *extra, "--resume", str(tmp_path / phase / "interrupted.pt"))
        strip = [{k: v for k, v in r.items() if k not in ("elapsed_s", "train_examples_per_s")} for r in resumed]
        want = [{k: v for k, v in r.items() if k not in ("elapsed_s", "train_examples_per_s")} for r in full]
        assert strip == want, f"train_mml: SIGINT during {phase}, then --resume: records {strip} differ from {want}"
        assert (tmp_path / phase / "eliminations.jsonl").read_text() == (tmp_path / "full" / "eliminations.jsonl").read_text()


def test_stop_signal_sets_a_flag_while_saving_and_restores_handlers():
    before = signal.getsignal(signal.SIGINT)
    saved = []
    with StopSignal() as stop:
        with pytest.raises(SystemExit):
            with stop.saving("interrupted.pt", saved.append):
                os.kill(os.getpid(), signal.SIGINT)      # mid-step: must not raise here ...
                assert stop.signal == "SIGINT" and saved == [], "the signal only sets the flag the loop reads"
                raise Interrupted(stop.signal)           # ... the loop raises at the step boundary
    assert signal.getsignal(signal.SIGINT) is before, "StopSignal must restore the previous SIGINT handler"


def test_saving_saves_once_and_exits_130(tmp_path):
    saved = []
    with StopSignal() as stop:
        with pytest.raises(SystemExit) as e:
            with stop.saving(tmp_path / "interrupted.pt", saved.append):
                raise Interrupted("SIGINT")
    assert e.value.code == 130 and saved == [tmp_path / "interrupted.pt"], \
        f"StopSignal.saving must call save(path) once and exit 130; saved {saved}, exit {e.value.code}"


def test_second_signal_quits_at_once():
    with StopSignal() as stop:
        with pytest.raises(SystemExit):
            with stop.saving("unused", lambda path: None):
                os.kill(os.getpid(), signal.SIGINT)
                with pytest.raises(KeyboardInterrupt):
                    os.kill(os.getpid(), signal.SIGINT)
                raise Interrupted(stop.signal)


@pytest.mark.parametrize("after_training, then", [
    (lambda stop: train_multitask.write_all_predictions(SimpleNamespace(amp="off"), stop, None, {}, {}, 8, "cpu",
                                                        "runs/x"), "writes them"),
    (lambda stop: train_mml.cross_dataset(SimpleNamespace(eval_tasks=[], task="RTE"), stop, None, None, "runs/x"),
     "scores it")])
def test_a_signal_as_the_predictions_start_exits_130_naming_the_saved_model(after_training, then, capsys):
    """A Ctrl-C during the last evaluation is noticed as the predictions (MML: the scores) start: exit status 130 and
    the command that writes them from the run folder, never a bare Interrupted traceback."""
    with StopSignal() as stop:
        stop.signal = "SIGINT"
        with pytest.raises(SystemExit) as e:
            after_training(stop)
    out = capsys.readouterr().out
    assert e.value.code == 130 and f"the same command plus --predict_only --resume runs/x {then}" in out, \
        f"expected exit 130 and the --predict_only line, got exit {e.value.code}, output {out!r}"


def test_a_signal_during_setup_exits_130_and_leaves_no_run_folder(tmp_path, capsys):
    """Ctrl-C before training (loading data or the model): nothing to save, exit status 130, no folder left behind."""
    args = train_mml.parse_args(["--task", "RTE", "--method", "bert", "--out_dir", str(tmp_path / "run")])

    def experiment(args, stop):
        os.kill(os.getpid(), signal.SIGINT)   # setup is abortable: the handler raises here
    with pytest.raises(SystemExit) as e:
        run_dir.main(args, "train_mml.py", experiment)
    out = capsys.readouterr().out
    assert e.value.code == 130 and "SIGINT: stopped before training started; nothing to save" in out, \
        f"expected exit 130 and the line that nothing was saved, got exit {e.value.code}, output {out!r}"
    assert not (tmp_path / "run").exists(), "a run stopped during setup saved nothing and must leave no folder"


def test_interrupted_study_keeps_finished_runs_and_continues_the_cut_one(mml_setup, tmp_path, monkeypatch):
    """python bench/mml_study.py stopped by Ctrl-C in its second run, then rerun: the first run is
    kept as it is (not retrained), the second continues from its interrupted.pt, and the tables equal
    those of a study that was never interrupted."""
    from bench import mml_study
    glue, model = mml_setup

    def argv(out):
        return ["--tasks", "RTE", "--methods", "bert,mml4", "--seeds", "1", "--model", str(model), "--epochs", "2",
                "--glue_dir", str(glue), "--out_dir", str(out), "--batch_size", "8", "--device", "cpu", "--amp", "off"]

    full = mml_study.main(argv(tmp_path / "full"))
    with monkeypatch.context() as m:   # bert: 2 epochs x 3 steps; the 5th step is mml4's 2nd
        signal_on_call(m, train_mml.AdamW, "step", 8)
        with pytest.raises(SystemExit):
            mml_study.main(argv(tmp_path / "cut"))
    first = tmp_path / "cut" / "RTE" / "bert" / "seed1" / "metrics.jsonl"   # (a finished run keeps no last.pt)
    mtime = first.stat().st_mtime
    assert (tmp_path / "cut" / "RTE" / "mml4" / "seed1" / "interrupted.pt").is_file()
    resumed = mml_study.main(argv(tmp_path / "cut"))
    assert first.stat().st_mtime == mtime, "the finished bert run must be kept, not retrained"
    assert resumed["table1"]["scores"] == full["table1"]["scores"], \
        f"interrupted + rerun study: Table 1 {resumed['table1']['scores']} differs from {full['table1']['scores']}"
