"""
Download the public datasets minbert trains on.

    python -m minbert.download cs224n                # -> data/
    python -m minbert.download cs224n --dest DIR     # then train with --data_dir DIR

`cs224n` fetches the CS224N default-final-project files (SST-5, Quora, STS, CFIMDB; train, dev and
unlabeled test splits) from the handout repository gpoesia/minbert-default-final-project on GitHub.
Each file is streamed with a tqdm progress bar to a `.part` name and then renamed, so a file under
its final name is always complete (minbert.hub.download_file). Files that are already there are skipped,
which means rerunning the command after an interruption fetches only what is missing.
data/README.md lists the sources, licences and split sizes.

Subcommands are argparse sub-parsers; another dataset (e.g. `glue`) is one more function plus one
more `add_parser` call. Deliberately left out: checksums, mirrors and proxies.
"""

import argparse
import os

from minbert.hub import download_file

CS224N_URL = "https://raw.githubusercontent.com/gpoesia/minbert-default-final-project/main/data/{name}"
CS224N_NAMES = [
    f"{task}-{split}.csv"
    for task in ("ids-sst", "quora", "sts", "ids-cfimdb")
    for split in ("train", "dev", "test-student")
]


def download_cs224n(dest: str = "data") -> list[str]:
    """Fetch the 12 CS224N files into `dest`, skipping those already present. Returns the 12 paths."""
    paths = []
    for name in CS224N_NAMES:
        path = os.path.join(dest, name)
        if os.path.isfile(path):
            print(f"{path}: already there, skipping")
        else:
            download_file(CS224N_URL.format(name=name), path, desc=name)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minbert.download", description=__doc__.split("\n\n")[0].strip(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    datasets = parser.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    cs224n = datasets.add_parser("cs224n", help="CS224N minBERT files: SST-5, Quora, STS, CFIMDB")
    cs224n.add_argument("--dest", default="data",
                        help="folder to save into (created if missing); pass the same folder to the "
                             "training scripts as --data_dir")
    args = parser.parse_args(argv)
    if args.dataset == "cs224n":
        download_cs224n(args.dest)
        print(f"done: the CS224N files are in {args.dest}/ (train with --data_dir {args.dest})")


if __name__ == "__main__":
    main()
