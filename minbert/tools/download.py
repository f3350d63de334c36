"""
Download the public datasets minbert trains on.

    python -m minbert download cs224n                # -> data/
    python -m minbert download cs224n --dest DIR     # then train with --data_dir DIR
    python -m minbert download glue --tasks RTE,MRPC # -> data/glue_data/RTE, .../MRPC
    python -m minbert download glue --tasks all --dest DIR   # then train with --glue_dir DIR

`cs224n` fetches the CS224N default-final-project files (SST-5, Quora, STS, CFIMDB; train, dev and unlabeled
test splits) from the handout repository gpoesia/minbert-default-final-project (data/README.md: sources,
licences, sizes). `glue` fetches the task zips GLUE's own download_glue_data.py uses, SNLI 1.0 and the CS224N
Quora files, in the layout minbert.tasks.glue reads; MRPC, which GLUE does not host, as GLUE's script does.
A file under its final name is always complete (written under a temporary name, then renamed), so what is there
is skipped and a rerun fetches only what is missing. Left out: checksums, mirrors, proxies, GLUE's AX set.
"""

import argparse
import os
import shutil
import urllib.error
import urllib.request
import zipfile
from http.client import IncompleteRead
from pathlib import Path

from tqdm import tqdm

from minbert.core import flags
from minbert.core.atomic import atomic_write
from minbert.core.errors import UserError
from minbert.core.flags import BriefParser, writable_dir
from minbert.tasks.data import DataError
from minbert.tasks.glue import DEFAULT_GLUE_DIR, TASKS

TIMEOUT = 30  # seconds a single network operation may stall before we give up
CS224N_URL = "https://raw.githubusercontent.com/gpoesia/minbert-default-final-project/main/data/{name}"
CS224N_NAMES = [
    f"{task}-{split}.csv"
    for task in ("ids-sst", "quora", "sts", "ids-cfimdb")
    for split in ("train", "dev", "test-student")
]


