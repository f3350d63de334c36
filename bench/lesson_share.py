"""What share of the project's Python is the lesson: the BERT, the optimizer, the methods, the tasks, the two scripts.

Counts lines the way `wc -l` does (newline characters) in every Python file git knows of (committed, or new and not
ignored) outside `tests/` and `bench/`, and prints the lesson's lines, the total and the share, then the lines per
folder. Run it on any checkout (`--repo`) to compare two layouts.

    python bench/lesson_share.py [--repo PATH]
"""

import argparse
import subprocess
from collections import Counter
from pathlib import Path

LESSON = ("minbert/bert/", "minbert/adamw.py", "minbert/methods/", "minbert/tasks/", "train_multitask.py", "train_mml.py")
LEFT_OUT = ("tests/", "bench/")


def python_files(repo: Path) -> list[str]:
    """Every .py path git tracks or would track (not ignored) in `repo`, outside tests/ and bench/."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
                         check=True, capture_output=True, text=True).stdout
    return sorted({p for p in out.splitlines() if not p.startswith(LEFT_OUT) and (repo / p).is_file()})


def lines(path: Path) -> int:
    """Newline characters in the file: what `wc -l` prints."""
    return path.read_bytes().count(b"\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]), help="checkout to measure")
    repo = Path(p.parse_args().repo).resolve()
    counts = {path: lines(repo / path) for path in python_files(repo)}
    lesson = sum(n for path, n in counts.items() if path.startswith(LESSON))
    total = sum(counts.values())
    print(f"lesson: {lesson:,} of {total:,} lines of Python outside tests/ and bench/: {100 * lesson / total:.1f}%")
    parts = Counter()  # a lesson part, or the folder of a file outside the lesson
    for path, n in counts.items():
        parts[next((part for part in LESSON if path.startswith(part)), str(Path(path).parent) + "/")] += n
    for part, n in sorted(parts.items()):
        print(f"  {'lesson' if part in LESSON else '':6}  {n:6,}  {part}")


if __name__ == "__main__":
    main()
