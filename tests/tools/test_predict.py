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


def test_blank_lines_are_skipped_and_a_mix_is_answered_line_by_line(runs, capsys, monkeypatch):
    """A trailing empty line (what echo and editors write) and blank lines between are skipped; sentences and pairs
    on one stdin each get their own answer, the one they get alone; the table and csv hold every column."""
    stdin = "good movie\n\nnice film ||| a good movie\ndull plot\tboring story\n\n"
    mixed = [json.loads(line) for line in
             predicted(capsys, str(runs.pooler), "--format", "jsonl", stdin=stdin, monkeypatch=monkeypatch).splitlines()]
    alone = [json.loads(predicted(capsys, str(runs.pooler), text, "--format", "jsonl"))
             for text in ("good movie", "nice film ||| a good movie", "dull plot ||| boring story")]
    assert [sorted(r) for r in mixed] == [sorted(r) for r in alone], \
        f"minbert.tools.predict: blank lines must be skipped and each line answered as what it is, got {mixed}"
    worst = max(abs(m[k] - a[k]) for m, a in zip(mixed, alone) for k in ("para_probability", "sts_score") if k in a)
    assert [m.get("sst_label") for m in mixed] == [a.get("sst_label") for a in alone] and worst < 1e-5, \
        f"a mix answered otherwise than each line alone (worst difference {worst})"
    rows = list(csv.DictReader(io.StringIO(predicted(capsys, str(runs.pooler), "--format", "csv", stdin=stdin,
                                                     monkeypatch=monkeypatch))))
    assert [bool(r["sst_label"]) for r in rows] == [True, False, False] and rows[2]["sentence2"] == "boring story", rows
    table = predicted(capsys, str(runs.pooler), stdin=stdin, monkeypatch=monkeypatch).splitlines()
    assert len(table) == 5 and "sts_score" in table[0] and "sst_label" in table[0], table


def test_text_column_alone_reads_that_column_as_single_sentences(runs, capsys):
    """--text_column on a file that also has sentence2 reads that one column, as single sentences (SST), as --help
    and docs/predict.md say; --pair_column names a second column, and the default reads sentence1 and sentence2."""
    sts = str(runs.data / "sts-dev.csv")
    named = [json.loads(line) for line in
             predicted(capsys, str(runs.pooler), "--file", sts, "--text_column", "sentence2", "--format",
                       "jsonl").splitlines()]
    column = [line.split("\t")[3] for line in (runs.data / "sts-dev.csv").read_text().splitlines()[1:]]
    assert [r.get("sentence") for r in named] == column and "sst_label" in named[0], \
        f"predict --text_column sentence2: expected sentence2's cells as single sentences, got {named[:2]}"
    default = predicted(capsys, str(runs.pooler), "--file", sts, "--format", "jsonl")
    both = predicted(capsys, str(runs.pooler), "--file", sts, "--text_column", "sentence1", "--pair_column",
                     "sentence2", "--format", "jsonl")
    assert both == default and "sts_score" in json.loads(default.splitlines()[0]), \
        "predict --file with sentence1 and sentence2: the default must read the pairs, as the two flags do"
    helps = {a.dest: a.help for a in predict.parser()._actions}
    assert "read alone" in helps["text_column"] and "--text_column is not given" in helps["pair_column"], helps


def test_a_file_of_the_run_folder_names_that_run(runs, capsys):
    """`python -m minbert predict RUN/best.pt ...` answers as `predict RUN ...` (the same run, the same bytes)."""
    by_folder = predicted(capsys, str(runs.pooler), "good movie", "dull plot", "--format", "jsonl")
    by_file = predicted(capsys, str(runs.pooler / "best.pt"), "good movie", "dull plot", "--format", "jsonl")
    assert by_file == by_folder, f"predict RUN/best.pt:\n{by_file}\npredict RUN:\n{by_folder}"


@pytest.mark.parametrize("argv, stdin, message", [
    (["RUN", "good movie", " "], None, "argument 2: an empty sentence (an empty argument)"),
    (["RUN", "--format", "csv"], "good movie\n\nbad plot ||| \n", "stdin line 3: an empty sentence"),
    (["RUN", "--file", "DATA/sts-dev.csv", "--text_column", "sentence"], None, "no column 'sentence'"),
    (["RUN", "--task", "sentiment", "good"], None, "unknown task 'sentiment'"),
    (["DATA", "good"], None, "not a finished run"),
    (["RUN", "a ||| b ||| c"], None, "argument 1: 3 sentences"),
], ids=["empty_argument", "half_a_pair", "missing_column", "unknown_task", "not_a_run", "three_sentences"])
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


# SST-5's classes as the CS224N handout names them, written out here (not imported): the oracle for the names
HANDOUT_SST_NAMES = ("negative", "somewhat negative", "neutral", "somewhat positive", "positive")


def test_the_name_printed_with_an_sst_label_is_that_labels(runs, capsys):
    out = predicted(capsys, str(runs.pooler), "--file", str(runs.data / "ids-sst-dev.csv"), "--format", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    wrong = [(r["sst_label"], r["sst_name"]) for r in rows if r["sst_name"] != HANDOUT_SST_NAMES[r["sst_label"]]]
    assert not wrong, f"predict prints a name that is not its label's (label, name): {wrong[:3]}"
    assert all(r["sst_label"] == max(range(5), key=r["sst_probabilities"].__getitem__) for r in rows), \
        "predict: the SST label is not the most probable class"


def test_the_batch_size_asked_for_is_the_one_used(runs, capsys, monkeypatch):
    """`predict --batch_size` and `load_run(batch_size=)` score in batches of that size; the default is the
    scripts' evaluation batch (64)."""
    import minbert
    from minbert.tasks.sampling import TaskData
    used = []
    real = TaskData.batches
    monkeypatch.setattr(TaskData, "batches", lambda self, size, shuffle, **kw: used.append(size) or
                        real(self, size, shuffle, **kw))
    predicted(capsys, str(runs.pooler), "--file", str(runs.data / "ids-sst-dev.csv"), "--batch_size", "3")
    run = minbert.load_run(runs.pooler, device="cpu", amp="off", batch_size=5)
    run.sentiment(["good movie", "bad plot"])
    minbert.load_run(runs.mml, device="cpu", amp="off").classify([("a cat", "the cat")])
    assert used == [3, 5, 64], f"batch sizes used by predict --batch_size 3, load_run(batch_size=5), default: {used}"


def test_a_glue_tsv_is_read_with_no_quoting(runs, capsys, tmp_path):
    """GLUE's .tsv files are not quoted: a '"' is part of the text (SST-2 has sentences that begin with one)."""
    sentences = ['"the cat" sat', 'a " lone quote', 'plain "quoted" words']
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("sentence\tlabel\n" + "".join(f"{s}\t1\n" for s in sentences))
    rows = [json.loads(line) for line in
            predicted(capsys, str(runs.pooler), "--file", str(tsv), "--format", "jsonl").splitlines()]
    assert [r["sentence"] for r in rows] == sentences, \
        f"predict --file {tsv.name}: the quotes were parsed, not kept as text: {[r['sentence'] for r in rows]}"
