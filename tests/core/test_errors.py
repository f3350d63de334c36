"""Every mistake a user can make with the scripts ends in one clear message, before any work.

Oracle: (c) a property per failure class: the command exits non-zero, prints no traceback, and
its message names the flag, the file (with line) or the checkpoint, and what was expected. The
scripts are run through `minbert.core.errors.cli`, exactly as `python train_*.py` runs them; some
probes run as real subprocesses to check that no traceback reaches the terminal: an unwritable --out_dir
(a read-only folder, a folder inside one, /proc) as a user who meets file modes (root drops
CAP_DAC_OVERRIDE), and a disk that refuses the first checkpoint (a file-size limit). A checkpoint that is
cut short, foreign or not a checkpoint at all is a message of at most 3 lines without torch's advice.
"""

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import meet_file_modes
import torch

import train_mml
import train_multitask
from minbert.core.errors import cli
from test_train_mml import run as run_mml
from test_train_mml import setup as mml_setup  # noqa: F401  (pytest fixture)
from test_train_multitask import run as run_multitask
from test_train_multitask import setup  # noqa: F401  (pytest fixture)

ROOT = Path(__file__).resolve().parents[2]


def fails(capsys, main, argv, *expected):
    """Run main through cli; assert exit status != 0, no traceback, and every expected text in the message."""
    with pytest.raises(SystemExit) as e:
        cli(main, argv)
    out = capsys.readouterr()
    text = out.out + out.err
    assert e.value.code not in (0, None), f"{argv}: expected a failure, got exit status {e.value.code}"
    assert "Traceback" not in text, f"{argv}: printed a traceback instead of a message:\n{text[-2000:]}"
    for want in expected:
        assert want in text, f"{argv}: the message should mention {want!r}; got:\n{text[-1500:]}"
    return text


def multitask_args(setup, tmp_path, *extra):
    data, model = setup
    args = ["--model", str(model), "--data_dir", str(data), "--out_dir", str(tmp_path / "run"), "--epochs", "1",
            "--batch_size", "4", "--device", "cpu", "--amp", "off"]
    for task in ("sst", "para", "sts"):
        for split in ("dev", "test"):
            args += [f"--{task}_{split}_out", str(tmp_path / "pred" / f"{task}-{split}.csv")]
    return args + list(extra)


@pytest.mark.parametrize("flag, value, expected", [
    ("--batch_size", "0", "expected an integer >= 1"),
    ("--epochs", "0", "expected an integer >= 1"),
    ("--limit", "-5", "expected an integer >= 0"),
    ("--lr", "-1", "expected a number > 0"),
    ("--lr", "nan", "expected a finite number"),
    ("--max_seq_len", "3", "expected a number in [5, 512]"),
    ("--hidden_dropout_prob", "1.5", "expected a number in [0.0, 0.99]"),
    ("--warmup", "2", "expected a number in [0.0, 1.0]"),
    ("--grad_accum", "0", "expected an integer >= 1"),
    ("--seed", "abc", "invalid int value"),
])
def test_train_multitask_range_checks_numeric_flags_at_parse_time(setup, tmp_path, capsys, flag, value, expected):
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, flag, value), flag, expected)
    assert not (tmp_path / "run").exists(), f"{flag} {value}: nothing may be written before the flags are checked"


@pytest.mark.parametrize("flag, value, expected", [
    ("--batch_size", "0", "expected an integer >= 1"),
    ("--epochs", "-1", "expected an integer >= 1"),
    ("--lr", "0", "expected a number > 0"),
    ("--heads", "0", "expected an integer >= 1"),
    ("--eliminate_every", "0", "expected an integer >= 1"),
])
def test_train_mml_range_checks_numeric_flags_at_parse_time(mml_setup, tmp_path, capsys, flag, value, expected):
    glue, model = mml_setup
    argv = ["--task", "RTE", "--model", str(model), "--glue_dir", str(glue), "--out_dir", str(tmp_path), flag, value]
    fails(capsys, train_mml.main, argv, flag, expected)


@pytest.mark.parametrize("extra, expected", [
    (["--pals", "--pals_size", "10", "--pals_heads", "3"], ["--pals_size 10", "divisible by --pals_heads 3"]),
    (["--predict_only"], ["--predict_only needs --resume"]),
    (["--grad_compromise", "4", "--surgery", "pcgrad"], ["--grad_compromise", "drop --surgery"]),
    (["--r3f", "1", "--para_head", "cosine"], ["cross-encoder"]),
    (["--device", "gpu"], ["--device gpu", "expected auto, cpu, cuda"]),
])
def test_incompatible_or_impossible_flags_are_refused(setup, tmp_path, capsys, extra, expected):
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, *extra), *expected)


