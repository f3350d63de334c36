"""
CS224N multitask data: the handout's files, read and written.

1. Readers. `read_sst`, `read_quora` and `read_sts` turn one handout file (SST-5 sentiment, Quora
   paraphrase, SemEval STS) into a list of `Example`s. Anything malformed raises a `DataError` that
   says "path:line: what was found, what was expected".
2. `load_split` turns a split's files into `TaskData` (minbert/tasks/sampling.py: tokenized once, and the
   length-aware batches a training step draws).
3. `write_predictions` writes the handout's prediction-file format byte for byte, header line included
   (PREDICTION_HEADERS: the handout's own "Predicted_Similiary" for STS; --no-handout_headers fixes it).
4. Where they go: `add_output_args` / `resolve_outputs` give train_multitask.py its --*_out flags, defaulting to
   OUT_DIR/predictions/<handout name>; when the Quora test file is a stand-in (the dev sample, see
   `default_paths`), that file's default name says so (STAND_IN_PARA_TEST). A missing input file whose name is
   close to an existing one gets "Did you mean ...?" (`did_you_mean`, difflib).

The files (gpoesia/minbert-default-final-project, data/) are tab-separated despite the .csv name,
with default csv quoting; the first column is an unnamed pandas index. The `*-test-student.csv`
files have no label column, and the SST/CFIMDB test headers start with an extra "0" column.

Differences from the handout's datasets.py:
- Quora rows with an empty or unparseable label or an empty sentence are skipped, and each one is
  reported in one printed line. The handout drops them silently (bare try/except: pass).
- Text is only stripped of surrounding whitespace, not lowercased or re-punctuated (the handout's
  `preprocess_string`): the WordPiece tokenizer lowercases and splits punctuation itself.
- Pairs are either one cross-encoder sequence "[CLS] a [SEP] b [SEP]" with token types ('cross') or
  two separate encodings like the handout ('separate', for bi-encoders).
- Labels are one tensor of a dtype you choose: float32 for STS (the handout's float64 breaks MSE
  against float32 predictions) and for Quora when it is trained with BCE.

Deliberately left out: GLUE readers (minbert/tasks/glue.py), and wiring splits together (the training script
does that).
"""

import argparse
import copy
import csv
import difflib
import os
from dataclasses import dataclass

import torch

from minbert.core.errors import UserError
from minbert.tasks.sampling import TaskData, steps_per_epoch

# default file names inside --data_dir (the handout's data/ folder)
CS224N_FILES = {
    "sst_train": "ids-sst-train.csv",
    "sst_dev": "ids-sst-dev.csv",
    "sst_test": "ids-sst-test-student.csv",
    "para_train": "quora-train.csv",
    "para_dev": "quora-dev.csv",
    "para_test": "quora-test-student.csv",
    "sts_train": "sts-train.csv",
    "sts_dev": "sts-dev.csv",
    "sts_test": "sts-test-student.csv",
}
DEFAULT_DATA_DIR = "data"  # where `python -m minbert download cs224n` saves them
# The repository ships data/ with every file above except the full Quora ones (too big); in their
# place it ships a 16k/2k sample cut from the public Quora dev file (data/README.md).
QUORA_SAMPLE_FILES = {"para_train": "quora-train-sample.csv", "para_dev": "quora-dev-sample.csv"}

# Column title of each prediction file; write_predictions puts it in the header line. These are the
# handout's exact titles, typo included: multitask_classifier.py writes "Predicted_Similiary" for STS,
# and a grader that compares headers byte for byte expects it. --no-handout_headers writes the spelling
# fixed (CORRECTED_HEADERS).
PREDICTION_HEADERS = {"sst": "Predicted_Sentiment", "para": "Predicted_Is_Paraphrase", "sts": "Predicted_Similiary"}
CORRECTED_HEADERS = PREDICTION_HEADERS | {"sts": "Predicted_Similarity"}

