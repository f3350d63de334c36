"""A run's folder (minbert/run/run_dir.py), through both real scripts on tiny self-made data.

Oracles: (c) properties a user can check by looking at the disk — two runs with different --out_dir leave both
sets of prediction files intact; a second run into a used folder is refused and changes nothing, --overwrite
allows it; after a resume from interrupted.pt that file is gone; a finished run holds only the best model
folder, best.pt, outputs, metrics, plots and predictions (no resume state unless --keep_resume_state); a run
that fails before training leaves no folder; lowercase GLUE task names are accepted.
"""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

import train_mml
import train_multitask
from minbert.core.errors import UserError
from minbert.run import run_dir
from test_train_mml import setup as mml_setup  # noqa: F401  (fixture)
from test_train_multitask import setup, signal_on_call  # noqa: F401  (fixture)

# what a finished train_multitask.py run may leave (docs/outputs.md) and what it must leave
FINISHED_MAY_HOLD = {"best.pt", "model", "outputs.pt", "metrics.jsonl", "curves.png", "predictions", "stage.json",
                     "run.json"}
FINISHED_MUST_HOLD = {"best.pt", "model", "outputs.pt", "metrics.jsonl", "predictions"}
ROOT = Path(__file__).resolve().parents[2]


def run(setup, out_dir, *extra):
    data, model = setup
    return train_multitask.main(["--model", str(model), "--data_dir", str(data), "--out_dir", str(out_dir),
                                 "--epochs", "2", "--batch_size", "4", "--lr", "1e-3", "--hidden_dropout_prob", "0.1",
                                 "--seed", "3", "--device", "cpu", "--amp", "off", *extra])


def prediction_lines(folder):
    return {p.name: len(p.read_text().splitlines()) for p in sorted((folder / "predictions").glob("*.csv"))}