def test_header_only_data_file_names_the_file(setup, tmp_path, capsys):
    bad = tmp_path / "empty.csv"
    bad.write_text("\tid\tsentence\tsentiment\n")
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--sst_train", str(bad)), str(bad), "no data rows")


def test_binary_data_file_names_the_file(setup, tmp_path, capsys):
    bad = tmp_path / "binary.csv"
    bad.write_bytes(b"\tid\tsentence\tsentiment\n" + bytes(range(128, 256)) * 4)
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--sst_dev", str(bad)), str(bad), "not UTF-8")


def test_missing_data_file_says_how_to_get_it(setup, tmp_path, capsys):
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--sts_train", str(tmp_path / "nope.csv")),
          "nope.csv: file not found", "python -m minbert download cs224n")


def test_truncated_weights_name_the_file(setup, tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    for f in Path(setup[1]).iterdir():
        (model / f.name).write_bytes(f.read_bytes())
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    argv = multitask_args(setup, tmp_path, "--model", str(model))
    fails(capsys, train_multitask.main, argv, str(weights), "truncated or not a checkpoint")


def test_malformed_config_json_names_file_and_line(setup, tmp_path, capsys):
    model = tmp_path / "model"
    model.mkdir()
    for f in Path(setup[1]).iterdir():
        (model / f.name).write_bytes(f.read_bytes())
    (model / "config.json").write_text('{"hidden_size": 32,\n "oops"\n}')
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--model", str(model)),
          "config.json:3", "not valid JSON")


def test_unwritable_out_dir_fails_fast_before_the_model_loads(setup, tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    monkeypatch.setattr(train_multitask.BertModel, "from_pretrained",
                        lambda *a, **k: pytest.fail("the model was loaded before --out_dir was checked"))
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--out_dir", str(blocker / "run")),
          "--out_dir", "cannot write there")


