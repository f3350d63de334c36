"""Tests for minbert.tasks.data (CS224N readers, prediction files) and minbert.tools.download.

Most tests use tiny files written to tmp_path in the handout's format: tab-separated, an unnamed
pandas index as first column, and test files whose header starts with "0\\t\\t". The real handout
files are only read, never copied: from $MINBERT_DATA/cs224n, or else the repository's own data/ (conftest.py).
"""

import warnings
from pathlib import Path

import pytest
import torch

from minbert.tasks.data import (CS224N_FILES, PREDICTION_HEADERS, DataError, Example, read_quora, read_sst, read_sts,
                                write_predictions)
from minbert.tasks.sampling import TaskData

from conftest import WordTokenizer, real_cs224n_dir, needs_cs224n

REAL_FILES = ["ids-sst-train.csv", "ids-sst-dev.csv", "ids-sst-test-student.csv", "ids-cfimdb-train.csv",
              "ids-cfimdb-dev.csv", "ids-cfimdb-test-student.csv", "sts-train.csv", "sts-dev.csv",
              "sts-test-student.csv", "quora-dev-sample.csv", "quora-train-sample.csv"]
REAL_CS224N = real_cs224n_dir(*REAL_FILES)          # $MINBERT_DATA/cs224n, else the shipped data/
needs_shared_data = needs_cs224n(*REAL_FILES)

SST_HEADER = ["", "id", "sentence", "sentiment"]
PAIR_HEADER = ["", "id", "sentence1", "sentence2"]  # + is_duplicate (Quora) or similarity (STS)


def write_tsv(path: Path, rows: list[list[str]]) -> Path:
    """Write rows the way pandas.to_csv(sep='\\t') wrote the handout files."""
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------------------------
# Readers on tiny self-made files


def test_read_sst_labeled_and_unlabeled(tmp_path):
    """Oracle: hand-written expected Examples (text stripped, label an int, None when unlabeled)."""
    train = write_tsv(tmp_path / "ids-sst-train.csv", [
        SST_HEADER, ["0", "a1", " It 's a lovely film .", "3"], ["1", "b2", " Awful .", "0"]])
    assert read_sst(train) == [Example("a1", "It 's a lovely film .", None, 3), Example("b2", "Awful .", None, 0)]
    assert read_sst(train, labeled=False)[1] == Example("b2", "Awful .", None, None)
    test = write_tsv(tmp_path / "ids-sst-test-student.csv", [
        ["0", "", "id", "sentence"], ["1", "0.0", "t1", " Effective but too-tepid biopic"]])
    assert read_sst(test, labeled=False) == [Example("t1", "Effective but too-tepid biopic", None, None)]


def test_read_quora_and_sts_pairs(tmp_path):
    """Oracle: hand-written expected Examples (Quora "1.0" -> 1, STS similarity as float)."""
    quora = write_tsv(tmp_path / "quora-dev.csv", [
        PAIR_HEADER + ["is_duplicate"], ["9", "q1", "How?", "Why?", "1.0"], ["4", "q2", "A?", "B?", "0.0"]])
    assert read_quora(quora) == [Example("q1", "How?", "Why?", 1), Example("q2", "A?", "B?", 0)]
    assert [type(e.label) for e in read_quora(quora)] == [int, int]
    sts = write_tsv(tmp_path / "sts-dev.csv", [
        PAIR_HEADER + ["similarity"], ["5", "s1", "Two dogs.", "Two black dogs.", "4.6"], ["7", "s2", "A", "B", "0"]])
    assert read_sts(sts) == [Example("s1", "Two dogs.", "Two black dogs.", 4.6), Example("s2", "A", "B", 0.0)]
    sts_test = write_tsv(tmp_path / "sts-test-student.csv", [PAIR_HEADER, ["735", "s3", "A band.", "A band plays."]])
    assert read_sts(sts_test, labeled=False) == [Example("s3", "A band.", "A band plays.", None)]


