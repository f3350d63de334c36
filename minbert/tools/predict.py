"""python -m minbert predict RUN_DIR: a finished run's heads on your own sentences, in the order you give them.

    python -m minbert predict runs/quickstart "A gorgeous, witty film." "Dull and overlong."
    python -m minbert predict runs/quickstart "How do I learn Python? ||| What is the best way to learn Python?"
    cut -f3 data/ids-sst-dev.csv | tail -n +2 | python -m minbert predict runs/quickstart --format csv
    python -m minbert predict runs/quickstart --file data/sts-dev.csv --format jsonl > sts-dev.jsonl

Inputs: sentences as arguments, or one per line on stdin (blank lines skipped), or the rows of a CSV/TSV file
(--file; columns --text_column and --pair_column). A pair is two sentences separated by a tab or by " ||| ", the
rule of minbert.load_run's predict too; sentences and pairs may mix, each answered as what it is. Per input
(minbert/tools/trained_run.py): from a multitask run, SST-5's label, name and 5 probabilities for a sentence, the
paraphrase probability and the STS score for a pair (--task chooses the heads); from an MML run, its GLUE task's
label and probabilities, or STS-B's score. Scored as the scripts evaluate, on --device under --amp. Results go to
stdout (a table, or --format csv | jsonl), everything else to stderr.
"""

import csv
import json
import sys
from contextlib import redirect_stdout
from pathlib import Path

from minbert.core import flags
from minbert.core.device import add_device_args, set_threads
from minbert.core.errors import UserError
from minbert.core.report import markdown_table


