"""The training scripts' behaviour, pinned across refactors.

Two fixed-seed tiny runs, one of train_multitask.py with PALs + SMART + PCGrad and one of
train_mml.py with MML, must write the prediction files and per-epoch metrics that the scripts
wrote before the "loop is the lesson" refactor. The stored files in
tests/fixtures/behaviour/ were written by that earlier code (regenerate them only on purpose:
MINBERT_WRITE_BEHAVIOUR=1 python -m pytest tests/test_behaviour_unchanged.py). On the CPU that
wrote them the match is byte for byte (with --fast_paths off, the readable path those files came from); numbers
may differ in the last digits on another CPU, so they are compared to 1e-4 (labels exactly).
"""

import json
import os
from pathlib import Path

import pytest

import train_mml
import train_multitask
from conftest import save_tiny_model, write_glue, write_task_files

STORED = Path(__file__).parent / "fixtures" / "behaviour"
WRITE = os.environ.get("MINBERT_WRITE_BEHAVIOUR") == "1"
TIMING = {"elapsed_s", "train_examples_per_s"}   # wall-clock figures, never pinned


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    model = tmp_path_factory.mktemp("behaviour") / "model"
    return save_tiny_model(model)


def same_numbers(got: str, want: str, where: str) -> None:
    """Equal token by token; numeric tokens to 1e-4 (another CPU may round the last digits differently)."""
    g, w = got.split(), want.split()
    assert len(g) == len(w), f"{where}: {len(g)} tokens, the pinned file has {len(w)}"
    for a, b in zip(g, w):
        try:
            fa, fb = float(a.strip(",{}[]\"")), float(b.strip(",{}[]\""))
        except ValueError:
            assert a == b, f"{where}: {a!r} where the pinned file has {b!r}"
            continue
        assert abs(fa - fb) <= 1e-4 * max(1.0, abs(fb)), f"{where}: {a} where the pinned file has {b}"


def metrics(path: Path) -> str:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return "\n".join(json.dumps({k: v for k, v in r.items() if k not in TIMING}, sort_keys=True) for r in rows)


def check(name: str, text: str) -> None:
    stored = STORED / name
    if WRITE:
        stored.parent.mkdir(parents=True, exist_ok=True)
        stored.write_text(text)
    same_numbers(text, stored.read_text(), f"{name} (behaviour changed; see {stored})")


def test_multitask_with_pals_smart_pcgrad_writes_the_pinned_outputs(tiny_model, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_task_files(data)
    out = tmp_path / "run"
    args = ["--model", str(tiny_model), "--data_dir", str(data), "--out_dir", str(out), "--epochs", "2",
            "--batch_size", "4", "--lr", "1e-3", "--hidden_dropout_prob", "0.1", "--seed", "3",
            "--device", "cpu", "--amp", "off",
            "--pals", "--pals_size", "8", "--pals_heads", "2", "--smart", "1", "--surgery", "pcgrad",
            "--fast_paths", "off"]   # the readable path, as before the refactor (the fused AdamW rounds differently)
    for task in ("sst", "para", "sts"):
        for split in ("dev", "test"):
            args += [f"--{task}_{split}_out", str(out / "predictions" / f"{task}-{split}-output.csv")]
    train_multitask.main(args)
    for task in ("sst", "para", "sts"):
        for split in ("dev", "test"):
            name = f"{task}-{split}-output.csv"
            check(f"multitask/{name}", (out / "predictions" / name).read_text())
    check("multitask/metrics.jsonl", metrics(out / "metrics.jsonl"))


def test_mml_writes_the_pinned_metrics(tiny_model, tmp_path):
    glue = tmp_path / "glue"
    write_glue(glue)
    out = tmp_path / "run"
    train_mml.main(["--task", "RTE", "--method", "mml", "--model", str(tiny_model), "--glue_dir", str(glue),
                    "--out_dir", str(out), "--epochs", "2", "--batch_size", "4", "--lr", "1e-3", "--seed", "3",
                    "--device", "cpu", "--amp", "off", "--heads", "16", "--eliminate_every", "5",
                    "--eval_tasks", "QNLI",
                    "--fast_paths", "off"])
    check("mml/metrics.jsonl", metrics(out / "metrics.jsonl"))
    check("mml/cross_dataset.json", (out / "cross_dataset.json").read_text())