# --{task}_{split}_out flag -> file name under OUT_DIR/predictions/ (the handout's names)
PREDICTION_FILES = {f"{t}_{s}_out": f"{t}-{s}-output.csv" for t in ("sst", "para", "sts") for s in ("dev", "test")}
# the name the Quora test predictions get when the Quora test file is a stand-in (default_paths): never submit it
STAND_IN_PARA_TEST = "para-test-output.STAND-IN-dev-sample-not-for-submission.csv"


@dataclass
class Example:
    id: str  # the handout's hash id (column "id"), written back into the prediction files
    text: str
    text2: str | None  # second sentence for pair tasks (Quora, STS)
    label: int | float | None  # None for unlabeled test files


class DataError(UserError, ValueError):
    """A data file is missing or malformed. The message reads "path:line: what was found, what was expected"."""


# ----------------------------------------------------------------------------------------------
# Readers


def did_you_mean(path: str, shipped_dir: str = DEFAULT_DATA_DIR) -> str | None:
    """The existing file closest in name to a missing `path` (difflib), looked for in its own folder and in
    the shipped data folder; None when nothing is close. A typo then gets "did you mean ...?", not a
    download command for a file that ships."""
    folder = os.path.dirname(path) or "."
    name = os.path.basename(path)
    candidates = {}
    for d in dict.fromkeys([folder, shipped_dir]):
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if os.path.isfile(os.path.join(d, f)):
                    candidates.setdefault(f, os.path.join(d, f))
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.75)
    return candidates[close[0]] if close else None


def _missing_file_message(path: str) -> str:
    folder = os.path.dirname(path) or "."
    message = f"{path}: file not found"
    if not os.path.isdir(folder):
        message += f" (the directory {folder} does not exist either)"
    guess = None if os.path.basename(path) in CS224N_FILES.values() else did_you_mean(path)
    if guess:   # a handout file name is downloadable: that advice below stays
        return f"{message}. Did you mean {guess}?"
    return (f"{message}. Download the CS224N files with `python -m minbert download cs224n` "
            f"(saves them to {DEFAULT_DATA_DIR}/; add --dest DIR to choose another place), or pass "
            f"--data_dir DIR to point the training script at a folder that already has them.")


def add_output_args(parser) -> None:
    """The prediction-file flags of train_multitask.py: where the six files go and their header line."""
    g = parser.add_argument_group("prediction files (minbert/tasks/data.py)")
    for flag, name in PREDICTION_FILES.items():
        g.add_argument(f"--{flag}", default=None, help=f"default: OUT_DIR/predictions/{name}")
    g.add_argument("--handout_headers", action=argparse.BooleanOptionalAction, default=True,
                   help="write the handout's exact header lines, typo included (STS: Predicted_Similiary), so a "
                        "grader comparing them byte for byte accepts the files; --no-handout_headers fixes the "
                        "spelling")


def prediction_headers(args) -> dict[str, str]:
    """{task: column title} for the prediction files of this run (--handout_headers)."""
    return PREDICTION_HEADERS if getattr(args, "handout_headers", True) else CORRECTED_HEADERS


def resolve_outputs(args) -> list[str]:
    """Fill every --*_out left unset with OUT_DIR/predictions/<handout name>; an explicit path wins. When the
    Quora test file is a stand-in (the dev sample, see default_paths), its default file name says so, so it
    is not submitted by mistake. Returns notes to print."""
    notes = []
    for flag, name in PREDICTION_FILES.items():
        if getattr(args, flag) is None:
            if flag == "para_test_out" and is_stand_in(args):
                name = STAND_IN_PARA_TEST
                notes.append(f"Quora test predictions go to predictions/{name}: they are for dev-sample pairs, "
                             f"not the Quora test set; do not submit them")
            setattr(args, flag, os.path.join(args.out_dir, "predictions", name))
    return notes


def is_stand_in(args) -> bool:
    """True when the Quora test file is the dev file read without labels (default_paths' stand-in)."""
    return args.para_test != "none" and os.path.abspath(args.para_test) == os.path.abspath(args.para_dev)