GOOD_ROW = {read_sst: ["0", "a1", "fine", "1"], read_sts: ["0", "a1", "fine", "also fine", "1.5"],
            read_quora: ["0", "a1", "fine?", "also fine?", "1.0"]}
# (reader, header, bad row, text the error must contain). The bad row is always file line 4.
MALFORMED = [
    (read_sst, SST_HEADER, ["2", "c3", "too few fields"], "found 3 tab-separated fields, expected 4"),
    (read_sst, SST_HEADER, ["2", "c3", "ok", "3", "extra"], "found 5 tab-separated fields, expected 4"),
    (read_sst, SST_HEADER, ["2", "c3", "ok", "positive"], "found sentiment 'positive', expected an integer 0-4"),
    (read_sst, SST_HEADER, ["2", "c3", "ok", "5"], "found sentiment '5', expected an integer 0-4"),
    (read_sst, SST_HEADER, ["2", "c3", "ok", "-1"], "expected an integer 0-4"),
    (read_sst, SST_HEADER, ["2", "c3", "ok", "2.5"], "expected an integer 0-4"),
    (read_sst, SST_HEADER, ["2", "c3", "ok", ""], "found sentiment '', expected an integer 0-4"),
    (read_sst, SST_HEADER, ["2", "c3", "  ", "2"], "found an empty sentence, expected non-empty text"),
    (read_sst, SST_HEADER, ["2", "", "ok", "2"], "found an empty id"),
    (read_sts, PAIR_HEADER + ["similarity"], ["2", "c3", "a", "b"], "found 4 tab-separated fields, expected 5"),
    (read_sts, PAIR_HEADER + ["similarity"], ["2", "c3", "a", "b", "high"], "found similarity 'high', expected a number 0-5"),
    (read_sts, PAIR_HEADER + ["similarity"], ["2", "c3", "a", "b", "5.5"], "expected a number 0-5"),
    (read_sts, PAIR_HEADER + ["similarity"], ["2", "c3", "a", "b", "nan"], "expected a number 0-5"),
    (read_sts, PAIR_HEADER + ["similarity"], ["2", "c3", "a", "", "1.0"], "found an empty sentence2, expected non-empty text"),
    (read_quora, PAIR_HEADER + ["is_duplicate"], ["2", "c3", "a", "b", "1.0", "x"], "found 6 tab-separated fields, expected 5"),
    (read_quora, PAIR_HEADER + ["is_duplicate"], ["2", "c3", "a", "b", "2.0"], "found is_duplicate '2.0', expected 0 or 1"),
    (read_quora, PAIR_HEADER + ["is_duplicate"], ["2", "c3", "a", "b", "0.5"], "expected 0 or 1"),
]


@pytest.mark.parametrize("reader, header, bad_row, expected", MALFORMED,
                         ids=[f"{r.__name__}-{'|'.join(b[2:])}" for r, _, b, _ in MALFORMED])
def test_malformed_row_error_names_path_line_and_expectation(tmp_path, reader, header, bad_row, expected):
    """Oracle: property. The DataError message reads "path:line: found ..., expected ..." with the
    1-based file line (header = line 1)."""
    good = GOOD_ROW[reader]
    path = write_tsv(tmp_path / "file.csv", [header, good, ["1", "a2"] + good[2:], bad_row])
    with pytest.raises(DataError) as error:
        reader(path)
    message = str(error.value)
    assert f"{path}:4:" in message, f"minbert.tasks.data.{reader.__name__}: expected '{path}:4:' in {message!r}"
    assert expected in message, f"minbert.tasks.data.{reader.__name__}: expected {expected!r} in {message!r}"


