"""The README's quick start runs offline, on the data and model the repository ships.

Oracle: (c) a property. The commands are read from README.md itself (the first line that runs
`train_multitask.py`, and the quick start's `train_mml.py` line), so the README cannot drift
from what is tested. They run with `--limit` for speed, HF_HUB_OFFLINE=1, and every socket
connection made to fail: any download attempt fails the test. train_multitask.py must write all
six prediction files from the shipped data alone.
"""

import shlex
import socket
from pathlib import Path

import pytest

import train_mml
import train_multitask

ROOT = Path(__file__).resolve().parent.parent


def readme_command(script: str) -> list[str]:
    """The arguments of the first README line that runs `python <script>` (comments dropped)."""
    for line in (ROOT / "README.md").read_text().splitlines():
        if f"python {script} " in line:
            words = shlex.split(line.split(f"python {script} ", 1)[1], comments=True)
            return words[: words.index("&&")] if "&&" in words else words
    raise AssertionError(f"README.md has no `python {script} ...` line")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_network(*a, **k):
        raise AssertionError(f"the quick start tried to open a network connection: {a}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.chdir(ROOT)   # the README's commands run from the repository root


def test_readme_first_command_runs_offline_and_writes_six_prediction_files(offline, tmp_path, capsys):
    first = next(line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("pip install"))
    assert "python train_multitask.py" in first and "--option finetune" in first, \
        "README: the first command line must set up and run train_multitask.py --option finetune"
    args = readme_command("train_multitask.py")
    outs = []
    for task in ("sst", "para", "sts"):
        for split in ("dev", "test"):
            outs += [f"--{task}_{split}_out", str(tmp_path / f"{task}-{split}-output.csv")]
    history = train_multitask.main(args + ["--limit", "16", "--out_dir", str(tmp_path / "run"), *outs])
    assert 0.0 <= history[-1]["overall"] <= 1.0
    written = sorted(p.name for p in tmp_path.glob("*-output.csv"))
    assert len(written) == 6, f"the quick start must write the six prediction files, got {written}"
    out = capsys.readouterr().out
    assert "quora-train-sample.csv" in out, "the Quora sample stands in for the full files: that choice must be printed"
    assert "amp" in out and "model minilm-l6" in out, "the amp choice and the model must be printed at start"
    assert "python -m minbert.download cs224n" in out, "at the end the run must say what to run for the real thing"


def test_readme_mml_quick_start_runs_offline_on_shipped_glue(offline, tmp_path):
    args = readme_command("train_mml.py")
    assert "--glue_dir" not in args, "the MML quick start must use the GLUE files shipped in data/glue_data"
    history = train_mml.main(args + ["--limit", "16", "--epochs", "1", "--out_dir", str(tmp_path)])
    assert history and "accuracy" in history[-1]