def test_unwritable_prediction_path_fails_fast_before_the_model_loads(setup, tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    monkeypatch.setattr(train_multitask.BertModel, "from_pretrained",
                        lambda *a, **k: pytest.fail("the model was loaded before the output paths were checked"))
    fails(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--sts_test_out", str(blocker / "sts.csv")),
          "--sts_test_out", "cannot write there")


def test_resume_from_best_pt_is_refused_with_what_to_do_instead(setup, tmp_path, capsys):
    run_multitask(setup, tmp_path, "--epochs", "1")
    best = str(tmp_path / "run" / "best.pt")
    argv = multitask_args(setup, tmp_path, "--resume", best)
    fails(capsys, train_multitask.main, argv, "holds only a model's weights", "last.pt", "--predict_only --resume")


def test_resume_with_changed_method_flags_is_refused_with_a_diff(setup, tmp_path, capsys):
    run_multitask(setup, tmp_path, "--epochs", "1", "--keep_resume_state")
    argv = multitask_args(setup, tmp_path, "--resume", str(tmp_path / "run" / "last.pt"), "--smart", "1")
    fails(capsys, train_multitask.main, argv, "--smart: checkpoint 0.0, this command 1.0")


def short_failure(capsys, main, argv, *expected):
    """fails(...), and the message is at most 3 lines with no torch advice (weights_only=False runs code)."""
    text = fails(capsys, main, argv, *expected)
    err = text.split("error: ", 1)[-1]
    assert len(err.strip().splitlines()) <= 3, f"{argv}: expected a message of at most 3 lines, got:\n{err}"
    assert "weights_only" not in err, f"{argv}: the message must not pass on torch's advice:\n{err}"
    return err


def test_resume_with_a_foreign_file_is_refused(setup, tmp_path, capsys):
    junk = tmp_path / "junk.pt"
    junk.write_text("not a checkpoint")
    short_failure(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--resume", str(junk)),
                  "junk.pt: not a readable minbert checkpoint", "not a file that torch.save wrote")


def test_resume_from_a_truncated_last_pt_is_a_short_message_and_run_json_not_resumable(setup, tmp_path, capsys):
    """A copy cut short: the message says so in <= 3 lines, and run.json does not call the folder resumable
    (its only resume state is the broken file) nor keeps an empty predictions/."""
    out = tmp_path / "run"
    argv = multitask_args(setup, tmp_path, "--keep_resume_state", "--epochs", "1")
    cli(train_multitask.main, argv)
    last = out / "last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    (out / "predictions").mkdir(exist_ok=True)
    capsys.readouterr()
    short_failure(capsys, train_multitask.main, argv + ["--resume", str(last)], "last.pt", "cut short")
    status = json.loads((out / "run.json").read_text())["status"]
    assert status == "failed", f"minbert.run.run_dir: run.json must not claim a resumable state; status {status!r}"
    assert not (out / "predictions").exists(), "minbert.run.run_dir: a failed run must not leave an empty predictions/"


def test_resume_from_another_scripts_checkpoint_names_the_foreign_flags(setup, mml_setup, tmp_path, capsys):
    run_mml(mml_setup, tmp_path / "mml", "--epochs", "1", "--method", "bert")
    argv = multitask_args(setup, tmp_path, "--resume", str(tmp_path / "mml" / "last.pt"))
    short_failure(capsys, train_multitask.main, argv, "written by another script", "has no flag --")
    argv = multitask_args(setup, tmp_path, "--resume", str(tmp_path / "mml"), "--predict_only")
    short_failure(capsys, train_multitask.main, argv, "a train_mml.py run", "python -m minbert predict")


def test_resume_from_a_weights_file_without_a_model_key_is_refused(setup, tmp_path, capsys):
    weights = tmp_path / "pytorch_model.bin"
    torch.save({"bert.embeddings.word_embeddings.weight": torch.zeros(2, 2)}, weights)
    short_failure(capsys, train_multitask.main, multitask_args(setup, tmp_path, "--resume", str(weights)),
                  "not a checkpoint written by train_multitask.py", "--model")


def test_predict_only_rewrites_predictions_without_training(setup, tmp_path, monkeypatch):
    run_multitask(setup, tmp_path, "--epochs", "1")
    before = {p.name: p.read_bytes() for p in (tmp_path / "predictions").iterdir()}
    for p in (tmp_path / "predictions").iterdir():
        p.unlink()
    monkeypatch.setattr(train_multitask.AdamW, "step", lambda *a, **k: pytest.fail("--predict_only must not train"))
    run_multitask(setup, tmp_path, "--epochs", "1", "--predict_only", "--resume", str(tmp_path / "run" / "best.pt"))
    after = {p.name: p.read_bytes() for p in (tmp_path / "predictions").iterdir()}
    assert after == before, "--predict_only --resume best.pt must write the same six prediction files"


def test_failed_prediction_write_says_how_to_write_them_again(setup, tmp_path, capsys, monkeypatch):
    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(train_multitask.data, "write_predictions", disk_full)
    text = fails(capsys, train_multitask.main, multitask_args(setup, tmp_path), "No space left on device",
                 "--predict_only --resume")
    assert f"--predict_only --resume {tmp_path / 'run'}" in text, "the message must name the run that holds the model"
    assert (tmp_path / "run" / "model" / "task_modules.safetensors").is_file(), \
        "the model/ folder --predict_only reads must be written before the predictions"


def test_mml_resume_from_best_pt_is_refused(mml_setup, tmp_path, capsys):
    run_mml(mml_setup, tmp_path, "--epochs", "1", "--method", "bert")
    glue, model = mml_setup
    argv = ["--task", "RTE", "--method", "bert", "--model", str(model), "--glue_dir", str(glue), "--out_dir", str(tmp_path),
            "--epochs", "1", "--batch_size", "4", "--lr", "1e-3", "--seed", "3", "--device", "cpu", "--amp", "off",
            "--resume", str(tmp_path / "best.pt")]
    fails(capsys, train_mml.main, argv, "holds only a model's weights", "--predict_only")


@pytest.mark.parametrize("script, argv, expected", [
    ("train_multitask.py", ["--batch_size", "0"], "argument --batch_size: expected an integer >= 1, got 0"),
    ("train_mml.py", ["--task", "RTE", "--glue_dir", "/nonexistent", "--model", "minilm-l6", "--out_dir", "OUT"],
     "/nonexistent/RTE/train.tsv: file not found"),
])
def test_real_process_prints_one_message_and_no_traceback(tmp_path, script, argv, expected):
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, str(ROOT / script), *argv], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=300)
    assert p.returncode == 2, f"python {script} {argv}: expected exit status 2, got {p.returncode}\n{p.stderr[-1500:]}"
    assert "Traceback" not in p.stderr, f"python {script} {argv} printed a traceback:\n{p.stderr[-2000:]}"
    assert expected in p.stderr, f"python {script} {argv}: expected {expected!r} in:\n{p.stderr[-1500:]}"


def test_saved_weights_are_never_half_written(tmp_path):
    """checkpoint.save is atomic: a failure mid-write leaves the previous file intact."""
    from minbert.run import checkpoint
    path = tmp_path / "last.pt"
    checkpoint.save(path, {"x": torch.ones(2)})

    class Boom:
        def __reduce__(self):
            raise RuntimeError("disk gone")

    with pytest.raises(RuntimeError):
        checkpoint.save(path, {"x": Boom()})
    assert torch.equal(checkpoint.load(path)["x"], torch.ones(2)), "a failed save must leave the old checkpoint"