def test_line_numbers_count_file_lines_across_multiline_quoted_fields(tmp_path):
    """Oracle: hand-counted lines. A quoted field spanning two lines shifts later records by one line."""
    path = tmp_path / "sst.csv"
    path.write_text('\tid\tsentence\tsentiment\n0\ta1\t"two\nlines"\t1\n1\tb2\tok\t9\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"sst\.csv:4: found sentiment '9'"):
        read_sst(path)


@pytest.mark.parametrize("reader", [read_sst, read_quora, read_sts])
def test_missing_file_error_says_how_to_get_the_data(tmp_path, reader):
    """Oracle: property. The message names the path, the download command and --data_dir."""
    path = tmp_path / "data" / "ids-sst-train.csv"  # the data directory itself is missing
    with pytest.raises(DataError) as error:
        reader(path)
    message = str(error.value)
    for part in (str(path), "file not found", "does not exist", "python -m minbert download cs224n", "--data_dir"):
        assert part in message, f"minbert.tasks.data.{reader.__name__}: expected {part!r} in {message!r}"


@pytest.mark.parametrize("reader, header, missing", [
    (read_sst, ["", "id", "text", "sentiment"], "sentence"),
    (read_sts, ["", "id", "sentence1", "sentence_2", "similarity"], "sentence2"),
    (read_quora, ["", "sentence1", "sentence2", "is_duplicate"], "id"),
])
def test_missing_column_error_lists_the_header_found(tmp_path, reader, header, missing):
    """Oracle: property. The message gives path:1, the header found and the missing column."""
    path = write_tsv(tmp_path / "file.csv", [header, ["0"] * len(header)])
    with pytest.raises(DataError) as error:
        reader(path)
    message = str(error.value)
    for part in (f"{path}:1:", f"found header {header}", f"missing [{missing!r}]"):
        assert part in message, f"minbert.tasks.data.{reader.__name__}: expected {part!r} in {message!r}"


@pytest.mark.parametrize("reader, header", [
    (read_sst, ["0", "", "id", "sentence"]),
    (read_quora, PAIR_HEADER),
    (read_sts, PAIR_HEADER),
])
def test_unlabeled_test_file_read_as_labeled_says_use_labeled_false(tmp_path, reader, header):
    """Oracle: property. A *-test-student.csv read with labeled=True fails with advice, not a KeyError."""
    path = write_tsv(tmp_path / "test-student.csv", [header, ["1", "0.0", "t1", "text", "more"][:len(header)]])
    with pytest.raises(DataError) as error:
        reader(path)
    assert f"{path}:1:" in str(error.value) and "labeled=False" in str(error.value)
    assert len(reader(path, labeled=False)) == 1


def test_quora_broken_rows_are_skipped_and_reported_in_one_plain_line(tmp_path, capsys):
    """Oracle: hand-made copy of the two upstream defects (malformed quoting leaving is_duplicate empty,
    and also sentence2 empty), plus an unparseable label. All three are skipped and named, by problem with
    their line numbers, in one printed line: no Python warning (a traceback-like line that reads as a bug)."""
    path = tmp_path / "quora-train-sample.csv"
    path.write_text(
        "\tid\tsentence1\tsentence2\tis_duplicate\n"
        "1\tq1\tWhat?\tWhich?\t0.0\n"
        '2\tq2\tAny idea?\t"""Where can I find a dress?"\t\n'  # line 3: empty is_duplicate
        "3\tq3\tHow?\tWhy?\t1.0\n"
        '4\tq4\t"""Given a set of busy time intervals?"\t\t\n'  # line 5: empty sentence2 and is_duplicate
        "5\tq5\tA?\tB?\tyes\n", encoding="utf-8")  # line 6: unparseable
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a warning fails the test
        examples = read_quora(path)
    assert [e.id for e in examples] == ["q1", "q3"]
    printed = capsys.readouterr().out.splitlines()
    want = (f"data: skipped 3 rows of {path}: empty is_duplicate (lines 3, 5), empty sentence2 (line 5), "
            f"unparseable is_duplicate 'yes' (line 6)")
    assert printed == [want], f"minbert.tasks.data.read_quora: expected the one line {want!r}, printed {printed}"


def test_quora_with_only_broken_rows_is_an_error(tmp_path):
    """Oracle: property. Skipping every row would hide a wrong file, so it raises instead."""
    path = write_tsv(tmp_path / "quora.csv", [PAIR_HEADER + ["is_duplicate"], ["1", "q1", "A?", "B?", ""]])
    with pytest.raises(DataError, match=r"skipped 1 row of .*quora.csv: empty is_duplicate \(line 2\)"):
        read_quora(path)


# ----------------------------------------------------------------------------------------------
# The real handout files (read in place, never copied)


@needs_shared_data
@pytest.mark.parametrize("reader, name, labeled, count", [
    (read_sst, "ids-sst-train.csv", True, 8544),
    (read_sst, "ids-sst-dev.csv", True, 1101),
    (read_sst, "ids-sst-test-student.csv", False, 2210),
    (read_sst, "ids-cfimdb-train.csv", True, 1707),
    (read_sst, "ids-cfimdb-dev.csv", True, 245),
    (read_sst, "ids-cfimdb-test-student.csv", False, 488),
    (read_sts, "sts-train.csv", True, 6040),
    (read_sts, "sts-dev.csv", True, 863),
    (read_sts, "sts-test-student.csv", False, 1725),
    (read_quora, "quora-dev-sample.csv", True, 2000),
])
def test_real_cs224n_files_load_with_official_counts(reader, name, labeled, count):
    """Oracle: the official row counts (data/MANIFEST.md); ids are unique and labels present iff labeled."""
    examples = reader(REAL_CS224N / name, labeled=labeled)
    assert len(examples) == count, f"minbert.tasks.data.{reader.__name__}({name}): expected {count} examples, got {len(examples)}"
    assert len({e.id for e in examples}) == count, f"{name}: duplicate ids"
    assert all((e.label is not None) == labeled for e in examples)


@needs_shared_data
def test_real_quora_sample_skips_exactly_the_two_upstream_rows(capsys):
    """Oracle: data/MANIFEST.md. quora-train-sample.csv has 16,000 rows, two of them broken upstream
    (data rows 2,576 and 14,221 = file lines 2577 and 14222): 15,998 examples and one printed line."""
    path = REAL_CS224N / "quora-train-sample.csv"
    examples = read_quora(path)
    assert len(examples) == 15998, f"minbert.tasks.data.read_quora: expected 15998 examples, got {len(examples)}"
    assert {e.label for e in examples} == {0, 1}
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"data: skipped 2 rows of {path}: empty is_duplicate (lines 2577, 14222), "
                       f"empty sentence2 (line 14222)"], printed


