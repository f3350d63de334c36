"""
GLUE (Wang et al. 2018, arXiv:1804.07461) and SNLI (Bowman et al. 2015, arXiv:1508.05326) data:
one table of tasks, file readers, and the label mapping used for cross-dataset evaluation.

1. `TASKS` describes every task: number of labels, the metrics GLUE reports, its category
   (for cross-dataset studies), and where its split files live under `glue_dir`.
   Task names are accepted in any case (`task_name`: 'rte' -> 'RTE'), as Hugging Face run_glue users type them.
2. `read_glue(glue_dir, task, split)` returns `minbert.tasks.data.Example`s. Anything malformed raises a
   `DataError` that says "path:line: what was found, what was expected".
3. `to_category_labels` and `category_prediction` map gold labels and a model's class
   probabilities into the binary label space its category shares, so a model trained on MNLI can be
   scored on RTE, or one trained on QQP on MRPC.

Label convention (the class index a model predicts; `TASKS[task].label_names` spells it out):

    CoLA    0 unacceptable, 1 acceptable          (as in the file)
    SST-2   0 negative, 1 positive                (as in the file)
    MRPC    0 not paraphrase, 1 paraphrase        (column Quality)
    QQP     0 not duplicate, 1 duplicate          (column is_duplicate)
    Quora   0 not duplicate, 1 duplicate          (CS224N file, is_duplicate 0.0/1.0)
    STS-B   float score 0-5                       (regression, num_labels 1)
    STS-B*  0 dissimilar (score <= 2), 1 similar (score >= 4); pairs in between are dropped
    RTE     0 entailment, 1 not_entailment        (file holds the words)
    QNLI    0 entailment, 1 not_entailment        (file holds the words)
    MNLI    0 entailment, 1 neutral, 2 contradiction
    SNLI    0 entailment, 1 neutral, 2 contradiction
    WNLI    0 not_entailment, 1 entailment        (as in the file)

This is the order of Hugging Face `datasets` (glue, snli), so entailment is class 0 in every NLI
task but WNLI. Note that BERT's run_classifier.py (and transformers' old glue processors) order
MNLI as contradiction, entailment, neutral: checkpoints fine-tuned there need their head permuted.

Shared binary space of a category (what `to_category_labels` returns):
    "nli":        1 = entailment, 0 = not entailment (neutral and contradiction both map to 0)
    "similarity": 1 = paraphrase / duplicate / similar, 0 = not
WNLI is in no category: its train and dev sets are adversarial (the same premise with opposite
labels), so transfer numbers on it mean nothing; GLUE baselines score the majority class.

Layout of `glue_dir` (GLUE's `glue_data/`, made by `python -m minbert download glue`):
    CoLA/ SST-2/ MRPC/ QQP/ STS-B/ MNLI/ QNLI/ RTE/ WNLI/   train.tsv, dev.tsv, test.tsv (MNLI: see TASKS)
    SNLI/snli_1.0/snli_1.0_{train,dev,test}.txt              the Stanford release, unchanged
    Quora/quora-{train,dev,test-student}.csv                 the CS224N files (read with read_quora)
`split` may also be the path of any file in the task's format, e.g. the CS224N
quora-dev-sample.csv: read_glue(glue_dir, "Quora", "path/to/quora-dev-sample.csv").

File quirks handled: tab-separated, read with csv.QUOTE_NONE (sentences hold unbalanced '"');
CoLA train/dev have no header (test has one); MRPC train/dev start with a UTF-8 BOM; the last line
may lack its newline; test files have an index column and no label (label None); SNLI rows whose
gold_label is '-' (no annotator majority; also MNLI, should a raw MultiNLI file be used) are dropped
and counted in a warning; SNLI train rows may lack the unused annotator columns label2-label5.
QQP, MNLI and SNLI are large crowd-sourced sets with a little upstream noise (QQP train has two
pairs with an empty question2): there an empty sentence is kept as "" and listed in a warning,
while in the other tasks it is a DataError.

Deliberately left out: the diagnostic set (AX), SNLI's .jsonl files, GLUE submission files,
and any text normalisation (the WordPiece tokenizer lowercases and splits punctuation itself).
"""

import csv
import difflib
import math
import os
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import torch