def test_two_runs_with_different_out_dirs_keep_both_prediction_sets(setup, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # the old default, ./predictions, would land here
    run(setup, tmp_path / "full")
    full = prediction_lines(tmp_path / "full")
    run(setup, tmp_path / "smoke", "--limit", "8", "--epochs", "1")
    assert len(full) == 6 and set(full.values()) == {25}, f"the full run must write six 24-row files, got {full}"
    assert prediction_lines(tmp_path / "full") == full, \
        "a second run with another --out_dir overwrote the first run's prediction files"
    smoke = prediction_lines(tmp_path / "smoke")
    assert len(smoke) == 6 and set(smoke.values()) == {9}, f"the --limit 8 run must write its own files, got {smoke}"
    assert not (tmp_path / "predictions").exists(), "default prediction paths must be under --out_dir"


def test_second_run_into_a_used_folder_is_refused_and_overwrite_allows_it(setup, tmp_path):
    run(setup, tmp_path / "a", "--epochs", "1")
    before = {p: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    with pytest.raises(UserError, match="already holds") as refused:
        run(setup, tmp_path / "a", "--epochs", "1", "--limit", "8")
    assert "--overwrite" in str(refused.value), f"the refusal must say how to go on: {refused.value}"
    after = {p: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    assert after == before, "a refused run must change nothing in the folder"
    run(setup, tmp_path / "a", "--epochs", "1", "--limit", "8", "--overwrite")
    assert set(prediction_lines(tmp_path / "a").values()) == {9}, "--overwrite must let the new run write its files"


def test_an_existing_explicit_prediction_file_is_refused_unless_overwrite(setup, tmp_path):
    mine = tmp_path / "mine" / "sst-dev-output.csv"
    mine.parent.mkdir()
    mine.write_text("my best submission\n")
    with pytest.raises(UserError, match="already exists"):
        run(setup, tmp_path / "b", "--epochs", "1", "--sst_dev_out", str(mine))
    assert mine.read_text() == "my best submission\n", "a refused run must not touch the user's file"
    assert not (tmp_path / "b").exists(), "a refused run must leave no folder behind"
    run(setup, tmp_path / "b", "--epochs", "1", "--sst_dev_out", str(mine), "--overwrite")
    assert mine.read_text().startswith("id \t Predicted_Sentiment"), "--overwrite must write the file"


def test_resume_removes_interrupted_pt_and_a_finished_run_is_lean(setup, tmp_path, monkeypatch, capsys):
    out = tmp_path / "cut"
    signal_on_call(monkeypatch, train_multitask, "task_loss", 25)   # a Ctrl-C during epoch 2 (18 steps per epoch)
    with pytest.raises(SystemExit):
        run(setup, out)
    assert (out / "interrupted.pt").is_file() and (out / "last.pt").is_file(), "the cut run must save both"
    monkeypatch.undo()
    from minbert.run import checkpoint
    saved, real = [], checkpoint.save_last

    def save_last(*a, **k):   # record, after each last.pt, whether interrupted.pt is still there
        real(*a, **k)
        saved.append((out / "interrupted.pt").exists())

    monkeypatch.setattr(checkpoint, "save_last", save_last)
    run(setup, out, "--resume", str(out / "interrupted.pt"))
    assert saved and saved[0] is False, "interrupted.pt must be gone as soon as the resumed run has saved last.pt"
    held = {p.name for p in out.iterdir()}
    assert FINISHED_MUST_HOLD <= held <= FINISHED_MAY_HOLD, \
        f"a finished run must hold only {sorted(FINISHED_MAY_HOLD)} (no resume state), got {sorted(held)}"
    text = capsys.readouterr().out
    assert f"run folder {out}" in text and "MB" in text, "the end of the run must print the folder and its size"


def test_keep_resume_state_keeps_last_pt(setup, tmp_path):
    run(setup, tmp_path / "k", "--epochs", "1", "--keep_resume_state")
    assert (tmp_path / "k" / "last.pt").is_file(), "--keep_resume_state must keep last.pt"


def test_a_run_that_fails_before_training_leaves_no_folder(setup, tmp_path):
    with pytest.raises(UserError):
        run(setup, tmp_path / "typo", "--model", str(tmp_path / "no-such-model"))
    assert not (tmp_path / "typo").exists(), "a wrong --model must not leave an empty run folder"
    (tmp_path / "mine").mkdir()   # a folder the user made stays, even empty
    with pytest.raises(UserError):
        run(setup, tmp_path / "mine", "--model", str(tmp_path / "no-such-model"))
    assert (tmp_path / "mine").is_dir(), "a folder the user made must not be removed"
    assert list((tmp_path / "mine").iterdir()) == [], "a failed run must take back what it put in the user's folder"


def test_a_run_killed_before_training_can_be_started_again_with_the_same_command(setup, tmp_path):
    """A run killed by SIGKILL during its setup (no __exit__, no checkpoint) leaves run.json, stage.json and an empty
    predictions/ folder. Rerunning the same command must start it (nothing was trained there), not refuse the folder
    as another run's: the study runner reruns a cut run this way."""
    cut = tmp_path / "cut"
    (cut / "predictions").mkdir(parents=True)
    (cut / "run.json").write_text('{"script": "train_multitask.py", "started": "2026-01-01T00:00:00", '
                                  '"status": "running"}')
    (cut / "stage.json").write_text("{}")
    run(setup, cut, "--epochs", "1")
    assert (cut / "metrics.jsonl").is_file(), "the rerun of a run killed before training should have trained"


def test_mml_run_says_where_its_outputs_went_and_drops_its_resume_state(mml_setup, tmp_path, capsys):
    glue, model = mml_setup
    out = tmp_path / "mml"
    train_mml.main(["--task", "rte", "--method", "bert", "--model", str(model), "--glue_dir", str(glue),
                    "--out_dir", str(out), "--epochs", "1", "--batch_size", "8", "--device", "cpu", "--amp", "off"])
    assert not (out / "last.pt").exists(), "a finished train_mml.py run must drop last.pt"
    assert (out / "model").is_dir() and (out / "best.pt").is_file() and (out / "metrics.jsonl").is_file()
    assert f"run folder {out}" in capsys.readouterr().out, "train_mml.py must print where its outputs went"


def test_lowercase_task_names_are_accepted(mml_setup):
    args = train_mml.parse_args(["--task", "rte", "--eval_tasks", "qnli,mnli", "--model", "x"])
    assert args.task == "RTE" and args.eval_tasks == ["QNLI", "MNLI"], \
        f"train_mml.py --task rte must mean RTE (Hugging Face run_glue users type lowercase), got {args.task}"


def sha256s(folder):
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_predict_only_on_new_sentences_never_replaces_the_runs_predictions(setup, tmp_path, capsys):
    """The documented `--predict_only --resume RUN/best.pt --sst_test my-sst.csv` once replaced the run's
    predictions/sst-test-output.csv (2,210 test predictions became 3), status 0, no warning."""
    out = tmp_path / "run"
    run(setup, out, "--epochs", "1")
    before = sha256s(out)
    mine = tmp_path / "my-sst.csv"
    mine.write_text("\tid\tsentence\n0\tm0\tA gorgeous, witty film.\n1\tm1\tDull.\n2\tm2\tIt is a movie.\n")
    capsys.readouterr()
    run(setup, out, "--epochs", "1", "--predict_only", "--resume", str(out / "best.pt"), "--sst_test", str(mine))
    after = sha256s(out)
    changed = sorted(name for name, digest in before.items() if after.get(name) != digest and name != "run.json")
    assert not changed, f"minbert.run.run_dir: --predict_only changed the run's own files {changed} (sha256 differs)"
    new = out / "predictions-2" / "sst-test-output.csv"
    assert new.is_file() and len(new.read_text().splitlines()) == 4, \
        f"--predict_only must write its 3 predictions to a new folder, {new.parent}"
    assert str(out / "predictions-2") in capsys.readouterr().out, "it must say where the new predictions went"


def test_predict_only_refuses_an_existing_explicit_prediction_file(setup, tmp_path):
    out = tmp_path / "run"
    run(setup, out, "--epochs", "1", "--sst_test_out", str(tmp_path / "sub.csv"))
    before = (tmp_path / "sub.csv").read_bytes()
    with pytest.raises(UserError, match="--sst_test_out") as refused:
        run(setup, out, "--epochs", "1", "--sst_test_out", str(tmp_path / "sub.csv"), "--predict_only", "--resume",
            str(out / "best.pt"))
    assert "--overwrite" in str(refused.value), f"the refusal must name the way on: {refused.value}"
    assert (tmp_path / "sub.csv").read_bytes() == before, "a refused --predict_only must not touch the file"


def test_mml_predict_only_keeps_the_runs_cross_dataset_scores(mml_setup, tmp_path):
    glue, model = mml_setup
    argv = ["--task", "RTE", "--method", "bert", "--model", str(model), "--glue_dir", str(glue), "--out_dir",
            str(tmp_path), "--epochs", "1", "--batch_size", "8", "--device", "cpu", "--amp", "off"]
    train_mml.main(argv + ["--eval_tasks", "QNLI"])
    before = sha256s(tmp_path)
    train_mml.main(argv + ["--eval_tasks", "MNLI", "--predict_only", "--resume", str(tmp_path / "best.pt")])
    after = sha256s(tmp_path)
    changed = sorted(name for name, digest in before.items() if after.get(name) != digest and name != "run.json")
    assert not changed, f"train_mml.py --predict_only changed the run's own files {changed}"
    assert "MNLI" in (tmp_path / "cross_dataset-2.json").read_text(), \
        "train_mml.py --predict_only must write its scores beside the run's, to cross_dataset-2.json"


def test_predict_only_again_goes_to_a_new_folder_and_leaves_run_json_as_it_was(setup, tmp_path):
    """A second --predict_only on one run writes to predictions-3, never over predictions-2; neither rewrites the
    run's run.json (it once lost the training's end time and status)."""
    out = tmp_path / "run"
    run(setup, out, "--epochs", "1")
    marker = (out / "run.json").read_bytes()
    run(setup, out, "--epochs", "1", "--predict_only", "--resume", str(out))
    first = sha256s(out / "predictions-2")
    run(setup, out, "--epochs", "1", "--predict_only", "--resume", str(out / "model"))
    assert sha256s(out / "predictions-2") == first, "a second --predict_only changed the first one's predictions"
    assert sha256s(out / "predictions-3") == first, "the second --predict_only must write its own predictions-3"
    assert (out / "run.json").read_bytes() == marker, "--predict_only rewrote the run's run.json"


@pytest.mark.parametrize("inside", ["notes.txt", "predictions/sst-test-output.csv"])
def test_predict_only_refuses_an_explicit_prediction_path_inside_the_run_folder(setup, tmp_path, inside):
    """An explicit --*_out that names a file in the run folder is the user's choice of file: refused, as outside it,
    never moved elsewhere or written over."""
    out = tmp_path / "run"
    run(setup, out, "--epochs", "1")
    target = out / inside
    if not target.exists():
        target.write_text("mine")
    before = sha256s(out)
    with pytest.raises(UserError, match="--sst_dev_out"):
        run(setup, out, "--epochs", "1", "--sst_dev_out", str(target), "--predict_only", "--resume", str(out))
    assert sha256s(out) == before, "a refused --predict_only changed the run folder"


def test_a_second_process_into_a_folder_a_run_is_training_in_is_refused(setup, tmp_path, monkeypatch):
    """The same `--resume` started twice: while the first run trains (here, right after it saved epoch 1's
    last.pt), a second one into its folder is refused and changes nothing; the first finishes as it would have.
    (In one process here: a second RunDir opens the folder anew, and flock refuses it as it refuses another
    process.)"""
    from minbert.run import checkpoint
    folder, second = tmp_path / "a", []
    save_last = checkpoint.save_last

    def save_then_start_another(out_dir, state):
        save_last(out_dir, state)
        if not second:
            files = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
            with pytest.raises(UserError) as refused:
                run(setup, folder, "--resume", str(folder / "last.pt"))
            second.append((refused.value, files == {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}))

    monkeypatch.setattr(checkpoint, "save_last", save_then_start_another)
    run(setup, folder)
    error, unchanged = second[0]
    assert "another process is working in it now" in str(error), \
        f"minbert/run/run_dir.py: a second run into a folder in use must be refused, got: {error}"
    assert unchanged, "minbert/run/run_dir.py: the refused second run changed the first run's files"
    assert FINISHED_MUST_HOLD <= {p.name for p in folder.iterdir()}, "the first run must still finish"


# A second process that holds a run folder as a training run does (RunDir.lock, on the folder) until its stdin closes
HOLD = """import sys, types
from minbert.run.run_dir import RunDir
RunDir(types.SimpleNamespace(out_dir=sys.argv[1]), "train_multitask.py").lock()
print("held", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(run_dir.fcntl is None, reason="no flock where fcntl is missing (Windows): the lock is left out")
def test_an_overwrite_of_a_run_still_training_is_refused_before_anything_is_removed(setup, tmp_path):
    """`--overwrite` into a folder that another process is training in: refused, and every file of the running run
    is still there, byte for byte (a lock taken after the removal would refuse too, with the files already gone)."""
    folder = tmp_path / "a"
    run(setup, folder, "--epochs", "1", "--keep_resume_state")
    before = sha256s(folder)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held", "the holding process did not take the folder's lock"
        with pytest.raises(UserError, match="another process is working in it now"):
            run(setup, folder, "--epochs", "1", "--limit", "8", "--overwrite")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    gone = sorted(set(before) - set(sha256s(folder)))
    changed = sorted(name for name, digest in sha256s(folder).items() if before.get(name) != digest)
    assert not gone and not changed, \
        f"minbert/run/run_dir.py RunDir.claim: --overwrite removed {gone} / changed {changed} of a run still " \
        f"training (take the lock before removing anything)"


# the first processor's block of /proc/cpuinfo (Linux; x86 names its model, family and model number there)
FIRST_CPU = Path("/proc/cpuinfo").read_text().split("\n\n")[0] if Path("/proc/cpuinfo").is_file() else ""


@pytest.mark.skipif("model name" not in FIRST_CPU, reason="no CPU model name, family and number in /proc/cpuinfo")
def test_run_json_records_the_machine_each_session_ran_on(setup, tmp_path):
    """Oracle: /proc/cpuinfo's first processor, read here with a regular expression: run.json names the CPU by its
    name, family and model number (what a page needs to say which machine its times come from)."""
    import json
    import os
    import re
    text = FIRST_CPU
    field = {k: re.search(rf"^{k}\s*:\s*(.*)$", text, re.M) for k in ("model name", "cpu family", "model")}
    run(setup, tmp_path / "r", "--epochs", "1", "--limit", "8")
    session = json.loads((tmp_path / "r" / "run.json").read_text())["sessions"][-1]
    want = {"cpu": field["model name"] and field["model name"][1],
            "cpu_family": field["cpu family"] and int(field["cpu family"][1]),
            "cpu_model": field["model"] and int(field["model"][1]), "cpus": os.cpu_count()}
    got = {k: session.get("machine", {}).get(k) for k in want}
    assert got == want, f"minbert/core/device.py machine(): run.json must record the machine {want}, records {got}"