@needs_shared_data
def test_real_sst_test_file_read_as_labeled_fails_clearly():
    """Oracle: property, on the real file whose header begins with "0\\t\\t"."""
    with pytest.raises(DataError, match="labeled=False"):
        read_sst(REAL_CS224N / "ids-sst-test-student.csv")


def test_default_file_names_cover_three_tasks_and_three_splits():
    """Oracle: the handout's data/ file names."""
    assert set(CS224N_FILES) == {f"{t}_{s}" for t in ("sst", "para", "sts") for s in ("train", "dev", "test")}
    assert CS224N_FILES["sst_test"] == "ids-sst-test-student.csv" and CS224N_FILES["para_train"] == "quora-train.csv"


# ----------------------------------------------------------------------------------------------
# Prediction files


@pytest.mark.parametrize("task, ids, values, lines", [
    ("sst", ["a7d575c9", "33cfa329"], [3, 0], ["a7d575c9 , 3 \n", "33cfa329 , 0 \n"]),
    ("para", ["9aed1eb5"], torch.tensor([1]).tolist(), ["9aed1eb5 , 1 \n"]),
    ("sts", ["876d0172", "e8336dc0"], [2.5, 0.125], ["876d0172 , 2.5 \n", "e8336dc0 , 0.125 \n"]),
])
def test_prediction_files_match_the_handout_byte_for_byte(tmp_path, task, ids, values, lines):
    """Oracle: a string built by hand from the handout's format (multitask_classifier.py), whose STS header is
    spelled "Predicted_Similiary": f"id \\t {header} \\n", then f"{id} , {value} \\n" per example, "\\n" line ends."""
    header = {"sst": "Predicted_Sentiment", "para": "Predicted_Is_Paraphrase", "sts": "Predicted_Similiary"}[task]
    assert PREDICTION_HEADERS[task] == header
    path = tmp_path / "predictions" / f"{task}-dev-output.csv"
    path.parent.mkdir()
    path.write_text("stale content from an earlier run\n")
    write_predictions(path, header, ids, values)
    expected = ("id \t " + header + " \n" + "".join(lines)).encode("utf-8")
    assert path.read_bytes() == expected, f"minbert.tasks.data.write_predictions: got {path.read_bytes()!r}"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name], "temporary file left behind"