from minbert.tasks.data import DataError, Example, read_quora

DEFAULT_GLUE_DIR = "data/glue_data"  # where `python -m minbert download glue` saves the tasks


@dataclass
class TaskInfo:
    name: str
    num_labels: int  # 2 or 3 classes; 1 means regression (STS-B)
    metrics: tuple[str, ...]  # what GLUE reports, first one is the headline (minbert.tasks.metrics names)
    category: str | None  # "nli", "similarity" or None: which tasks share a binary label space
    splits: dict[str, str]  # split name -> file path under glue_dir/folder
    folder: str  # directory under glue_dir (STS-B* reads STS-B/)
    label_names: tuple[str, ...]  # meaning of each class index; () for the STS-B score
    unlabeled: tuple[str, ...]  # splits whose files carry no labels (read with labeled=False)
    positive_class: int | None  # the class that means entailment / similar in the category space


def _splits(**extra) -> dict[str, str]:
    return {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv", **extra}


_NLI3 = ("entailment", "neutral", "contradiction")
_MNLI_SPLITS = {"train": "train.tsv", "dev": "dev_matched.tsv", "dev_mismatched": "dev_mismatched.tsv",
                "test": "test_matched.tsv", "test_mismatched": "test_mismatched.tsv"}
_SNLI_SPLITS = {s: f"snli_1.0/snli_1.0_{s}.txt" for s in ("train", "dev", "test")}
_QUORA_SPLITS = {"train": "quora-train.csv", "dev": "quora-dev.csv", "test": "quora-test-student.csv"}
_ACC, _F1_ACC = ("accuracy",), ("f1", "accuracy")

# name, num_labels, metrics, category, splits, folder, label_names, unlabeled splits, positive_class
TASKS: dict[str, TaskInfo] = {t.name: t for t in [
    TaskInfo("CoLA", 2, ("matthews",), None, _splits(), "CoLA", ("unacceptable", "acceptable"), ("test",), None),
    TaskInfo("SST-2", 2, _ACC, None, _splits(), "SST-2", ("negative", "positive"), ("test",), None),
    TaskInfo("MRPC", 2, _F1_ACC, "similarity", _splits(), "MRPC", ("not_equivalent", "equivalent"), ("test",), 1),
    TaskInfo("QQP", 2, _F1_ACC, "similarity", _splits(), "QQP", ("not_duplicate", "duplicate"), ("test",), 1),
    TaskInfo("STS-B", 1, ("pearson", "spearman"), None, _splits(), "STS-B", (), ("test",), None),
    TaskInfo("MNLI", 3, _ACC, "nli", _MNLI_SPLITS, "MNLI", _NLI3, ("test", "test_mismatched"), 0),
    TaskInfo("QNLI", 2, _ACC, "nli", _splits(), "QNLI", ("entailment", "not_entailment"), ("test",), 0),
    TaskInfo("RTE", 2, _ACC, "nli", _splits(), "RTE", ("entailment", "not_entailment"), ("test",), 0),
    TaskInfo("WNLI", 2, _ACC, None, _splits(), "WNLI", ("not_entailment", "entailment"), ("test",), None),
    TaskInfo("SNLI", 3, _ACC, "nli", _SNLI_SPLITS, "SNLI", _NLI3, (), 0),  # its test file has labels
    TaskInfo("STS-B*", 2, _F1_ACC, "similarity", _splits(), "STS-B", ("dissimilar", "similar"), ("test",), 1),
    TaskInfo("Quora", 2, _F1_ACC, "similarity", _QUORA_SPLITS, "Quora", ("not_duplicate", "duplicate"), ("test",), 1),
]}


class _Format(NamedTuple):
    text: str  # header name of the first sentence
    text2: str | None  # second sentence of pair tasks
    label: str  # label column (absent from test files)
    kind: str  # how the label is written: "index" ("0"/"1"), "name" (a word of label_names) or "score"


# one file format per folder; STS-B* reads the STS-B files, Quora goes to minbert.tasks.data.read_quora
_FORMATS = {
    "CoLA": _Format("sentence", None, "label", "index"),
    "SST-2": _Format("sentence", None, "label", "index"),
    "MRPC": _Format("#1 String", "#2 String", "Quality", "index"),
    "QQP": _Format("question1", "question2", "is_duplicate", "index"),
    "STS-B": _Format("sentence1", "sentence2", "score", "score"),
    "MNLI": _Format("sentence1", "sentence2", "gold_label", "name"),
    "QNLI": _Format("question", "sentence", "label", "name"),
    "RTE": _Format("sentence1", "sentence2", "label", "name"),
    "WNLI": _Format("sentence1", "sentence2", "label", "index"),
    "SNLI": _Format("sentence1", "sentence2", "gold_label", "name"),
}
COLA_COLUMNS = ["source", "label", "orig_judgment", "sentence"]  # CoLA train/dev have no header line
NOISY_TEXT = ("QQP", "MNLI", "SNLI")  # empty sentences are kept (with a warning), not an error
SNLI_OPTIONAL = ("label2", "label3", "label4", "label5")  # trailing SNLI columns that may be missing


def task_name(text: str) -> str:
    """The TASKS spelling of a task name given in any case ('rte' -> 'RTE', 'sts-b*' -> 'STS-B*'), as Hugging
    Face run_glue users type them; an unknown name comes back unchanged (argparse `choices` then lists the
    valid ones). Usable as an argparse type=."""
    return {t.lower(): t for t in TASKS}.get(text.strip().lower(), text)


def is_pair_task(task: str) -> bool:
    """True for the tasks whose examples are sentence pairs (all but CoLA and SST-2)."""
    task = task_name(task)
    return task == "Quora" or _FORMATS[TASKS[task].folder].text2 is not None


def _task(task: str) -> TaskInfo:
    task = task_name(task)
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: expected one of {', '.join(TASKS)}")
    return TASKS[task]


# ----------------------------------------------------------------------------------------------
# Readers


def read_glue(glue_dir, task: str, split: str, labeled: bool | None = None) -> list[Example]:
    """Examples of one split: text (and text2 for pair tasks), label an int class index (see the
    module docstring) or a float (STS-B), None for unlabeled test files.

    `split` is a name in TASKS[task].splits or the path of a file in the task's format.
    `labeled=None` reads labels unless the split is in TASKS[task].unlabeled (a path: labeled);
    labeled=False ignores any label column. 'STS-B*' keeps scores <= 2 (label 0) and >= 4 (label 1)."""
    info = _task(task)
    task = info.name
    if split in info.splits:
        path = os.path.join(os.fspath(glue_dir), info.folder, info.splits[split])
        guess = None if os.path.isdir(glue_dir) else _close_folder(os.fspath(glue_dir))
        if not os.path.isfile(path) and guess:
            raise DataError(f"{path}: file not found: --glue_dir {os.fspath(glue_dir)} does not exist. "
                            f"Did you mean --glue_dir {guess}?")
        if not os.path.isfile(path):
            raise DataError(f"{path}: file not found. Download {info.folder} with `python -m minbert download "
                            f"glue --tasks {info.folder} --dest {os.fspath(glue_dir)}`, or pass --glue_dir DIR to "
                            f"point the training script at a folder with GLUE's layout (DIR/{info.folder}/...).")
    elif os.path.isfile(split):
        path = split
    else:
        raise DataError(f"unknown split {split!r} of {task}: expected one of {', '.join(info.splits)}, "
                         f"or the path of an existing file")
    if labeled is None:
        labeled = split not in info.unlabeled
    if task == "Quora":
        return read_quora(path, labeled)
    return _read_file(path, info, labeled)


def _close_folder(path: str) -> str | None:
    """An existing folder whose name is close to the missing folder `path` (its siblings, then the shipped
    data/glue_data), or None."""
    parent = os.path.dirname(path.rstrip("/")) or "."
    siblings = [os.path.join(parent, d) for d in sorted(os.listdir(parent))] if os.path.isdir(parent) else []
    folders = {}
    for d in siblings + [DEFAULT_GLUE_DIR]:   # a sibling wins over the shipped folder of the same name
        if os.path.isdir(d):
            folders.setdefault(os.path.basename(d), d)
    close = difflib.get_close_matches(os.path.basename(path.rstrip("/")), list(folders), n=1, cutoff=0.75)
    return folders[close[0]] if close else None


def _read_rows(path: str, folder: str, texts: list[str], label: str | None) -> list[tuple[int, dict[str, str]]]:
    """(line, row) for every data line, checking the header and the number of fields. `line` is the
    1-based line in the file; `label` is the label column, or None for an unlabeled read."""
    # utf-8-sig drops MRPC's BOM; QUOTE_NONE because sentences hold unbalanced quotes
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            lines = list(enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE), start=1))
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: found bytes that are not UTF-8 text (byte {e.start}: {e.reason}), expected a "
                        f"tab-separated GLUE file; is it the right file?") from None
    wanted = texts + ([label] if label else [])
    if not lines:
        raise DataError(f"{path}:1: found an empty file, expected a tab-separated header with columns {wanted}")
    header, data = lines[0][1], lines[1:]
    if folder == "CoLA" and header != ["index", "sentence"]:  # train/dev: no header, 4 fixed columns
        header, data = COLA_COLUMNS, lines
    missing = [c for c in wanted if c not in header]
    if missing == [label]:  # the text columns are there: a test file read as labeled
        raise DataError(f"{path}:1: found header {header} with no '{label}' column, expected a labeled file. "
                        f"This looks like an unlabeled test file: read it with labeled=False.")
    if missing:
        raise DataError(f"{path}:1: found header {header}, expected the columns {wanted} (missing {missing})")
    optional = sum(c in SNLI_OPTIONAL for c in header) if folder == "SNLI" else 0
    rows = []
    for line, fields in data:
        if not fields:
            continue  # a blank line
        if not len(header) - optional <= len(fields) <= len(header):
            described = "no header: " + ", ".join(header) if header is COLA_COLUMNS else f"header {header}"
            raise DataError(f"{path}:{line}: found {len(fields)} tab-separated fields, "
                            f"expected {len(header)} ({described})")
        rows.append((line, dict(zip(header, fields))))
    if not rows:
        raise DataError(f"{path}: found no data rows, expected at least one example")
    return rows


