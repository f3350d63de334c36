"""Tests for minbert.tasks.glue (GLUE/SNLI/Quora readers, cross-dataset label mapping) and the
`python -m minbert download glue` command.

Most tests use tiny files written to tmp_path in each task's real format, quirks included: CoLA
without a header, MRPC's UTF-8 BOM, unbalanced quotes (csv.QUOTE_NONE), a missing final newline.
The real GLUE files are only read, never copied: from $MINBERT_DATA/glue, or else the shipped data/glue_data
(conftest.py); for the tasks data/ does not ship (QNLI, SST-2, WNLI) a fresh clone reads a few rows of each
real file from tests/fixtures/glue (made by tests/fixtures/make_glue_fixtures.py), so nothing skips.
"""

import csv
import io
import warnings
import zipfile
from pathlib import Path

import pytest
import torch

from minbert.tasks.data import DataError, Example
from minbert.tasks.glue import TASKS, category_prediction, read_glue, to_category_labels

from conftest import glue_files, real_cs224n_dir, real_glue_dir, needs_cs224n, needs_glue

# $MINBERT_DATA/glue when it holds the task, else the shipped data/glue_data (RTE, MRPC, STS-B, CoLA)
SHARED_CS224N = real_cs224n_dir("quora-dev-sample.csv")

BOM = "\ufeff"
T = "\t"
MNLI_COLUMNS = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
                "sentence1_parse", "sentence2_parse", "sentence1", "sentence2"]
SNLI_HEADER = ("gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
               "sentence1\tsentence2\tcaptionID\tpairID\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\n")
STSB_COLUMNS = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"


def mnli_row(i, s1, s2, *labels):
    return T.join([str(i), "p", f"{i}n", "fiction", "( a )", "( b )", "(ROOT a)", "(ROOT b)", s1, s2, *labels]) + "\n"


def snli_row(gold, s1, s2, pair_id, annotators=("neutral", "", "", "", "")):
    return T.join([gold, "( a )", "( b )", "(ROOT a)", "(ROOT b)", s1, s2, "1.jpg#0", pair_id, *annotators]) + "\n"


def stsb_row(i, s1, s2, *score):
    return T.join([str(i), "main-captions", "MSRvid", "2012test", f"{i:04d}", "none", "none", s1, s2, *score]) + "\n"


# every file a tiny glue_dir holds, in the real formats (paths relative to glue_dir)
FILES = {
    # no header; source, label, orig_judgment, sentence; an unbalanced quote; no final newline
    "CoLA/train.tsv": 'gj04\t1\t\tHe said "hello.\ngj04\t0\t*\tThe more books.',
    "CoLA/test.tsv": "index\tsentence\n0\tBill whistled past the house.\n",
    "SST-2/train.tsv": "sentence\tlabel\nhide new secretions \t0\n\" contains wit \t1\n",
    "SST-2/test.tsv": "index\tsentence\n0\tuneasy mishmash .\n",
    "MRPC/train.tsv": BOM + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                      "1\t702876\t702977\tAmrozi said \"hi.\tHe said hi.\n",
    "MRPC/test.tsv": "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1089874\t1089925\tA b.\tC d.\n",
    "QQP/train.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n133273\t213221\t213222\tHow?\tWhy?\t1\n",
    "QQP/test.tsv": "id\tquestion1\tquestion2\n0\tHow?\tWhy?\n",
    "STS-B/train.tsv": STSB_COLUMNS + "\tscore\n" + "".join(
        stsb_row(i, f"a{i}", f"b{i}", s) for i, s in enumerate(["5.000", "2.000", "2.400", "3.999", "4.000", "0.000"])),
    "STS-B/test.tsv": STSB_COLUMNS + "\n" + stsb_row(0, "A girl.", "A boy."),
    "MNLI/train.tsv": T.join(MNLI_COLUMNS + ["label1", "gold_label"]) + "\n" + "".join(
        mnli_row(i, f"p{i}", f"h{i}", g, g) for i, g in enumerate(["neutral", "entailment", "contradiction"])),
    "MNLI/dev_matched.tsv": T.join(MNLI_COLUMNS + ["label1", "label2", "label3", "label4", "label5", "gold_label"])
    + "\n" + mnli_row(7, "p", "h", *["entailment"] * 5, "entailment"),
    "MNLI/test_matched.tsv": T.join(MNLI_COLUMNS) + "\n" + mnli_row(0, "p", "h"),
    "QNLI/train.tsv": "index\tquestion\tsentence\tlabel\n0\tWhat?\tThis.\tnot_entailment\n1\tWho?\tHim.\tentailment\n",
    "RTE/train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tNo WMD found.\tWMD found.\tnot_entailment\n"
                     "1\tPope died.\tA pope died.\tentailment\n",
    "RTE/test.tsv": "index\tsentence1\tsentence2\n0\tA b.\tC d.\n",
    "WNLI/train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tI stuck a pin.\tIt had a hole.\t1\n",
    # '-': no gold label, dropped; the second row lacks the trailing annotator columns label2-label5
    "SNLI/snli_1.0/snli_1.0_test.txt": SNLI_HEADER + snli_row("contradiction", "Two women.", "Men.", "9r1c")
    + "neutral\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tA dog.\tA cat.\t2.jpg#1\t8r1n\tneutral\n"
    + snli_row("-", "A man.", "A person.", "7r1e") + snli_row("entailment", "A man.", "A human.", "7r2e"),
    "Quora/quora-dev.csv": "\tid\tsentence1\tsentence2\tis_duplicate\n0\tq1\tHow?\tWhy?\t1.0\n",
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))  # bytes: keep "\n" and the BOM exactly
    return path


@pytest.fixture
def glue_dir(tmp_path) -> Path:
    for relative, text in FILES.items():
        write(tmp_path / "glue" / relative, text)
    return tmp_path / "glue"


# ----------------------------------------------------------------------------------------------
# Readers on tiny self-made files