def test_write_predictions_rejects_mismatched_lengths_and_full_header_lines(tmp_path):
    """Oracle: property. Nothing is written when the arguments are wrong."""
    with pytest.raises(ValueError, match="2 ids but 1 values"):
        write_predictions(tmp_path / "out.csv", "Predicted_Sentiment", ["a", "b"], [1])
    with pytest.raises(ValueError, match="column title"):
        write_predictions(tmp_path / "out.csv", "id \t Predicted_Sentiment \n", ["a"], [1])
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------------
# python -m minbert download cs224n (no network: download_file is replaced)


def test_download_cs224n_fetches_the_handout_files_and_skips_existing(tmp_path, monkeypatch):
    """Oracle: the handout's raw GitHub URLs. Files already present are not fetched again."""
    import minbert.tools.download as download

    calls = []

    def fake_download_file(url, dest, desc):
        calls.append((url, Path(dest), desc))
        Path(dest).write_text("downloaded")
        return Path(dest)

    monkeypatch.setattr(download, "download_file", fake_download_file)
    dest = tmp_path / "data"
    dest.mkdir()
    (dest / "sts-train.csv").write_text("already here")
    download.main(["cs224n", "--dest", str(dest)])

    names = [f"{t}-{s}.csv" for t in ("ids-sst", "quora", "sts", "ids-cfimdb") for s in ("train", "dev", "test-student")]
    base = "https://raw.githubusercontent.com/gpoesia/minbert-default-final-project/main/data/"
    expected = [(base + n, dest / n, n) for n in names if n != "sts-train.csv"]
    assert calls == expected, f"minbert.tools.download: unexpected download_file calls {calls}"
    assert (dest / "sts-train.csv").read_text() == "already here"
    calls.clear()
    download.main(["cs224n", "--dest", str(dest)])  # a second run finds everything and fetches nothing
    assert calls == []



# ----------------------------------------------------------------------------------------------
# Helpful errors and honest output names


def test_a_typo_in_a_shipped_file_name_gets_did_you_mean(tmp_path):
    """Oracle: difflib's closest existing name; a handout file that is not here keeps the download advice."""
    write_tsv(tmp_path / "ids-sst-train.csv", [SST_HEADER, ["0", "s0", "fine.", "3"]])
    with pytest.raises(DataError, match=r"Did you mean .*ids-sst-train\.csv\?") as typo:
        read_sst(tmp_path / "ids-sst-trian.csv")
    assert "minbert.tools.download" not in str(typo.value), "a typo of a file that is there must not send the user to download"
    with pytest.raises(DataError, match="python -m minbert download cs224n"):
        read_quora(tmp_path / "quora-train.csv")   # the full Quora file is not shipped: download it