def _read_file(path: str, info: TaskInfo, labeled: bool) -> list[Example]:
    fmt = _FORMATS[info.folder]
    texts = [fmt.text] + ([fmt.text2] if fmt.text2 else [])
    rows = _read_rows(path, info.folder, texts, fmt.label if labeled else None)
    id_column = next((c for c in ("index", "id", "pairID") if rows and c in rows[0][1]), None)
    examples, no_gold, empty = [], [], []
    for n, (line, row) in enumerate(rows):
        label = None
        if labeled:
            raw = row[fmt.label].strip()
            if raw == "-" and info.folder in ("MNLI", "SNLI"):
                no_gold.append(line)
                continue
            label = _parse_label(path, line, info, fmt, raw)
            if info.name == "STS-B*":
                if 2 < label < 4:
                    continue  # neither clearly similar nor clearly dissimilar
                label = int(label >= 4)
        text = [row[c].strip() for c in texts]
        for column, value in zip(texts, text):
            if not value and info.folder not in NOISY_TEXT:
                raise DataError(f"{path}:{line}: found an empty {column}, expected non-empty text")
        if not all(text):
            empty.append(line)
        ident = row[id_column] if id_column else str(n)  # no id column: the 0-based data row
        examples.append(Example(ident, text[0], text[1] if len(text) > 1 else None, label))
    if no_gold:
        warnings.warn(f"{path}: dropped {len(no_gold)} rows with gold_label '-' (no annotator majority): "
                      f"lines {_some(no_gold)}", stacklevel=3)
    if empty:
        warnings.warn(f"{path}: {len(empty)} rows have an empty sentence, kept as '': lines {_some(empty)}",
                      stacklevel=3)
    return examples