@pytest.mark.parametrize("task, split, expected", [
    ("CoLA", "train", [Example("0", 'He said "hello.', None, 1), Example("1", "The more books.", None, 0)]),
    ("CoLA", "test", [Example("0", "Bill whistled past the house.", None, None)]),
    ("SST-2", "train", [Example("0", "hide new secretions", None, 0), Example("1", '" contains wit', None, 1)]),
    ("SST-2", "test", [Example("0", "uneasy mishmash .", None, None)]),
    ("MRPC", "train", [Example("0", 'Amrozi said "hi.', "He said hi.", 1)]),
    ("MRPC", "test", [Example("0", "A b.", "C d.", None)]),
    ("QQP", "train", [Example("133273", "How?", "Why?", 1)]),
    ("QQP", "test", [Example("0", "How?", "Why?", None)]),
    ("STS-B", "train", [Example(str(i), f"a{i}", f"b{i}", s) for i, s in enumerate([5.0, 2.0, 2.4, 3.999, 4.0, 0.0])]),
    ("STS-B", "test", [Example("0", "A girl.", "A boy.", None)]),
    ("MNLI", "train", [Example("0", "p0", "h0", 1), Example("1", "p1", "h1", 0), Example("2", "p2", "h2", 2)]),
    ("MNLI", "dev", [Example("7", "p", "h", 0)]),
    ("MNLI", "test", [Example("0", "p", "h", None)]),
    ("QNLI", "train", [Example("0", "What?", "This.", 1), Example("1", "Who?", "Him.", 0)]),
    ("RTE", "train", [Example("0", "No WMD found.", "WMD found.", 1), Example("1", "Pope died.", "A pope died.", 0)]),
    ("RTE", "test", [Example("0", "A b.", "C d.", None)]),
    ("WNLI", "train", [Example("0", "I stuck a pin.", "It had a hole.", 1)]),
    ("Quora", "dev", [Example("q1", "How?", "Why?", 1)]),
])
def test_every_task_format_reads_into_examples(glue_dir, task, split, expected):
    """Oracle: hand-written Examples in THE label convention of the module docstring (text stripped,
    id = the index/id column or else the 0-based data row, label None for test files)."""
    assert read_glue(glue_dir, task, split) == expected, f"minbert.tasks.glue.read_glue({task!r}, {split!r})"


def test_snli_drops_rows_without_gold_label_and_counts_them_in_a_warning(glue_dir):
    """Oracle: hand-written Examples; SNLI's test file is labeled; a short row (no label2-5) is fine."""
    with pytest.warns(UserWarning, match=r"snli_1.0_test.txt: dropped 1 rows with gold_label '-'.*lines 4$"):
        examples = read_glue(glue_dir, "SNLI", "test")
    assert examples == [Example("9r1c", "Two women.", "Men.", 2), Example("8r1n", "A dog.", "A cat.", 1),
                        Example("7r2e", "A man.", "A human.", 0)]


def test_stsb_star_binarises_scores_and_drops_the_middle(glue_dir):
    """Oracle: the rule score <= 2 -> 0, score >= 4 -> 1, 2 < score < 4 dropped (ids keep the row)."""
    examples = read_glue(glue_dir, "STS-B*", "train")
    assert [(e.id, e.label) for e in examples] == [("0", 1), ("1", 0), ("4", 1), ("5", 0)]
    assert read_glue(glue_dir, "STS-B*", "test") == [Example("0", "A girl.", "A boy.", None)]


def test_labeled_false_ignores_labels_even_in_a_headerless_cola_file(glue_dir):
    """Oracle: the labeled read with every label set to None."""
    labeled = read_glue(glue_dir, "CoLA", "train")
    unlabeled = [Example(e.id, e.text, e.text2, None) for e in labeled]
    assert read_glue(glue_dir, "CoLA", "train", labeled=False) == unlabeled


def test_split_may_be_the_path_of_a_file_in_the_task_format(glue_dir, tmp_path):
    """Oracle: the same file read by split name. This is how the CS224N Quora samples are read."""
    path = write(tmp_path / "elsewhere" / "rte.tsv", FILES["RTE/train.tsv"])
    assert read_glue("unused", "RTE", str(path)) == read_glue(glue_dir, "RTE", "train")
    assert read_glue("unused", "Quora", str(glue_dir / "Quora/quora-dev.csv")) == read_glue(glue_dir, "Quora", "dev")


def test_windows_line_endings_and_blank_lines_are_accepted(tmp_path):
    """Oracle: the same Examples as the "\\n" file."""
    write(tmp_path / "RTE/train.tsv", FILES["RTE/train.tsv"].replace("\n", "\r\n") + "\r\n")
    write(tmp_path / "plain/RTE/train.tsv", FILES["RTE/train.tsv"])
    assert read_glue(tmp_path, "RTE", "train") == read_glue(tmp_path / "plain", "RTE", "train")


# ----------------------------------------------------------------------------------------------
# Errors: "path:line: found ..., expected ..."