def default_paths(data_dir: str) -> tuple[dict[str, str], list[str]]:
    """{flag: path} of every CS224N file in `data_dir`, and a note for each choice that is not the
    handout's file: without the full Quora files, the shipped sample trains and is scored, and
    the dev sample read WITHOUT its labels stands in for the Quora test file (so all six
    prediction files are written; those test predictions are for dev pairs)."""
    paths = {key: os.path.join(data_dir, name) for key, name in CS224N_FILES.items()}
    notes = []
    sample = os.path.join(data_dir, QUORA_SAMPLE_FILES["para_train"])
    if not os.path.isfile(paths["para_train"]) and os.path.isfile(sample):
        paths.update({key: os.path.join(data_dir, name) for key, name in QUORA_SAMPLE_FILES.items()})
        notes.append(f"Quora: {CS224N_FILES['para_train']} is not in {data_dir}/, so the shipped sample trains "
                     f"({QUORA_SAMPLE_FILES['para_train']}, 16k pairs; dev {QUORA_SAMPLE_FILES['para_dev']}, 2k)")
        if not os.path.isfile(paths["para_test"]):
            paths["para_test"] = paths["para_dev"]
            notes.append(f"Quora test: stand-in = {QUORA_SAMPLE_FILES['para_dev']} read without labels")
        notes.append("the full Quora files: python -m minbert download cs224n")
    return paths, notes