def _parse_label(path: str, line: int, info: TaskInfo, fmt: _Format, raw: str) -> int | float:
    if fmt.kind == "score":
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not 0 <= value <= 5:  # also true for NaN
            raise DataError(f"{path}:{line}: found {fmt.label} {raw!r}, expected a number 0-5")
        return value
    allowed = [str(i) for i in range(info.num_labels)] if fmt.kind == "index" else list(info.label_names)
    if raw not in allowed:
        raise DataError(f"{path}:{line}: found {fmt.label} {raw!r}, expected one of {', '.join(allowed)}")
    return allowed.index(raw)


def _some(lines: list[int]) -> str:
    return ", ".join(map(str, lines[:20])) + (", ..." if len(lines) > 20 else "")


# ----------------------------------------------------------------------------------------------
# Cross-dataset evaluation: one binary label space per category


def _category_task(task: str) -> TaskInfo:
    info = _task(task)
    if info.category is None:
        with_category = [t for t, i in TASKS.items() if i.category]
        raise ValueError(f"{task} belongs to no category: cross-dataset mapping exists only for "
                         f"{', '.join(with_category)}")
    return info


def to_category_labels(task: str, labels) -> list[int]:
    """Map gold class indices of `task` into its category's binary space: 1 = entailment (nli) or
    similar (similarity), 0 = anything else, e.g. MNLI 0/1/2 -> 1/0/0, RTE 0/1 -> 1/0, QQP unchanged."""
    info = _category_task(task)
    labels = labels.tolist() if hasattr(labels, "tolist") else list(labels)
    bad = [y for y in labels if y not in range(info.num_labels)]  # also catches None (test files)
    if bad:
        raise ValueError(f"to_category_labels: {task} labels must be class indices 0-{info.num_labels - 1}, "
                         f"found {bad[:5]}")
    return [int(y == info.positive_class) for y in labels]