class Parser(flags.ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        """Flags anywhere between the sentences: `predict RUN --task sst "A film."` as well as before them."""
        return self.parse_intermixed_args(args, namespace)


def parser():
    # no @file arguments: a sentence may begin with "@"
    p = Parser(prog="python -m minbert predict", description=__doc__, fromfile_prefix_chars=None)
    p.add_argument("run_dir", help="the --out_dir of a finished training run (or its model/ folder, or its best.pt)")
    p.add_argument("sentences", nargs="*", help="sentences, or pairs 'first ||| second'; none: --file, else stdin")
    g = p.add_argument_group("inputs and outputs")
    g.add_argument("--file", default=None, help="a CSV or TSV file with a header line (tab-separated if the header "
                                                "has a tab; .tsv files unquoted, as GLUE's)")
    g.add_argument("--text_column", default=None,
                   help="--file's sentence column (default: sentence1, else sentence); named, it is read alone, as "
                        "single sentences, unless --pair_column names the second")
    g.add_argument("--pair_column", default=None,
                   help="--file's second sentence column (default: sentence2 when the file has it and --text_column "
                        "is not given; 'none': no pairs)")
    g.add_argument("--task", default=None,
                   help="comma list of heads to run, e.g. sst or para,sts (default: sst for sentences, para,sts "
                        "for pairs; an MML run answers its own task)")
    g.add_argument("--format", choices=["table", "csv", "jsonl"], default="table",
                   help="table: for reading; csv: one column per value; jsonl: one JSON object per input")
    g.add_argument("--batch_size", type=flags.at_least(1), default=None,
                   help="inputs per forward pass (default: the scripts' evaluation batch, EVAL_BATCH in "
                        "minbert/tasks/scoring.py, so the same numbers)")
    add_device_args(p.add_argument_group("machine"))
    return p


def main(argv=None):
    args = parser().parse(argv)
    if args.file and args.sentences:
        raise UserError("give sentences as arguments or --file, not both")
    from minbert.tools.trained_run import load_run   # torch loads here, after the flags are checked
    with redirect_stdout(sys.stderr):   # stdout is for the results: the threads line goes to stderr
        set_threads(args.threads)
        run = load_run(args.run_dir, device=args.device, amp=args.amp, batch_size=args.batch_size, progress=True)
    lines = None if args.file else args.sentences or stdin_lines()
    ids, inputs = read_file(args) if args.file else (None, read_lines(lines, bool(args.sentences)))
    with redirect_stdout(sys.stderr):   # the progress lines too
        records = run.predict(inputs, args.task.split(",") if args.task else None)
    if ids is not None:
        records = [{"id": i} | r for i, r in zip(ids, records)]
    write(records, args.format, sys.stdout)
    return records


# ---------------------------------------------------------------------------------------------- inputs
def stdin_lines() -> list[str]:
    if sys.stdin.isatty():
        print("reading sentences from the terminal, one per line (a pair: first ||| second); Ctrl-D ends",
              file=sys.stderr)
    return sys.stdin.read().splitlines()


def read_lines(lines: list[str], arguments: bool) -> list:
    """(a, b or None) for each argument or stdin line, by load_run's rule for pairs (split_pair); a blank stdin line
    (what echo and editors end a file with) is skipped, an empty argument or half of a pair refused with where it is."""
    from minbert.tools.trained_run import split_pair
    where = "argument" if arguments else "stdin line"
    inputs = []
    for n, line in enumerate(lines, 1):
        if not arguments and not line.strip():
            continue
        try:
            a, b = split_pair(line)
        except ValueError as e:
            raise UserError(f"{where} {n}: {e}") from None
        if not a.strip() or (b is not None and not b.strip()):
            raise UserError(f"{where} {n}: an empty sentence" + (" (an empty argument)" if not line.strip() else ""))
        inputs.append((a, b))
    if not inputs:
        raise UserError("no sentences: give them as arguments, in --file, or one per line on stdin")
    return inputs


def read_file(args) -> tuple[list | None, list]:
    """(ids or None, inputs) of --file: the text column(s) of every row; file:line and the column in any error."""
    path = Path(args.file)
    if not path.is_file():
        raise UserError(f"--file {path}: no such file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise UserError(f"--file {path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    if not lines:
        raise UserError(f"--file {path}: empty, expected a header line and rows")
    delimiter = "\t" if "\t" in lines[0] else ","
    quoting = csv.QUOTE_NONE if path.suffix == ".tsv" else csv.QUOTE_MINIMAL   # GLUE's .tsv: '"' is text
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting)
    header = next(reader)
    text = args.text_column or ("sentence1" if "sentence1" in header else "sentence")
    pair = args.pair_column or ("sentence2" if "sentence2" in header and not args.text_column else None)
    pair = None if pair == "none" else pair
    for flag, column in (("--text_column", text), ("--pair_column", pair)):
        if column is not None and column not in header:
            raise UserError(f"{path}:1: no column {column!r} (the header has {header}); name it with {flag}")
    ids, inputs = ([] if "id" in header else None), []
    for n, row in enumerate(reader, 2):
        if not row:
            continue
        if len(row) != len(header):
            raise UserError(f"{path}:{n}: {len(row)} fields, the header has {len(header)}")
        cells = dict(zip(header, row))
        for column in (text, pair):
            if column is not None and not cells[column].strip():
                raise UserError(f"{path}:{n}: empty {column!r}")
        inputs.append((cells[text], None if pair is None else cells[pair]))   # a cell is one sentence, as it is
        if ids is not None:
            ids.append(cells["id"])
    if not inputs:
        raise UserError(f"{path}: a header and no rows")
    return ids, inputs


# ---------------------------------------------------------------------------------------------- outputs
def write(records: list[dict], fmt: str, out) -> None:
    """table: a markdown table with rounded numbers; csv: a list becomes one column per element (name_0, name_1,
    ...); jsonl: the records as they are."""
    if fmt == "jsonl":
        for r in records:
            out.write(json.dumps(r) + "\n")
        return
    if fmt == "csv":
        flat = [{f"{k}_{i}" if isinstance(v, list) else k: x for k, v in r.items()
                 for i, x in (enumerate(v) if isinstance(v, list) else [(None, v)])} for r in records]
        writer = csv.DictWriter(out, fieldnames=columns(flat), lineterminator="\n")   # a cell a record lacks: empty
        writer.writeheader()
        writer.writerows(flat)
        return
    shown = [{k: readable(v) for k, v in r.items()} for r in records]
    names = columns(records)
    texts = [c for c in names if c.startswith("sentence")]   # the sentences last: the long columns
    out.write(markdown_table(shown, [c for c in names if c not in texts] + texts) + "\n")


def columns(records: list[dict]) -> list[str]:
    """Every key of the records, in the order they first appear (sentences and pairs mixed have different keys)."""
    return list(dict.fromkeys(k for r in records for k in r))


def readable(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return " ".join(f"{x:.2f}" for x in value)
    text = str(value).replace("|", "\\|")
    return text if len(text) <= 60 else text[:57] + "..."