def test_stand_in_quora_test_predictions_are_named_so():
    """Oracle: default_paths on the shipped data/ (no full Quora files): the Quora test file is the dev sample, so
    its prediction file's default name must say it is a stand-in; the other five keep the handout's names."""
    from argparse import Namespace

    from minbert.tasks.data import PREDICTION_FILES, default_paths, resolve_outputs

    paths, _ = default_paths(str(Path(__file__).resolve().parents[2] / "data"))
    args = Namespace(out_dir="runs/x", **paths, **dict.fromkeys(PREDICTION_FILES))
    notes = resolve_outputs(args)
    assert "STAND-IN" in args.para_test_out and "not-for-submission" in args.para_test_out, args.para_test_out
    assert args.sst_test_out == "runs/x/predictions/sst-test-output.csv"
    assert any("do not submit" in n for n in notes), f"the stand-in must be announced, got {notes}"
    args = Namespace(out_dir="runs/x", **paths | {"para_test": "q-test.csv"}, **dict.fromkeys(PREDICTION_FILES))
    resolve_outputs(args)
    assert args.para_test_out == "runs/x/predictions/para-test-output.csv", "a real Quora test file keeps its name"


# ----------------------------------------------------------------------------------------------
# Edges found by mutation testing (bench/mutation.py): each test below failed on a changed data.py