def category_prediction(task: str, probs: torch.Tensor) -> torch.Tensor:
    """Predictions (B,) long in the category's binary space from the class probabilities (B, K) of a
    model trained on `task`: 1 when the probability of the positive class (entailment, similar)
    beats the summed probability of the other classes, so for a 3-way NLI model p(entailment) >
    p(neutral) + p(contradiction), and for binary models the argmax mapped. Ties give 0."""
    info = _category_task(task)
    if probs.dim() != 2 or probs.size(1) != info.num_labels:
        raise ValueError(f"category_prediction: expected probs (B, K) with K = {info.num_labels} for {task}, "
                         f"got {tuple(probs.shape)}")
    total = probs.sum(dim=1)  # (B,)
    if (probs < 0).any() or not torch.allclose(total, torch.ones_like(total), atol=1e-3):
        raise ValueError("category_prediction: probs must be >= 0 with rows summing to 1; "
                         "pass logits.softmax(dim=-1), not logits")
    positive = probs[:, info.positive_class]  # (B,)
    return (positive > total - positive).long()  # (B,)


# ---------------------------------------------------------------------------------------------- flags
def describe(args) -> list[tuple[str, str]]:
    """--dry_run's rows for train_mml.py: --task's train and dev examples (read as the run reads them, --limit
    applied; nothing tokenized) and the steps per epoch they make."""
    try:
        rows = {split: len(read_glue(args.glue_dir, args.task, split)[: args.limit or None])
                for split in ("train", "dev")}
    except DataError as e:
        return [("data", f"the run would stop: {e}")]
    epochs = f"x {args.epochs} epochs" if args.epochs else "(--epochs: the paper's 10/30/100 by training size)"
    return [("data", f"{args.task} train {rows['train']:,}, dev {rows['dev']:,} examples"),
            ("steps", f"{math.ceil(rows['train'] / args.batch_size):,} per epoch {epochs}")]


def add_args(parser) -> None:
    g = parser.add_argument_group("GLUE data")
    g.add_argument("--task", required=True, type=task_name, choices=list(TASKS),
                   help="GLUE task to fine-tune on; STS-B* is STS-B binarised (<=2 vs >=4)")
    g.add_argument("--glue_dir", default=DEFAULT_GLUE_DIR, help="folder with GLUE's layout (TASK/train.tsv, dev.tsv)")
    g.add_argument("--eval_tasks", default="",
                   help="comma list of same-category tasks to score the best model on, e.g. QNLI,MNLI")


def check_args(args, parser) -> None:
    """--eval_tasks becomes a list, each a task of --task's category."""
    args.eval_tasks = [task_name(t) for t in args.eval_tasks.split(",") if t]
    category = TASKS[args.task].category
    for t in args.eval_tasks:
        if t not in TASKS or TASKS[t].category is None or TASKS[t].category != category:
            parser.error(f"--eval_tasks {t}: must be a task of {args.task}'s category ({category}); "
                         f"candidates: {[n for n, i in TASKS.items() if i.category == category and category]}")