def _read_rows(path: str, columns: list[str], label: str | None) -> list[tuple[int, dict[str, str]]]:
    """Return (line, row) for every record of a tab-separated handout file, checking the header and
    the number of fields. `line` is the 1-based file line the record starts on (the header is line 1).
    `label` is the label column, or None for an unlabeled read."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(_missing_file_message(path))
    try:
        # newline="" lets the csv module handle quoted fields itself, as the csv docs require
        with open(path, newline="", encoding="utf-8") as f:
            rows = _parse_rows(path, csv.reader(f, delimiter="\t"), columns, label)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: found bytes that are not UTF-8 text (byte {e.start}: {e.reason}), expected a "
                        f"tab-separated text file; is it the right file?") from None
    if not rows:
        raise DataError(f"{path}: found a header and no data rows, expected at least one example")
    return rows


def _parse_rows(path: str, reader, columns: list[str], label: str | None) -> list[tuple[int, dict[str, str]]]:
    """Check the header, then read every record: (line, row) pairs."""
    header = next(reader, None)
    wanted = columns + ([label] if label else [])
    if header is None:
        raise DataError(f"{path}:1: found an empty file, expected a tab-separated header with columns {wanted}")
    missing = [c for c in wanted if c not in header]
    if missing == [label]:  # the text columns are there: a *-test-student.csv read as labeled
        raise DataError(f"{path}:1: found header {header} with no '{label}' column, expected a labeled "
                        f"file. This looks like an unlabeled test file: read it with labeled=False.")
    if missing:
        raise DataError(f"{path}:1: found header {header}, expected the columns {wanted} (missing {missing})")
    rows = []
    while True:
        line = reader.line_num + 1  # a quoted field may span lines: remember where the record starts
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise DataError(f"{path}:{line}: found malformed csv ({e}), expected tab-separated fields") from e
        if not fields:
            continue  # blank line (csv.DictReader skips these too)
        if len(fields) != len(header):
            raise DataError(f"{path}:{line}: found {len(fields)} tab-separated fields, "
                            f"expected {len(header)} (header {header})")
        row = dict(zip(header, fields))
        if not row["id"].strip():
            raise DataError(f"{path}:{line}: found an empty id, expected the example's id string")
        rows.append((line, row))
    return rows


def _text(path: str, line: int, row: dict[str, str], column: str) -> str:
    text = row[column].strip()
    if not text:
        raise DataError(f"{path}:{line}: found an empty {column}, expected non-empty text")
    return text


def _number(path: str, line: int, row: dict[str, str], column: str, low: float, high: float,
            integer: bool) -> int | float:
    """Parse a label and check its range. Integers may be written as "3" or "3.0"."""
    kind = f"an integer {low}-{high}" if integer else f"a number {low}-{high}"
    try:
        value = float(row[column])
    except ValueError:
        value = float("nan")
    # `not (low <= value <= high)` is also true for NaN, so NaN and unparseable text land here
    if not (low <= value <= high) or (integer and not value.is_integer()):
        raise DataError(f"{path}:{line}: found {column} {row[column]!r}, expected {kind}")
    return int(value) if integer else value


def read_sst(path, labeled: bool = True) -> list[Example]:
    """SST-5 sentiment: columns id, sentence, sentiment (integer 0-4; none in the test file)."""
    path = os.fspath(path)
    examples = []
    for line, row in _read_rows(path, ["id", "sentence"], "sentiment" if labeled else None):
        label = _number(path, line, row, "sentiment", 0, 4, integer=True) if labeled else None
        examples.append(Example(row["id"], _text(path, line, row, "sentence"), None, label))
    return examples


def read_sts(path, labeled: bool = True) -> list[Example]:
    """SemEval STS: columns id, sentence1, sentence2, similarity (a float 0-5; none in the test file)."""
    path = os.fspath(path)
    examples = []
    for line, row in _read_rows(path, ["id", "sentence1", "sentence2"], "similarity" if labeled else None):
        label = _number(path, line, row, "similarity", 0, 5, integer=False) if labeled else None
        examples.append(Example(row["id"], _text(path, line, row, "sentence1"),
                                _text(path, line, row, "sentence2"), label))
    return examples


def skipped_note(path: str, skipped: dict) -> str:
    """One plain line for the rows read_quora skipped ({line: [problems]}), grouped by problem:
    'data: skipped 2 rows of F: empty is_duplicate (line 2577), empty sentence2 (line 14222)'."""
    by_problem = {}
    for line, problems in skipped.items():
        for problem in problems:
            by_problem.setdefault(problem, []).append(str(line))

    def lines(numbers):
        shown = ", ".join(numbers[:10]) + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")
        return f"line{'s' if len(numbers) > 1 else ''} {shown}"
    return (f"data: skipped {len(skipped)} row{'s' if len(skipped) > 1 else ''} of {path}: "
            + ", ".join(f"{problem} ({lines(numbers)})" for problem, numbers in by_problem.items()))


def read_quora(path, labeled: bool = True) -> list[Example]:
    """Quora paraphrase: columns id, sentence1, sentence2, is_duplicate ("0.0"/"1.0" -> 0/1; none in the
    test file).

    The upstream file has a few rows with malformed quoting, an empty is_duplicate and sometimes an
    empty sentence (two in quora-train-sample.csv, at lines 2577 and 14222). Such rows are skipped
    and listed in one printed line (skipped_note). Any other problem, such as a label of 2 or a wrong field count,
    still raises a DataError."""
    path = os.fspath(path)
    examples, skipped = [], {}  # skipped: line -> list of problems
    for line, row in _read_rows(path, ["id", "sentence1", "sentence2"], "is_duplicate" if labeled else None):
        problems, label = [], None
        if labeled:
            raw = row["is_duplicate"].strip()
            try:
                label = float(raw)
            except ValueError:
                problems.append("empty is_duplicate" if not raw else f"unparseable is_duplicate {raw!r}")
        problems += [f"empty {c}" for c in ("sentence1", "sentence2") if not row[c].strip()]
        if problems:
            skipped[line] = problems
            continue
        if labeled and label not in (0.0, 1.0):  # parseable but wrong: a real error, not upstream noise
            raise DataError(f"{path}:{line}: found is_duplicate {row['is_duplicate']!r}, expected 0 or 1 (0.0/1.0)")
        examples.append(Example(row["id"], row["sentence1"].strip(), row["sentence2"].strip(),
                                None if label is None else int(label)))
    if skipped:
        message = skipped_note(path, skipped)
        if not examples:
            raise DataError(f"{message}; expected at least one valid row")
        print(message, flush=True)
    return examples


# ----------------------------------------------------------------------------------------------
# Prediction files


def write_predictions(path, header: str, ids, values) -> None:
    """Write a prediction file in the handout's exact format (multitask_classifier.py `test_multitask`):

        id \\t Predicted_Sentiment \\n
        <id> , <value> \\n

    `header` is the column title, e.g. PREDICTION_HEADERS["sst"]. Values are formatted like the
    handout's f-string, i.e. str(): pass Python ints for SST/Quora and floats for STS (`tensor.tolist()`).
    Lines end in "\\n" on every platform. The file is written to a temporary name and then renamed
    (os.replace), so an interrupted run never leaves a half-written file."""
    if "\t" in header or "\n" in header:
        raise ValueError(f"header is the column title (e.g. {PREDICTION_HEADERS['sst']!r}), got {header!r}")
    ids, values = list(ids), list(values)
    if len(ids) != len(values):
        raise ValueError(f"write_predictions: {len(ids)} ids but {len(values)} values")
    path = os.fspath(path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"  # same folder, so os.replace is a rename, never a copy
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:  # newline="": write "\n" as is
            f.write(f"id \t {header} \n")
            for i, v in zip(ids, values):
                f.write(f"{i} , {v} \n")
        os.replace(tmp, path)
    except BaseException:  # includes Ctrl-C: never leave the temporary file behind
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    g = parser.add_argument_group("CS224N data and prediction files")
    g.add_argument("--data_dir", default=DEFAULT_DATA_DIR,
                   help="folder with the CS224N files; the repository ships them, with a 16k/2k Quora sample "
                        "standing in for the full Quora files (python -m minbert download cs224n)")
    for key, name in CS224N_FILES.items():
        g.add_argument(f"--{key}", default=None,
                       help=f"default: DATA_DIR/{name}" + ("; 'none' skips it" if key.endswith("test") else ""))
    add_output_args(parser)


def resolve_paths(args) -> None:
    """Fill the data file flags left unset from --data_dir; args.data_notes says what stands in for what."""
    defaults, args.data_notes = default_paths(args.data_dir)
    for key in CS224N_FILES:
        setattr(args, key, getattr(args, key) or defaults[key])
    args.data_notes += resolve_outputs(args)


READERS = {"sst": read_sst, "para": read_quora, "sts": read_sts}


def load_split(args, split: str, tokenizer, pair_modes: dict) -> dict:
    """{task: TaskData} of one split, as the flags say: the files (--{task}_{split}; a test file 'none' is left
    out), --limit, --max_seq_len; pairs as one sequence ("cross") or two ("separate", bi-encoder heads)."""
    out = {}
    for task, read in READERS.items():
        path = getattr(args, f"{task}_{split}")
        if split == "test" and path == "none":
            continue
        examples = read(path, labeled=split != "test")[: args.limit or None]
        out[task] = TaskData(examples, tokenizer, args.max_seq_len, pair_mode=pair_modes.get(task, "cross"),
                             label_dtype=torch.long if task == "sst" else torch.float32)
    return out


def describe(args) -> list[tuple[str, str]]:
    """--dry_run's rows for train_multitask.py: each task's training examples (read as the run reads them, --limit
    applied; nothing tokenized) and the optimizer steps they make (steps_per_epoch, one process)."""
    resolved = copy.copy(args)
    resolve_paths(resolved)   # the files --data_dir implies, on a copy
    try:
        rows = {t: len(read(getattr(resolved, f"{t}_train"))[: args.limit or None]) for t, read in READERS.items()}
    except UserError as e:
        return [("train data", f"the run would stop: {e}")]
    _, steps = steps_per_epoch(args, list(rows.values()), rows["sst"])
    return [("train data", ", ".join(f"{t} {n:,}" for t, n in rows.items()) + " examples"),
            ("steps", f"{steps:,} per epoch x {args.epochs} epochs = {steps * args.epochs:,} optimizer steps "
                      f"(batch {args.batch_size} x --grad_accum {args.grad_accum})")]