def test_an_empty_file_and_a_header_only_file_are_data_errors_that_name_the_file(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(DataError, match=r"empty.csv:1: found an empty file, expected a tab-separated header with "
                                        r"columns \['id', 'sentence', 'sentiment'\]"):
        read_sst(empty)
    header_only = write_tsv(tmp_path / "header.csv", [SST_HEADER])
    with pytest.raises(DataError, match=r"header.csv: found a header and no data rows, expected at least one example"):
        read_sst(header_only)


def test_a_file_that_is_not_utf8_is_a_data_error_that_names_the_file(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"\tid\tsentence\tsentiment\n0\ta1\tcaf\xe9\t1\n")
    with pytest.raises(DataError, match=r"latin1.csv: found bytes that are not UTF-8 text \(byte \d+"):
        read_sst(path)


def test_malformed_csv_is_a_data_error_with_the_line(tmp_path):
    """csv raises on a field longer than its limit (131072 characters): reported as path:line."""
    path = write_tsv(tmp_path / "huge.csv", [SST_HEADER, ["0", "a1", "fine.", "1"], ["1", "a2", "x" * 140_000, "1"]])
    with pytest.raises(DataError, match=r"huge.csv:3: found malformed csv \(field larger than field limit"):
        read_sst(path)


def test_a_blank_line_in_the_middle_of_a_file_is_skipped_not_the_end(tmp_path):
    path = tmp_path / "sst.csv"
    path.write_text("\tid\tsentence\tsentiment\n0\ta1\tgood.\t4\n\n1\ta2\tbad.\t0\n", encoding="utf-8")
    assert read_sst(path) == [Example("a1", "good.", None, 4), Example("a2", "bad.", None, 0)]


def test_a_quoted_field_keeps_its_line_break_exactly(tmp_path):
    """Oracle: the csv module's documented contract (open with newline=''): a line break inside a quoted field
    is part of the field, byte for byte, also when it is \\r\\n."""
    path = tmp_path / "sst.csv"
    path.write_bytes(b'\tid\tsentence\tsentiment\n0\ta1\t"two\r\nlines"\t1\n')
    assert read_sst(path) == [Example("a1", "two\r\nlines", None, 1)]


def test_sst_labels_are_python_ints_so_taskdata_makes_them_long(tmp_path):
    """'3' and '3.0' are read as int 3, not float 3.0: TaskData's default label dtype is float32 as soon as one
    label is a float, which would turn SST's class indices into regression targets."""
    path = write_tsv(tmp_path / "sst.csv", [SST_HEADER, ["0", "a1", "good.", "3"], ["1", "a2", "bad.", "1.0"]])
    labels = [e.label for e in read_sst(path)]
    assert labels == [3, 1] and all(type(y) is int for y in labels), f"read_sst labels {labels!r}: expected ints"
    assert TaskData(read_sst(path), WordTokenizer(), 16).labels.dtype == torch.long


def test_an_empty_sts_sentence_error_names_path_and_line(tmp_path):
    path = write_tsv(tmp_path / "sts.csv", [PAIR_HEADER + ["similarity"], ["0", "t1", " ", "b", "2.0"]])
    with pytest.raises(DataError, match=r"sts.csv:2: found an empty sentence1, expected non-empty text"):
        read_sts(path)


@pytest.mark.parametrize("n, shown", [(10, "lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11"),
                                      (11, "lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 1 more"),
                                      (12, "lines 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 2 more")])
def test_quora_skipped_rows_list_ten_lines_then_how_many_more(tmp_path, capsys, n, shown):
    """Oracle: hand-written lines. The note shows the first 10 line numbers, then 'and N more' (none for exactly 10)."""
    path = write_tsv(tmp_path / "q.csv", [PAIR_HEADER + ["is_duplicate"]] + [[str(i), f"q{i}", "A?", "B?", ""]
                                                                          for i in range(n)] + [["99", "ok", "A?", "B?", "1.0"]])
    read_quora(path)
    assert capsys.readouterr().out == f"data: skipped {n} rows of {path}: empty is_duplicate ({shown})\n"


def test_missing_bare_file_name_does_not_claim_its_folder_is_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as e:
        read_sst("quora-nothing-like-it.csv")
    assert "does not exist either" not in str(e.value), f"the current folder exists: {e.value}"


def test_did_you_mean_names_the_file_in_its_own_folder_and_only_close_names(tmp_path, monkeypatch):
    """Oracle: difflib ratios. 'ids-sst-trian.csv' is 0.94 close to 'ids-sst-train.csv' in the same folder;
    'ssx-dwz.csv' (ratio 0.73 to 'sst-dev.csv') is below the 0.75 cutoff: no suggestion."""
    from minbert.tasks.data import did_you_mean
    write_tsv(tmp_path / "ids-sst-train.csv", [SST_HEADER, ["0", "s0", "fine.", "3"]])
    (tmp_path / "sst-dev.csv").write_text("")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert did_you_mean(str(tmp_path / "ids-sst-trian.csv"), str(empty)) == str(tmp_path / "ids-sst-train.csv")
    assert did_you_mean(str(tmp_path / "ssx-dwz.csv"), str(empty)) is None
    assert did_you_mean(str(tmp_path / "zzz.csv"), str(empty)) is None
    monkeypatch.chdir(tmp_path)   # a bare name: looked for in the current folder
    assert did_you_mean("ids-sst-trian.csv", str(empty)) == "./ids-sst-train.csv"


def test_default_paths_in_a_folder_with_and_without_the_full_quora_files(tmp_path):
    """Oracle: the handout's file names (CS224N_FILES) and the shipped sample's, joined to data_dir."""
    from minbert.tasks.data import default_paths
    d = str(tmp_path)
    (tmp_path / "quora-train-sample.csv").write_text("x")
    paths, notes = default_paths(d)
    assert paths == {**{k: f"{d}/{v}" for k, v in CS224N_FILES.items()}, "para_train": f"{d}/quora-train-sample.csv",
                     "para_dev": f"{d}/quora-dev-sample.csv", "para_test": f"{d}/quora-dev-sample.csv"}, paths
    assert notes == [f"Quora: quora-train.csv is not in {d}/, so the shipped sample trains (quora-train-sample.csv, "
                     f"16k pairs; dev quora-dev-sample.csv, 2k)",
                     "Quora test: stand-in = quora-dev-sample.csv read without labels",
                     "the full Quora files: python -m minbert download cs224n"], notes
    (tmp_path / "quora-train.csv").write_text("x")   # the full files are there: they win, with no note
    assert default_paths(d) == ({k: f"{d}/{v}" for k, v in CS224N_FILES.items()}, [])


def data_parser():
    import argparse
    from minbert.tasks import data
    parser = argparse.ArgumentParser()
    data.add_args(parser)
    parser.add_argument("--out_dir", default="runs/x")
    return parser, data


def test_data_flags_default_to_the_handout_files_and_headers(tmp_path):
    parser, data = data_parser()
    args = parser.parse_args(["--data_dir", str(tmp_path), "--sts_dev", "mine.csv"])
    assert args.handout_headers is True and data.prediction_headers(args) == PREDICTION_HEADERS
    data.resolve_paths(args)
    assert args.sst_train == str(tmp_path / "ids-sst-train.csv") and args.sts_dev == "mine.csv", vars(args)
    assert args.para_test == str(tmp_path / "quora-test-student.csv") and args.data_notes == []
    assert args.sts_test_out == "runs/x/predictions/sts-test-output.csv", args.sts_test_out
    args = parser.parse_args(["--no-handout_headers", "--sst_dev_out", "p.csv"])
    assert data.prediction_headers(args)["sts"] == "Predicted_Similarity" and args.sst_dev_out == "p.csv"
    assert parser.parse_args([]).data_dir == "data"
    from argparse import Namespace
    assert data.prediction_headers(Namespace()) == PREDICTION_HEADERS, "no --handout_headers flag: the handout's"


def test_default_paths_notes_reach_args_with_the_output_notes(tmp_path):
    parser, data = data_parser()
    (tmp_path / "quora-train-sample.csv").write_text("x")
    args = parser.parse_args(["--data_dir", str(tmp_path)])
    data.resolve_paths(args)
    assert len(args.data_notes) == 4 and "do not submit" in args.data_notes[-1], args.data_notes


def test_load_split_reads_each_task_as_the_flags_say(tmp_path):
    """Oracle: the files written (conftest.write_task_files: 24 rows each). sst long labels, para and sts float32;
    --limit keeps the first rows; a test file 'none' is left out; test splits carry no labels."""
    from argparse import Namespace
    from conftest import write_task_files
    from minbert.tasks.data import load_split
    write_task_files(tmp_path)
    files = {k: str(tmp_path / v) for k, v in CS224N_FILES.items()}
    args = Namespace(**files, limit=5, max_seq_len=32)
    dev = load_split(args, "dev", WordTokenizer(), {"sts": "separate"})
    assert sorted(dev) == ["para", "sst", "sts"] and all(len(d) == 5 for d in dev.values())
    assert (dev["sst"].labels.dtype, dev["para"].labels.dtype, dev["sts"].labels.dtype) == (torch.long, torch.float32, torch.float32)
    assert dev["sts"].pair_mode == "separate" and dev["para"].pair_mode == "cross"
    assert dev["sst"].ids == ["sd0", "sd1", "sd2", "sd3", "sd4"]
    test = load_split(Namespace(**files | {"para_test": "none"}, limit=0, max_seq_len=32), "test", WordTokenizer(), {})
    assert sorted(test) == ["sst", "sts"] and test["sst"].labels is None and len(test["sts"]) == 24


def test_write_predictions_refuses_a_tab_or_a_newline_alone_in_the_header(tmp_path):
    for header in ("id \t Predicted_Sentiment", "Predicted_Sentiment \n"):
        with pytest.raises(ValueError, match="column title"):
            write_predictions(tmp_path / "out.csv", header, ["a"], [1])


def test_write_predictions_creates_missing_folders_and_nothing_else(tmp_path, monkeypatch):
    write_predictions(tmp_path / "new" / "deeper" / "out.csv", "Predicted_Sentiment", ["a"], [1])
    assert (tmp_path / "new" / "deeper" / "out.csv").read_bytes() == b"id \t Predicted_Sentiment \na , 1 \n"
    monkeypatch.chdir(tmp_path / "new")
    write_predictions("bare.csv", "Predicted_Sentiment", ["a"], [1])
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["bare.csv", "deeper"], "a stray folder was made"


def test_an_interrupted_write_keeps_its_error_and_leaves_no_temporary_file(tmp_path):
    class Boom:
        def __format__(self, spec):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_predictions(tmp_path / "out.csv", "Predicted_Sentiment", ["a", "b"], [1, Boom()])
    assert list(tmp_path.iterdir()) == [], "the temporary file must be removed and nothing written"