def test_download_offline_and_unwritable_dest_are_messages(tmp_path, capsys, monkeypatch):
    import urllib.error

    from minbert.tools import download

    def offline(*a, **k):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(download, "download_file", offline)
    fails(capsys, download.main, ["cs224n", "--dest", str(tmp_path / "d")], "download failed", "rerun this command")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    fails(capsys, download.main, ["glue", "--tasks", "RTE", "--dest", str(blocker)], "--dest", "expected a folder")


def test_bad_flag_value_prints_two_lines_not_the_whole_usage(tmp_path):
    """argparse prints its whole usage (57 lines for train_multitask.py) before the line that matters; minbert's
    parsers (minbert.core.flags.BriefParser.error) print the flag, the value and what was expected, then where help is.
    A real process, as a user starts it."""
    p = subprocess.run([sys.executable, str(ROOT / "train_multitask.py"), "--lr", "abc"], capture_output=True, text=True,
                       cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    lines = p.stderr.splitlines()
    assert p.returncode == 2, f"python train_multitask.py --lr abc: expected exit status 2, got {p.returncode}"
    assert lines == ["train_multitask.py: error: argument --lr: expected a number, got 'abc'",
                     "train_multitask.py: --help for all flags"], \
        f"python train_multitask.py --lr abc: expected 2 lines (the error, then --help), got {len(lines)}:\n{p.stderr}"


def test_train_mml_bad_flag_value_prints_two_lines(capsys):
    with pytest.raises(SystemExit) as e:
        train_mml.main(["--task", "RTE", "--epochs", "two"])
    lines = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and len(lines) == 2, f"train_mml.py --epochs two: expected 2 lines, got {len(lines)}:\n{lines}"
    assert lines[0].endswith("error: argument --epochs: expected an integer, got 'two'") and \
        lines[1].endswith("--help for all flags"), f"train_mml.py --epochs two printed:\n{lines}"


# ------------------------------------------------------------------------------------------- unwritable --out_dir
# Root writes to read-only folders (CAP_DAC_OVERRIDE), so these run the script as a user who meets file modes:
# as root, the child drops that capability from its bounding set before exec (what
# `setpriv --inh-caps=-dac_override --bounding-set=-dac_override` does); as anyone else, nothing to drop.
def script(argv, tmp_path, preexec=meet_file_modes):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "train_multitask.py"), *argv], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=300, preexec_fn=preexec)


def assert_message(p, argv, *expected):
    assert p.returncode == 2, f"train_multitask.py {argv}: expected exit status 2, got {p.returncode}\n{p.stderr[-2000:]}"
    assert "Traceback" not in p.stderr, f"train_multitask.py {argv} printed a traceback:\n{p.stderr[-2000:]}"
    for want in expected:
        assert want in p.stderr, f"train_multitask.py {argv}: expected {want!r} in:\n{p.stderr[-1500:]}"


@pytest.mark.skipif(sys.platform != "linux", reason="file modes for root and /proc are Linux's")
@pytest.mark.parametrize("where", ["read-only", "inside read-only", "proc"])
def test_unwritable_out_dir_is_a_message_even_for_root(setup, tmp_path, where):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    out = {"read-only": ro, "inside read-only": ro / "run", "proc": Path("/proc/minbert-run")}[where]
    argv = multitask_args(setup, tmp_path, "--out_dir", str(out))
    try:
        p = script(argv, tmp_path)
    finally:
        ro.chmod(0o755)
    assert p.returncode != 99, "could not drop CAP_DAC_OVERRIDE for the child process"
    assert_message(p, argv, f"--out_dir {out}: cannot write there", "choose a writable folder")


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE and SIGXFSZ are POSIX; tested on Linux")
def test_a_full_disk_while_saving_is_a_message_and_run_json_says_failed(setup, tmp_path):
    """A disk that refuses the first checkpoint: a file-size limit of 1 MB (best.pt of the tiny model is ~4 MB)
    makes every larger write fail with EFBIG, as a full disk fails with ENOSPC (the probe,
    bench/probe_bad_inputs.py, fills a real tmpfs). Nothing was saved, so nothing is offered to resume."""
    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit then fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))

    out = tmp_path / "run"
    argv = multitask_args(setup, tmp_path, "--out_dir", str(out))
    p = script(argv, tmp_path, preexec=small_disk)
    assert_message(p, argv, f"--out_dir {out}: could not write {out / 'best.pt'} (File too large)",
                   "nothing was saved to resume from")
    assert len(p.stderr.strip().splitlines()) <= 3, f"expected a message of at most 3 lines:\n{p.stderr}"
    assert json.loads((out / "run.json").read_text())["status"] == "failed"