@pytest.mark.parametrize("relative, text, task, expected", [
    ("RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\tc\tentailment\n", "RTE",
     r"train.tsv:3: found 5 tab-separated fields, expected 4 \(header"),
    ("RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\n", "RTE",
     r"train.tsv:2: found 3 tab-separated fields, expected 4"),
    ("CoLA/train.tsv", "gj04\t1\t\tfine.\ngj04\t1\tno tab before sentence.", "CoLA",
     r"train.tsv:2: found 3 tab-separated fields, expected 4 \(no header: source, label, orig_judgment, sentence\)"),
    ("RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentails\n", "RTE",
     r"train.tsv:2: found label 'entails', expected one of entailment, not_entailment"),
    ("MNLI/train.tsv", T.join(MNLI_COLUMNS + ["label1", "gold_label"]) + "\n" + mnli_row(0, "p", "h", "x", "Neutral"),
     "MNLI", r"train.tsv:2: found gold_label 'Neutral', expected one of entailment, neutral, contradiction"),
    ("SST-2/train.tsv", "sentence\tlabel\ngood\t1\nbad\t2\n", "SST-2",
     r"train.tsv:3: found label '2', expected one of 0, 1"),
    ("MRPC/train.tsv", BOM + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1.0\t1\t2\ta\tb\n", "MRPC",
     r"train.tsv:2: found Quality '1.0', expected one of 0, 1"),
    ("STS-B/train.tsv", STSB_COLUMNS + "\tscore\n" + stsb_row(0, "a", "b", "5.5"), "STS-B",
     r"train.tsv:2: found score '5.5', expected a number 0-5"),
    ("STS-B/train.tsv", STSB_COLUMNS + "\tscore\n" + stsb_row(0, "a", "b", "nan"), "STS-B*",
     r"train.tsv:2: found score 'nan', expected a number 0-5"),
    ("RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\t \tentailment\n", "RTE",
     r"train.tsv:2: found an empty sentence2, expected non-empty text"),
    ("CoLA/train.tsv", "gj04\t1\t\t\n", "CoLA", r"train.tsv:1: found an empty sentence, expected non-empty text"),
    ("QNLI/train.tsv", "index\tquestion\tlabel\n0\ta\tentailment\n", "QNLI",
     r"train.tsv:1: found header \['index', 'question', 'label'\], expected the columns .*\(missing \['sentence'\]\)"),
    ("RTE/train.tsv", "", "RTE", r"train.tsv:1: found an empty file, expected a tab-separated header"),
])
def test_malformed_file_error_names_path_line_and_expectation(tmp_path, relative, text, task, expected):
    """Oracle: the DataError message format of minbert.tasks.data ("path:line: found ..., expected ...")."""
    write(tmp_path / relative, text)
    with pytest.raises(DataError, match=expected):
        read_glue(tmp_path, task, "train")


def test_test_file_read_as_labeled_says_use_labeled_false(glue_dir):
    with pytest.raises(DataError, match=r"test.tsv:1: found header .* no 'label' column.*labeled=False"):
        read_glue(glue_dir, "RTE", "test", labeled=True)


def test_missing_file_error_says_how_to_download_and_how_to_point_at_it(tmp_path):
    with pytest.raises(DataError) as e:
        read_glue(tmp_path / "nowhere", "RTE", "dev")
    message = str(e.value)
    assert str(tmp_path / "nowhere" / "RTE" / "dev.tsv") in message
    assert f"python -m minbert download glue --tasks RTE --dest {tmp_path / 'nowhere'}" in message
    assert "--glue_dir" in message
    with pytest.raises(DataError, match="--tasks STS-B "):  # STS-B* lives in the STS-B folder
        read_glue(tmp_path, "STS-B*", "train")


def test_unknown_task_or_split_lists_the_choices(glue_dir):
    with pytest.raises(ValueError, match="unknown task 'rtf': expected one of CoLA, SST-2"):
        read_glue(glue_dir, "rtf", "train")   # names are case-insensitive ('rte' is RTE), so a real unknown one
    with pytest.raises(ValueError, match="unknown split 'validation' of MNLI: expected one of train, dev, dev_mis"):
        read_glue(glue_dir, "MNLI", "validation")


def test_empty_sentences_in_the_large_crowd_sourced_sets_are_kept_with_a_warning(tmp_path):
    """QQP train has two pairs with an empty question2 upstream: kept as '' (every test index must get a
    prediction, and HF datasets keeps them too), reported in one warning."""
    write(tmp_path / "QQP/train.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
          "5\t1\t2\tHow can I create an Android app?\t\t0\n6\t3\t4\tA?\tB?\t1\n")
    with pytest.warns(UserWarning, match=r"train.tsv: 1 rows have an empty sentence, kept as '': lines 2"):
        examples = read_glue(tmp_path, "QQP", "train")
    assert examples == [Example("5", "How can I create an Android app?", "", 0), Example("6", "A?", "B?", 1)]


