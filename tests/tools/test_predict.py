"""Grades `python -m minbert predict` (minbert/tools/predict.py): inputs from arguments, stdin and files, the three
output formats, input order, and one line for each mistake.

Oracles: (c) the training script's own prediction files for the same rows (labels equal, STS scores to 1e-5);
properties: the rows come out in the order they went in, each format holds the same numbers, a bad input is
one line on stderr with exit status 2 and no traceback (also as a real process).
"""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from minbert.core.errors import cli
from minbert.tools import predict
from test_trained_run import runs, written  # noqa: F401  (runs: a fixture, three finished tiny runs)

ROOT = Path(__file__).resolve().parents[2]
MACHINE = ["--device", "cpu", "--amp", "off"]


def predicted(capsys, *argv, stdin=None, monkeypatch=None) -> str:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    predict.main([*argv, *MACHINE])
    return capsys.readouterr().out


def test_a_file_gives_the_scripts_predictions_row_by_row(runs, capsys):
    out = predicted(capsys, str(runs.pooler), "--file", str(runs.data / "ids-sst-dev.csv"), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    want = written(runs.pooler / "predictions" / "sst-dev-output.csv")
    assert [r["id"] for r in rows] == [f"sd{i}" for i in range(24)], "predict --file: rows not in the file's order"
    assert [int(r["sst_label"]) for r in rows] == [int(want[r["id"]]) for r in rows], \
        "minbert.tools.predict: SST labels differ from the script's sst-dev-output.csv"
    assert abs(sum(float(r[f"sst_probabilities_{k}"]) for k in range(5) for r in rows[:1]) - 1) < 1e-5
    out = predicted(capsys, str(runs.pooler), "--file", str(runs.data / "sts-dev.csv"), "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    want = written(runs.pooler / "predictions" / "sts-dev-output.csv")
    worst = max(abs(r["sts_score"] - want[r["id"]]) for r in rows)
    assert len(rows) == 24 and worst < 1e-5, f"minbert.tools.predict: STS scores off the script's by {worst}"
    para = written(runs.pooler / "predictions" / "para-dev-output.csv")
    out = predicted(capsys, str(runs.pooler), "--file", str(runs.data / "quora-dev.csv"), "--format", "jsonl",
                    "--task", "para")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [int(r["para_probability"] > 0.5) for r in rows] == [int(para[r["id"]]) for r in rows] \
        and "sts_score" not in rows[0], "predict --task para: paraphrase labels differ, or the STS head ran too"


def test_sentences_as_arguments_and_on_stdin_keep_their_order(runs, capsys, monkeypatch):
    sentences = ["boring smart dull", "good", "a fun story with a great actor and a nice plot"]
    table = predicted(capsys, str(runs.pooler), *sentences)
    lines = table.splitlines()
    assert lines[0].startswith("| sst_label | sst_name | sst_probabilities | sentence |") and len(lines) == 5, table
    assert [line.rsplit("|", 2)[1].strip() for line in lines[2:]] == sentences, "the table must keep the input order"
    jsonl = predicted(capsys, str(runs.pooler), "--format", "jsonl", stdin="\n".join(sentences) + "\n",
                      monkeypatch=monkeypatch)
    assert [json.loads(line)["sentence"] for line in jsonl.splitlines()] == sentences, "stdin: order not kept"
    labels = [json.loads(line)["sst_name"] for line in jsonl.splitlines()]
    assert [line.split("|")[2].strip() for line in lines[2:]] == labels, "table and jsonl disagree"


def test_pairs_with_a_tab_or_three_bars_and_an_mml_run(runs, capsys, monkeypatch):
    by_bars = predicted(capsys, str(runs.pooler), "good movie ||| nice film", "--format", "jsonl")
    by_tab = predicted(capsys, str(runs.pooler), "--format", "jsonl", stdin="good movie\tnice film\n",
                       monkeypatch=monkeypatch)
    record = json.loads(by_bars)
    assert by_bars == by_tab and record["sentence2"] == "nice film" and {"para_probability", "sts_score"} <= set(record)
    mml = json.loads(predicted(capsys, str(runs.mml), "the cat sat ||| a cat sat", "--format", "jsonl"))
    assert mml["name"] in ("entailment", "not_entailment") and len(mml["probabilities"]) == 2, mml


@pytest.mark.parametrize("argv, stdin, message", [
    (["RUN", "--format", "csv"], "good movie\n\nbad plot\n", "stdin line 2: an empty sentence (an empty line)"),
    (["RUN", "--file", "DATA/sts-dev.csv", "--text_column", "sentence"], None, "no column 'sentence'"),
    (["RUN", "--task", "sentiment", "good"], None, "unknown task 'sentiment'"),
    (["DATA", "good"], None, "not a finished run"),
    (["RUN", "a ||| b ||| c"], None, "argument 1: 3 sentences"),
], ids=["empty_line", "missing_column", "unknown_task", "not_a_run", "three_sentences"])
def test_each_mistake_is_one_line(runs, capsys, monkeypatch, argv, stdin, message):
    argv = [a.replace("RUN", str(runs.pooler)).replace("DATA", str(runs.data)) for a in argv]
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin or ""))
    with pytest.raises(SystemExit) as e:
        cli(predict.main, argv + MACHINE)
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert e.value.code == 2 and message in last and last.startswith("error: "), f"expected one line {message!r}: {err}"


def test_a_real_process_prints_the_mistake_and_no_traceback(runs):
    empty = runs.root / "empty-row.csv"
    empty.write_text("id\tsentence\n1\tgood movie\n2\t \n")
    p = subprocess.run([sys.executable, "-m", "minbert", "predict", str(runs.pooler), "--file", str(empty), *MACHINE],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr, f"exit {p.returncode}:\n{p.stderr[-1500:]}"
    assert p.stderr.strip().splitlines()[-1] == f"error: {empty}:3: empty 'sentence'", p.stderr