def download_file(url: str, dest: Path, desc: str) -> Path:
    """Stream url to dest with a tqdm progress bar, writing to dest + '.part' and then renaming it (os.replace is
    atomic: no half-written file is ever left under the final name). Raises urllib.error.HTTPError for an HTTP
    error status (e.g. 404), and ConnectionError when the server closes the connection before the whole file."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response, open(part, "wb") as f:
            total = int(response.headers.get("Content-Length") or 0) or None  # None: size unknown
            with tqdm.wrapattr(f, "write", total=total, desc=desc) as out:   # bytes, scaled by 1024
                shutil.copyfileobj(response, out, 1 << 20)  # 1 MiB at a time
            received = f.tell()
        # a dropped connection can also look like a clean end of stream, so count the bytes
        if total is not None and received != total:
            raise ConnectionError(f"{url}: received {received} of {total} bytes")
        os.replace(part, dest)
    except IncompleteRead as e:
        part.unlink(missing_ok=True)
        raise ConnectionError(f"{url}: connection closed after {len(e.partial)} bytes") from e
    except BaseException:  # includes Ctrl-C: never leave a .part file behind
        part.unlink(missing_ok=True)
        raise
    return dest


def download_cs224n(dest: str = "data") -> None:
    """Fetch the 12 CS224N files into `dest`, skipping those already present."""
    for name in CS224N_NAMES:
        path = os.path.join(dest, name)
        if os.path.isfile(path):
            print(f"{path}: already there, skipping")
        else:
            download_file(CS224N_URL.format(name=name), path, desc=name)


GLUE_URL = "https://dl.fbaipublicfiles.com/glue/data/{name}.zip"
GLUE_ZIPS = {"CoLA": "CoLA", "SST-2": "SST-2", "QQP": "QQP-clean", "STS-B": "STS-B", "MNLI": "MNLI",
             "QNLI": "QNLIv2", "RTE": "RTE", "WNLI": "WNLI"}  # folder -> zip name
SENTEVAL_URL = "https://dl.fbaipublicfiles.com/senteval/senteval_data/{name}"
MRPC_URLS = {"msr_paraphrase_train.txt": SENTEVAL_URL.format(name="msr_paraphrase_train.txt"),
             "msr_paraphrase_test.txt": SENTEVAL_URL.format(name="msr_paraphrase_test.txt"),
             "dev_ids.tsv": "https://dl.fbaipublicfiles.com/glue/data/mrpc_dev_ids.tsv"}  # saved under GLUE's name
QUORA_URLS = {name: CS224N_URL.format(name=name) for name in TASKS["Quora"].splits.values()}
FILE_URLS = {"MRPC": MRPC_URLS, "Quora": QUORA_URLS}   # folders fetched file by file
SNLI_URL = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
GLUE_FOLDERS = list(dict.fromkeys(info.folder for info in TASKS.values()))  # CoLA ... SNLI, Quora


def _task_files(folder: str) -> list[str]:
    """Paths (under dest) of every split file minbert.tasks.glue reads from `folder`."""
    return sorted({os.path.join(folder, f) for i in TASKS.values() if i.folder == folder for f in i.splits.values()})


def _unzip(zip_path: str, into: str) -> None:
    """Extract into a temporary folder, then rename each file into place (never a half-written file)."""
    tmp = os.path.join(into, ".unzip-" + os.path.basename(zip_path))
    shutil.rmtree(tmp, ignore_errors=True)  # left over from an interrupted run
    with zipfile.ZipFile(zip_path) as z:
        for member in z.infolist():
            if not member.filename.startswith("__MACOSX/"):  # resource forks in Mac-made zips (SNLI)
                z.extract(member, tmp)  # extract() sanitises absolute and ../ paths
    for root, _, files in os.walk(tmp):
        target = os.path.join(into, os.path.relpath(root, tmp))
        os.makedirs(target, exist_ok=True)
        for name in files:
            os.replace(os.path.join(root, name), os.path.join(target, name))
    shutil.rmtree(tmp)


def _msr_rows(path: str) -> tuple[str, list[list[str]]]:
    """Header line and the 5 fields of every row of a Microsoft MRPC file (rows stripped, as GLUE does)."""
    with open(path, encoding="utf-8") as f:  # not utf-8-sig: GLUE keeps the BOM in the header
        lines = f.readlines()  # text mode: a line may end in "\r\n" or "\n"
    rows = []
    for line, text in enumerate(lines[1:], start=2):
        fields = text.strip().split("\t")
        if len(fields) != 5:
            raise DataError(f"{path}:{line}: found {len(fields)} tab-separated fields, expected 5 "
                            f"(Quality, #1 ID, #2 ID, #1 String, #2 String)")
        rows.append(fields)
    return (lines[0].rstrip("\n") + "\n" if lines else ""), rows


def format_mrpc(mrpc_dir: str) -> None:
    """Write MRPC's train.tsv, dev.tsv and test.tsv from msr_paraphrase_{train,test}.txt and
    dev_ids.tsv (in mrpc_dir), byte for byte like GLUE's download_glue_data.py:
    - train/dev: the train file's header line as is (with its UTF-8 BOM), then each row stripped and
      re-joined as "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"; a row goes to dev.tsv when its
      (#1 ID, #2 ID) pair is listed in dev_ids.tsv, else to train.tsv, keeping the file order;
    - test: header "index\t#1 ID\t#2 ID\t#1 String\t#2 String", rows numbered from 0, no label.
    Lines end in "\n" on every platform."""
    with open(os.path.join(mrpc_dir, "dev_ids.tsv"), encoding="utf-8") as f:
        dev_ids = {tuple(line.strip().split("\t")) for line in f if line.strip()}  # {(#1 ID, #2 ID)}
    header, train_rows = _msr_rows(os.path.join(mrpc_dir, "msr_paraphrase_train.txt"))
    _, test_rows = _msr_rows(os.path.join(mrpc_dir, "msr_paraphrase_test.txt"))
    out = {"train": [header], "dev": [header], "test": ["index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"]}
    for fields in train_rows:
        out["dev" if (fields[1], fields[2]) in dev_ids else "train"].append("\t".join(fields) + "\n")
    for index, fields in enumerate(test_rows):
        out["test"].append("\t".join([str(index)] + fields[1:]) + "\n")  # the label is dropped
    if len(out["dev"]) - 1 != len(dev_ids):  # GLUE's script does not check; a different source file would differ
        print(f"warning: only {len(out['dev']) - 1} of the {len(dev_ids)} MRPC dev ids are in msr_paraphrase_train.txt")
    for split, lines in out.items():   # newline="": write "\n" as is
        atomic_write(os.path.join(mrpc_dir, f"{split}.tsv"),
                     lambda tmp, lines=lines: Path(tmp).write_text("".join(lines), encoding="utf-8", newline=""))


def download_glue(tasks: list[str], dest: str = DEFAULT_GLUE_DIR) -> None:
    """Fetch each task folder (names as in minbert.tasks.glue.TASKS; 'STS-B*' is STS-B) into dest,
    skipping folders whose split files are all there."""
    folders = list(dict.fromkeys(TASKS[t].folder for t in tasks))
    for folder in folders:
        if all(os.path.isfile(os.path.join(dest, f)) for f in _task_files(folder)):
            print(f"{os.path.join(dest, folder)}: already there, skipping")
            continue
        task_dir = os.path.join(dest, folder)
        if folder in GLUE_ZIPS or folder == "SNLI":
            url = SNLI_URL if folder == "SNLI" else GLUE_URL.format(name=GLUE_ZIPS[folder])
            zip_path = os.path.join(dest, os.path.basename(url))
            if not os.path.isfile(zip_path):  # a zip under its final name is complete (download_file)
                download_file(url, zip_path, desc=os.path.basename(url))
            _unzip(zip_path, task_dir if folder == "SNLI" else dest)  # GLUE zips hold a top folder
            os.remove(zip_path)
        else:  # MRPC's source files, or Quora's: the CS224N handout files
            for name, url in FILE_URLS[folder].items():
                if not os.path.isfile(os.path.join(task_dir, name)):
                    download_file(url, os.path.join(task_dir, name), desc=f"{folder}/{name}")
            if folder == "MRPC":
                format_mrpc(task_dir)
        missing = [f for f in _task_files(folder) if not os.path.isfile(os.path.join(dest, f))]
        if missing:  # e.g. a zip whose top folder was renamed upstream
            found = sorted(os.listdir(task_dir)) if os.path.isdir(task_dir) else "nothing"
            raise RuntimeError(f"{folder}: the download did not produce {missing}; {task_dir} holds {found}")


def _task_list(text: str) -> list[str]:
    """argparse type of --tasks: 'all' or comma-separated names from minbert.tasks.glue.TASKS, any case."""
    by_lower = {t.lower(): t for t in TASKS}
    names = [n.strip() for n in text.split(",") if n.strip()]
    if [n.lower() for n in names] == ["all"]:
        return GLUE_FOLDERS
    unknown = [n for n in names if n.lower() not in by_lower]
    if unknown or not names:
        guess = "".join(flags.suggest(n, TASKS) for n in unknown)
        raise argparse.ArgumentTypeError(f"unknown task(s) {unknown or text!r}: choose from all, "
                                         f"{', '.join(TASKS)}{guess}")
    return [by_lower[n.lower()] for n in names]


def main(argv: list[str] | None = None) -> None:
    parser = BriefParser(prog="python -m minbert download", description=__doc__.split("\n\n")[0].strip(),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    datasets = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    cs224n = datasets.add_parser("cs224n", help="CS224N minBERT files: SST-5, Quora, STS, CFIMDB")
    cs224n.add_argument("--dest", default="data",
                        help="folder to save into (created if missing); pass the same folder to the "
                             "training scripts as --data_dir")
    glue = datasets.add_parser("glue", help="GLUE tasks, SNLI and the CS224N Quora files, in GLUE's glue_data layout")
    glue.add_argument("--tasks", type=_task_list, default="all",
                      help="comma-separated task names (CoLA,SST-2,MRPC,QQP,STS-B,MNLI,QNLI,RTE,WNLI,SNLI,Quora; "
                           "any case) or 'all'. MNLI, QQP and SNLI are large downloads (tens to hundreds of MB): "
                           "start with RTE,MRPC for a CPU run")
    glue.add_argument("--dest", default=DEFAULT_GLUE_DIR,
                      help="folder to save into (one subfolder per task); pass the same folder to train_mml.py "
                           "as --glue_dir")
    args = parser.parse_args(argv)
    writable_dir(args.dest, "--dest")
    try:
        if args.dataset == "cs224n":
            download_cs224n(args.dest)
            print(f"done: the CS224N files are in {args.dest}/ (train with --data_dir {args.dest})")
        elif args.dataset == "glue":
            download_glue(args.tasks, args.dest)
            print(f"done: the tasks are in {args.dest}/ (train with --glue_dir {args.dest})")
    except urllib.error.URLError as e:   # offline, DNS failure, HTTP error: say so, no traceback
        raise UserError(f"download failed ({getattr(e, 'reason', e)}). Files already downloaded are kept; "
                        "rerun this command when online (it skips what is there).") from None