def test_well_formed_files_raise_no_warning(glue_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for task, split in [("RTE", "train"), ("MNLI", "train"), ("QQP", "train"), ("CoLA", "train")]:
            read_glue(glue_dir, task, split)


# ----------------------------------------------------------------------------------------------
# The task table and cross-dataset label mapping


def test_task_table_matches_glue_reporting_and_categories():
    """Oracle: GLUE's reported metrics (Wang et al. 2018, table 1) and the category lists of the study."""
    metrics = {"CoLA": ("matthews",), "STS-B": ("pearson", "spearman")}
    metrics |= {t: ("accuracy",) for t in ("SST-2", "QNLI", "RTE", "WNLI", "MNLI", "SNLI")}
    metrics |= {t: ("f1", "accuracy") for t in ("MRPC", "QQP", "Quora", "STS-B*")}
    assert {t: i.metrics for t, i in TASKS.items()} == metrics
    categories = {t: i.category for t, i in TASKS.items()}
    assert {t for t, c in categories.items() if c == "nli"} == {"RTE", "MNLI", "QNLI", "SNLI"}
    assert {t for t, c in categories.items() if c == "similarity"} == {"QQP", "MRPC", "STS-B*", "Quora"}
    for name, info in TASKS.items():
        assert info.name == name
        assert info.num_labels == (1 if name == "STS-B" else 3 if name in ("MNLI", "SNLI") else 2)
        assert len(info.label_names) == (0 if name == "STS-B" else info.num_labels)
        assert set(info.unlabeled) <= set(info.splits)
        # the positive class of a category is the one that means entailment / similar
        if info.category == "nli":
            assert info.label_names[info.positive_class] == "entailment"
        elif info.category == "similarity":
            assert info.label_names[info.positive_class] in ("equivalent", "duplicate", "similar")
        else:
            assert info.positive_class is None


@pytest.mark.parametrize("task, labels, shared", [
    ("MNLI", [0, 1, 2], [1, 0, 0]),  # entailment, neutral, contradiction
    ("SNLI", [2, 0, 1], [0, 1, 0]),
    ("RTE", [0, 1], [1, 0]),  # entailment, not_entailment
    ("QNLI", torch.tensor([1, 0]), [0, 1]),
    ("MRPC", [0, 1], [0, 1]),
    ("QQP", [1, 1, 0], [1, 1, 0]),
    ("Quora", [0, 1], [0, 1]),
    ("STS-B*", [1, 0], [1, 0]),
])
def test_to_category_labels_maps_into_the_shared_binary_space(task, labels, shared):
    """Oracle: nli 1 = entailment, similarity 1 = paraphrase/similar (hand-written from the label names)."""
    assert to_category_labels(task, labels) == shared


def test_to_category_labels_rejects_tasks_without_a_category_and_bad_labels():
    for task in ("WNLI", "CoLA", "SST-2", "STS-B"):
        with pytest.raises(ValueError, match=f"{task} belongs to no category"):
            to_category_labels(task, [0])
    with pytest.raises(ValueError, match=r"MNLI labels must be class indices 0-2, found \[3\]"):
        to_category_labels("MNLI", [0, 3])
    with pytest.raises(ValueError, match=r"found \[None\]"):  # a test split has no labels
        to_category_labels("RTE", [None])


def test_category_prediction_compares_entailment_with_the_other_classes_together():
    """Oracle: hand-computed. p(entailment) = 0.45 is the argmax but loses to 0.30 + 0.25."""
    probs = torch.tensor([[0.45, 0.30, 0.25], [0.60, 0.20, 0.20], [0.10, 0.10, 0.80], [0.50, 0.25, 0.25]])  # (B, 3)
    torch.testing.assert_close(category_prediction("MNLI", probs), torch.tensor([0, 1, 0, 0]), rtol=0, atol=0)
    rte = torch.tensor([[0.7, 0.3], [0.3, 0.7], [0.5, 0.5]])  # (B, 2): entailment, not_entailment
    torch.testing.assert_close(category_prediction("RTE", rte), torch.tensor([1, 0, 0]), rtol=0, atol=0)


@pytest.mark.parametrize("task", ["RTE", "QNLI", "MRPC", "QQP", "Quora", "STS-B*"])
def test_category_prediction_of_binary_models_is_the_mapped_argmax(task):
    """Oracle (property): for a 2-class model, category_prediction == to_category_labels(argmax)."""
    g = torch.Generator().manual_seed(0)
    probs = torch.randn(64, 2, generator=g).softmax(dim=-1)  # (B, 2)
    expected = torch.tensor(to_category_labels(task, probs.argmax(dim=-1)))
    torch.testing.assert_close(category_prediction(task, probs), expected, rtol=0, atol=0)


def test_category_prediction_rejects_wrong_shapes_logits_and_uncategorised_tasks():
    with pytest.raises(ValueError, match=r"expected probs \(B, K\) with K = 3 for MNLI, got \(4, 2\)"):
        category_prediction("MNLI", torch.full((4, 2), 0.5))
    for logits in ([[2.0, 0.5]], [[2.0, -1.0]]):  # the second sums to 1 but is no distribution
        with pytest.raises(ValueError, match="pass logits.softmax"):
            category_prediction("RTE", torch.tensor(logits))
    with pytest.raises(ValueError, match="WNLI belongs to no category"):
        category_prediction("WNLI", torch.full((1, 2), 0.5))


# ----------------------------------------------------------------------------------------------
# Real GLUE files (read in place, never copied)

# rows of each file, from shared/data/MANIFEST.md; STS-B* counted separately (awk: score <= 2 or >= 4)
REAL_COUNTS = [("CoLA", "train", 8551), ("CoLA", "dev", 1043), ("CoLA", "test", 1063),
               ("MRPC", "train", 3668), ("MRPC", "dev", 408), ("MRPC", "test", 1725),
               ("QNLI", "dev", 5463), ("QNLI", "test", 5463),
               ("RTE", "train", 2490), ("RTE", "dev", 277), ("RTE", "test", 3000),
               ("SST-2", "train", 67349), ("SST-2", "dev", 872), ("SST-2", "test", 1821),
               ("STS-B", "train", 5749), ("STS-B", "dev", 1500), ("STS-B", "test", 1379),
               ("WNLI", "train", 635), ("WNLI", "dev", 71), ("WNLI", "test", 146),
               ("STS-B*", "train", 1967 + 1406), ("STS-B*", "dev", 647 + 264)]


def tsv_rows(path: Path) -> int:
    """Oracle for a fixture's row count: Python's csv module, GLUE's quoting (none), header excluded."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        return sum(1 for _ in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)) - 1


# GLUE's label order (the label names of its processors, index = class): the reader's class index of each row
GLUE_LABEL_ORDER = {"QNLI": ["entailment", "not_entailment"], "SST-2": ["0", "1"], "WNLI": ["0", "1"],
                    "RTE": ["entailment", "not_entailment"], "MRPC": ["0", "1"]}


def oracle_labels(path: Path, order: list[str]) -> list[int]:
    """Each row's label column, looked up in GLUE's order, read with the csv module alone."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    column = rows[0].index("Quality" if "Quality" in rows[0] else "label")
    return [order.index(r[column]) for r in rows[1:] if r]


@pytest.mark.parametrize("task, split, count", REAL_COUNTS)
def test_real_glue_files_load_with_official_counts(task, split, count):
    """The full files give GLUE's official counts; where a fresh clone lacks them (QNLI, SST-2, WNLI) the
    fixture slices of the same files (tests/fixtures/glue) give the rows the csv module counts."""
    folder, whole = glue_files(task)
    if not whole:
        count = tsv_rows(folder / task / f"{split}.tsv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real files need no skipping and no excuses
        examples = read_glue(folder, task, split)
    assert len(examples) == count, \
        f"minbert.tasks.glue.read_glue({task!r}, {split!r}) on {folder}: expected {count} rows, got {len(examples)}"
    if task in GLUE_LABEL_ORDER and split != "test":
        want = oracle_labels(folder / task / f"{split}.tsv", GLUE_LABEL_ORDER[task])
        got = [e.label for e in examples]
        assert got == want, (f"minbert.tasks.glue.read_glue({task!r}, {split!r}): labels {got[:8]}..., expected {want[:8]}... "
                             f"(GLUE's label order {GLUE_LABEL_ORDER[task]}; a label shifted or swapped by the reader?)")
    labels = {e.label for e in examples}
    if split == "test":
        assert labels == {None}
    elif task == "STS-B":
        assert min(labels) == 0 and max(labels) == 5
    else:
        assert labels == set(range(TASKS[task].num_labels)), f"{task} {split}: labels {labels}"
    assert all(e.text and (e.text2 is None) == (task in ("CoLA", "SST-2")) for e in examples)


@needs_cs224n("quora-dev-sample.csv")
def test_real_quora_sample_reads_as_the_quora_task_by_path(tmp_path):
    examples = read_glue(tmp_path, "Quora", str(SHARED_CS224N / "quora-dev-sample.csv"))
    assert len(examples) == 2000 and {e.label for e in examples} == {0, 1}


# ----------------------------------------------------------------------------------------------
# MRPC: GLUE's split of the Microsoft files by dev ids


def msr_file(rows: list[str], crlf: bool = True) -> str:
    """A Microsoft release file: BOM, header, CRLF line ends."""
    end = "\r\n" if crlf else "\n"
    return end.join([BOM + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"] + rows) + end


def test_format_mrpc_splits_train_by_dev_ids_like_glue(tmp_path):
    """Oracle: hand-written output of GLUE's download_glue_data.py procedure (BOM header kept, rows
    stripped, "\\n" line ends, test numbered from 0 without its label)."""
    from minbert.tools.download import format_mrpc

    rows = ["1\t1\t2\tA a.\tA b. ", "0\t3\t4\tB a.\tB b.", "1\t5\t6\tC a.\tC b."]  # trailing space: stripped
    write(tmp_path / "msr_paraphrase_train.txt", msr_file(rows))
    write(tmp_path / "msr_paraphrase_test.txt", msr_file(["1\t7\t8\tD a.\tD b.", "0\t9\t10\tE \"a.\tE b."]))
    write(tmp_path / "dev_ids.tsv", "3\t4\n")
    format_mrpc(str(tmp_path))
    header = BOM + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    assert (tmp_path / "train.tsv").read_bytes().decode() == header + "1\t1\t2\tA a.\tA b.\n1\t5\t6\tC a.\tC b.\n"
    assert (tmp_path / "dev.tsv").read_bytes().decode() == header + "0\t3\t4\tB a.\tB b.\n"
    assert (tmp_path / "test.tsv").read_bytes().decode() == (
        "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t7\t8\tD a.\tD b.\n1\t9\t10\tE \"a.\tE b.\n")
    assert [e.id for e in read_glue(tmp_path, "MRPC", str(tmp_path / "dev.tsv"))] == ["0"]


def test_format_mrpc_rejects_a_row_with_the_wrong_number_of_fields(tmp_path):
    from minbert.tools.download import format_mrpc

    write(tmp_path / "msr_paraphrase_train.txt", msr_file(["1\t1\t2\tA a."]))
    write(tmp_path / "msr_paraphrase_test.txt", msr_file([]))
    write(tmp_path / "dev_ids.tsv", "")
    with pytest.raises(DataError, match=r"msr_paraphrase_train.txt:2: found 4 tab-separated fields, expected 5"):
        format_mrpc(str(tmp_path))


@needs_glue("MRPC")
def test_format_mrpc_reproduces_the_real_glue_files_byte_for_byte(tmp_path):
    """Oracle: the real MRPC train/dev/test.tsv. We rebuild Microsoft-style sources from them (train and
    dev rows interleaved, CRLF, test with a label column) and split again."""
    from minbert.tools.download import format_mrpc

    train, dev, test = ((real_glue_dir("MRPC") / "MRPC" / f"{s}.tsv").read_bytes().decode() for s in ("train", "dev", "test"))
    train_rows, dev_rows = train.splitlines()[1:], dev.splitlines()[1:]
    merged = []
    for i in range(max(len(train_rows), len(dev_rows))):  # any order that keeps each file's order
        merged += train_rows[i:i + 1] + dev_rows[i:i + 1]
    write(tmp_path / "msr_paraphrase_train.txt", msr_file(merged))
    labeled_test = ["1\t" + row.split("\t", 1)[1] for row in test.splitlines()[1:]]  # index -> a Quality label
    write(tmp_path / "msr_paraphrase_test.txt", msr_file(labeled_test))
    write(tmp_path / "dev_ids.tsv", "".join("\t".join(row.split("\t")[1:3]) + "\n" for row in dev_rows))
    format_mrpc(str(tmp_path))
    for split, real in [("train", train), ("dev", dev), ("test", test)]:
        made = (tmp_path / f"{split}.tsv").read_bytes().decode()
        assert made == real, f"minbert.tools.download.format_mrpc: {split}.tsv differs from the real file"


# ----------------------------------------------------------------------------------------------
# python -m minbert download glue (no network: download_file is replaced)


def zip_bytes(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return buffer.getvalue()


def fake_server() -> dict[str, bytes]:
    """What each URL serves: tiny zips laid out like GLUE's (QQP-clean.zip holds QQP/, QNLIv2.zip QNLI/)."""
    def task_zip(folder, names=("train.tsv", "dev.tsv", "test.tsv"), source=None):
        source = source or folder
        return zip_bytes({f"{folder}/{n}": FILES.get(f"{source}/{n}", FILES.get(f"{source}/train.tsv", ""))
                          for n in names} | {f"{folder}/original/readme.txt": "x"})

    base = "https://dl.fbaipublicfiles.com/glue/data/"
    served = {base + f"{name}.zip": task_zip(folder) for name, folder in [
        ("CoLA", "CoLA"), ("SST-2", "SST-2"), ("QQP-clean", "QQP"), ("STS-B", "STS-B"), ("QNLIv2", "QNLI"),
        ("RTE", "RTE"), ("WNLI", "WNLI")]}
    served[base + "MNLI.zip"] = task_zip("MNLI", ["train.tsv", "dev_matched.tsv", "dev_mismatched.tsv",
                                                  "test_matched.tsv", "test_mismatched.tsv"])
    served["https://nlp.stanford.edu/projects/snli/snli_1.0.zip"] = zip_bytes(
        {f"snli_1.0/snli_1.0_{s}.txt": FILES["SNLI/snli_1.0/snli_1.0_test.txt"] for s in ("train", "dev", "test")}
        | {"__MACOSX/snli_1.0/._snli_1.0_train.txt": "resource fork"})
    senteval = "https://dl.fbaipublicfiles.com/senteval/senteval_data/"
    served[senteval + "msr_paraphrase_train.txt"] = msr_file(["1\t1\t2\tA a.\tA b.", "0\t3\t4\tB a.\tB b."]).encode()
    served[senteval + "msr_paraphrase_test.txt"] = msr_file(["1\t7\t8\tD a.\tD b."]).encode()
    served[base + "mrpc_dev_ids.tsv"] = b"3\t4\n"
    cs224n = "https://raw.githubusercontent.com/gpoesia/minbert-default-final-project/main/data/"
    for name in ("quora-train.csv", "quora-dev.csv", "quora-test-student.csv"):
        served[cs224n + name] = FILES["Quora/quora-dev.csv"].encode()
    return served


@pytest.fixture
def fake_download(monkeypatch):
    import minbert.tools.download as download

    served, calls = fake_server(), []

    def fake_download_file(url, dest, desc):
        calls.append(url)
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        Path(dest).write_bytes(served[url])  # KeyError: a URL the real servers do not have
        return Path(dest)

    monkeypatch.setattr(download, "download_file", fake_download_file)
    return download, calls


def test_download_glue_all_builds_the_glue_data_layout_and_skips_existing(tmp_path, fake_download):
    """Oracle: the official URLs, GLUE's folder layout, and read_glue reading every task back."""
    download, calls = fake_download
    dest = tmp_path / "glue_data"
    download.main(["glue", "--dest", str(dest)])  # --tasks defaults to all
    assert sorted(calls) == sorted(fake_server()), "minbert.tools.download.download_glue: every URL once"
    for task, info in TASKS.items():
        for split in info.splits:
            assert (dest / info.folder / info.splits[split]).is_file(), f"{task} {split} missing"
    assert read_glue(dest, "QNLI", "train")[0].label == 1  # QNLIv2.zip -> QNLI/
    assert read_glue(dest, "QQP", "train") == [Example("133273", "How?", "Why?", 1)]  # QQP-clean.zip -> QQP/
    with pytest.warns(UserWarning, match="dropped 1 rows"):
        assert len(read_glue(dest, "SNLI", "train")) == 3
    assert read_glue(dest, "MRPC", "dev") == [Example("0", "B a.", "B b.", 0)]
    assert read_glue(dest, "Quora", "test", labeled=True)[0].label == 1
    assert not list(dest.glob("*.zip")) and not list(dest.glob(".unzip*")) and not (dest / "SNLI/__MACOSX").exists()
    calls.clear()
    download.main(["glue", "--tasks", "all", "--dest", str(dest)])  # everything is there: nothing fetched
    assert calls == []


def test_download_glue_fetches_only_the_tasks_asked_for_in_any_case(tmp_path, fake_download):
    download, calls = fake_download
    download.main(["glue", "--tasks", "rte,STS-B*,mrpc", "--dest", str(tmp_path)])
    base = "https://dl.fbaipublicfiles.com/glue/data/"
    assert set(calls) == {base + "RTE.zip", base + "STS-B.zip", base + "mrpc_dev_ids.tsv",
                          "https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_train.txt",
                          "https://dl.fbaipublicfiles.com/senteval/senteval_data/msr_paraphrase_test.txt"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MRPC", "RTE", "STS-B"]


def test_download_glue_rejects_unknown_task_names(tmp_path, fake_download, capsys):
    download, calls = fake_download
    with pytest.raises(SystemExit):
        download.main(["glue", "--tasks", "RTE,GLUE", "--dest", str(tmp_path)])
    assert "unknown task(s) ['GLUE']: choose from all, CoLA" in capsys.readouterr().err
    assert calls == []


def test_task_names_are_case_insensitive(glue_dir):
    """Oracle: TASKS' spelling; Hugging Face run_glue users type lowercase (`--task rte`)."""
    from minbert.tasks.glue import task_name

    assert [task_name(t) for t in ("rte", "Mrpc", "sts-b*", "SST-2", "nope")] == ["RTE", "MRPC", "STS-B*", "SST-2", "nope"]
    assert read_glue(glue_dir, "rte", "train") == read_glue(glue_dir, "RTE", "train")


def test_a_glue_dir_typo_gets_did_you_mean(glue_dir):
    typo = str(glue_dir) + "x"
    with pytest.raises(DataError, match=f"Did you mean --glue_dir {glue_dir}"):
        read_glue(typo, "RTE", "train")


# ----------------------------------------------------------------------------------------------
# Edges found by mutation testing (bench/mutation.py): each test below failed on a changed glue.py


def test_glue_layout_split_files_are_train_dev_test_tsv():
    """Oracle: GLUE's glue_data layout (TASK/train.tsv, dev.tsv, test.tsv; MNLI: dev_matched.tsv ...). TASKS is
    built once at import, so the helper that spells the layout is checked where it is called as well."""
    from minbert.tasks.glue import _splits
    assert _splits() == {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    assert _splits(extra="x.tsv") == {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv", "extra": "x.tsv"}
    for task in ("CoLA", "SST-2", "MRPC", "QQP", "STS-B", "QNLI", "RTE", "WNLI", "STS-B*"):
        assert TASKS[task].splits == _splits(), f"TASKS[{task!r}].splits: expected GLUE's train/dev/test.tsv"


def test_a_blank_line_in_the_middle_of_a_file_is_skipped_not_the_end(tmp_path):
    """Oracle: the file's rows. A blank line between rows is skipped; the rows after it are still read."""
    write(tmp_path / "RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n\n"
          "1\tc\td\tnot_entailment\n")
    assert read_glue(tmp_path, "RTE", "train") == [Example("0", "a", "b", 0), Example("1", "c", "d", 1)]


def test_a_file_with_a_header_and_no_rows_names_the_file(tmp_path):
    write(tmp_path / "RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n")
    with pytest.raises(DataError, match=r"train.tsv: found no data rows, expected at least one example"):
        read_glue(tmp_path, "RTE", "train")


def test_a_file_that_is_not_utf8_names_the_file(tmp_path):
    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE/train.tsv").write_bytes(b"index\tsentence1\tsentence2\tlabel\n0\t\xff\xfe\tb\tentailment\n")
    with pytest.raises(DataError, match=r"train.tsv: found bytes that are not UTF-8 text \(byte \d+"):
        read_glue(tmp_path, "RTE", "train")


def test_an_unparseable_stsb_score_is_a_data_error(tmp_path):
    """'abc' is no number: a DataError with path:line, not a TypeError from comparing None with 0."""
    write(tmp_path / "STS-B/train.tsv", STSB_COLUMNS + "\tscore\n" + stsb_row(0, "a", "b", "abc"))
    with pytest.raises(DataError, match=r"train.tsv:2: found score 'abc', expected a number 0-5"):
        read_glue(tmp_path, "STS-B", "train")


def test_mnli_rows_without_gold_label_are_dropped_with_a_warning(tmp_path):
    """Oracle: the docstring (a raw MultiNLI file marks no-majority rows with '-', as SNLI does)."""
    write(tmp_path / "MNLI/train.tsv", T.join(MNLI_COLUMNS + ["label1", "gold_label"]) + "\n"
          + mnli_row(0, "p0", "h0", "neutral", "neutral") + mnli_row(1, "p1", "h1", "neutral", "-"))
    with pytest.warns(UserWarning, match=r"dropped 1 rows with gold_label '-'.*lines 3"):
        examples = read_glue(tmp_path, "MNLI", "train")
    assert examples == [Example("0", "p0", "h0", 1)]


def test_data_warnings_point_at_the_callers_line(tmp_path):
    """A warning is reported at the line that called read_glue (stacklevel), not inside glue.py, so a
    user sees which of their reads dropped or kept rows."""
    write(tmp_path / "MNLI/train.tsv", T.join(MNLI_COLUMNS + ["label1", "gold_label"]) + "\n"
          + mnli_row(0, "p0", "h0", "neutral", "-") + mnli_row(1, "p1", "", "neutral", "neutral"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_glue(tmp_path, "MNLI", "train")
    assert len(caught) == 2, [str(w.message) for w in caught]
    for w in caught:
        assert w.filename == __file__, f"warning {str(w.message)[:60]!r} points at {w.filename}:{w.lineno}, not the caller"


@pytest.mark.parametrize("n, shown", [(20, ", ".join(str(i) for i in range(2, 22))),
                                      (21, ", ".join(str(i) for i in range(2, 22)) + ", ...")])
def test_warnings_list_at_most_20_lines_then_an_ellipsis(tmp_path, n, shown):
    """Oracle: hand-written line lists. 20 empty rows: all 20 lines (2-21); 21: the first 20, then ', ...'."""
    write(tmp_path / "QQP/train.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
          + "".join(f"{i}\t1\t2\tq?\t\t0\n" for i in range(n)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_glue(tmp_path, "QQP", "train")
    assert str(caught[0].message) == f"{tmp_path / 'QQP/train.tsv'}: {n} rows have an empty sentence, kept as '': lines {shown}"


def test_trailing_columns_may_be_missing_only_in_snli(tmp_path):
    """Oracle: the docstring. SNLI rows may lack the annotator columns label2-label5, nothing else may be
    missing; an MNLI dev file has label1-label5 too, but there a short row is an error."""
    write(tmp_path / "SNLI/snli_1.0/snli_1.0_train.txt", SNLI_HEADER + "neutral\t( a )\t( b )\t(ROOT a)\tA dog.\n")
    with pytest.raises(DataError, match=r"snli_1.0_train.txt:2: found 5 tab-separated fields, expected 14"):
        read_glue(tmp_path, "SNLI", "train")
    header = T.join(MNLI_COLUMNS + ["label1", "label2", "label3", "label4", "label5", "gold_label"])
    write(tmp_path / "MNLI/dev_matched.tsv", header + "\n" + mnli_row(7, "p", "h", "entailment", "entailment"))
    with pytest.raises(DataError, match=r"dev_matched.tsv:2: found 12 tab-separated fields, expected 16"):
        read_glue(tmp_path, "MNLI", "dev")


def test_quora_test_split_reads_without_labels(tmp_path):
    """TASKS['Quora'].unlabeled: the CS224N test file has no is_duplicate column; its labels are None."""
    write(tmp_path / "Quora/quora-test-student.csv", "\tid\tsentence1\tsentence2\n0\tq1\tHow?\tWhy?\n")
    assert read_glue(tmp_path, "Quora", "test") == [Example("q1", "How?", "Why?", None)]


def test_glue_dir_typos_with_a_trailing_slash_or_no_parent_get_did_you_mean(tmp_path, monkeypatch):
    write(tmp_path / "glue_data/RTE/train.tsv", FILES["RTE/train.tsv"])
    with pytest.raises(DataError, match=f"Did you mean --glue_dir {tmp_path / 'glue_data'}\\?"):
        read_glue(f"{tmp_path}/glue_dat/", "RTE", "train")   # the shipped data/glue_data has the same name: the sibling wins
    monkeypatch.chdir(tmp_path)   # a bare folder name: its siblings are those of the current directory
    with pytest.raises(DataError, match=r"Did you mean --glue_dir \./glue_data\?"):
        read_glue("glue_dat", "RTE", "train")


def test_glue_dir_suggestions_need_a_close_name_and_survive_a_missing_parent(tmp_path):
    """difflib ratio of 'glu_dxx' to 'glue_data' is 0.625: below the 0.75 cutoff, so no suggestion. A glue_dir
    whose parent does not exist either still gets the download advice, not a FileNotFoundError."""
    write(tmp_path / "glue_data/RTE/train.tsv", FILES["RTE/train.tsv"])
    with pytest.raises(DataError) as e:
        read_glue(tmp_path / "glu_dxx", "RTE", "train")
    assert "Did you mean" not in str(e.value), f"a far name got a suggestion: {e.value}"
    with pytest.raises(DataError, match="file not found"):
        read_glue(tmp_path / "no" / "such" / "glue", "RTE", "train")


def test_category_errors_list_the_tasks_that_have_one():
    with pytest.raises(ValueError, match="mapping exists only for MRPC, QQP, MNLI, QNLI, RTE, SNLI, STS-B\\*, Quora$"):
        to_category_labels("CoLA", [0])


def test_to_category_labels_of_a_tensor_reports_bad_labels_as_numbers():
    """A tensor of labels is read as numbers: a bad one is shown as 3, not tensor(3); at most five are shown."""
    with pytest.raises(ValueError, match=r"found \[3\]$"):
        to_category_labels("MNLI", torch.tensor([0, 3, 1]))
    with pytest.raises(ValueError, match=r"found \[3, 4, 5, 6, 7\]$"):
        to_category_labels("MNLI", [3, 4, 5, 6, 7, 8])


def test_category_prediction_accepts_zeros_and_rounding_but_not_other_sums():
    """Probabilities may be exactly 0 (one-hot) and rows may miss 1 by float rounding (atol 1e-3); a row summing
    to 1.5 is refused, with the hint to pass softmax outputs."""
    torch.testing.assert_close(category_prediction("MNLI", torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])),
                               torch.tensor([1, 0]), rtol=0, atol=0)
    torch.testing.assert_close(category_prediction("RTE", torch.tensor([[0.6, 0.3995]])), torch.tensor([1]), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"^category_prediction: probs must be >= 0 with rows summing to 1; "
                                         r"pass logits.softmax\(dim=-1\), not logits$"):
        category_prediction("RTE", torch.tensor([[1.0, 0.5]]))


def glue_parser():
    import argparse
    from minbert.tasks import glue
    parser = argparse.ArgumentParser()
    glue.add_args(parser)
    return parser, glue


def test_glue_flags_defaults_and_eval_tasks_in_any_case():
    parser, glue = glue_parser()
    args = parser.parse_args(["--task", "rte"])
    glue.check_args(args, parser)
    assert (args.task, args.glue_dir, args.eval_tasks) == ("RTE", "data/glue_data", []), vars(args)
    args = parser.parse_args(["--task", "mnli", "--eval_tasks", "qnli,RTE,"])
    glue.check_args(args, parser)
    assert (args.task, args.eval_tasks) == ("MNLI", ["QNLI", "RTE"]), vars(args)


@pytest.mark.parametrize("argv, message", [
    ([], "the following arguments are required: --task"),
    (["--task", "BoolQ"], "argument --task: invalid choice: 'BoolQ'"),
    (["--task", "RTE", "--eval_tasks", "MRPC"],
     r"--eval_tasks MRPC: must be a task of RTE's category \(nli\); candidates: \['MNLI', 'QNLI', 'RTE', 'SNLI'\]"),
    (["--task", "RTE", "--eval_tasks", "WNLI"], r"--eval_tasks WNLI: must be a task of RTE's category"),
    (["--task", "RTE", "--eval_tasks", "BoolQ"], r"--eval_tasks BoolQ: must be a task of RTE's category"),
    (["--task", "CoLA", "--eval_tasks", "CoLA"], r"--eval_tasks CoLA: must be a task of CoLA's category \(None\); candidates: \[\]"),
])
def test_glue_flags_refuse_unknown_and_cross_category_tasks(argv, message, capsys):
    parser, glue = glue_parser()
    with pytest.raises(SystemExit):
        glue.check_args(parser.parse_args(argv), parser)
    import re
    assert re.search(message, capsys.readouterr().err), capsys.readouterr().err


def test_a_missing_subfolder_is_not_answered_with_its_parent(tmp_path):
    """glue_data/X does not exist: its siblings are glue_data's task folders, none close to 'X', so no suggestion;
    stripping more than the trailing '/' (the 'X' too) would wrongly suggest glue_data itself."""
    write(tmp_path / "glue_data/RTE/train.tsv", FILES["RTE/train.tsv"])
    with pytest.raises(DataError) as e:
        read_glue(tmp_path / "glue_data" / "X", "RTE", "train")
    assert "Did you mean" not in str(e.value), f"suggested a folder for glue_data/X: {e.value}"


def test_a_missing_folder_is_compared_with_its_own_siblings_only(tmp_path):
    """a/XX/ is missing and a/ is empty: no suggestion, although a/'s own sibling XXX is close to 'XX'."""
    (tmp_path / "a").mkdir()
    (tmp_path / "XXX").mkdir()
    with pytest.raises(DataError) as e:
        read_glue(f"{tmp_path}/a/XX/", "RTE", "train")
    assert "Did you mean" not in str(e.value), f"suggested a folder outside a/: {e.value}"
