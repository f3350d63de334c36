"""How soon each method file gets to the point: its module docstring's length and its first code line.

For every minbert/methods/*.py (except __init__.py): the docstring's line count, and the line of the
first function or class definition (imports and constants do not count: the first thing a reader can
run). The house rule (docs/layout.md): a docstring of at most 30 lines, the first code within 60.
With --before REV the same figures are read from that git revision too, side by side.

    python bench/method_heads.py [--before REV] [--markdown]
"""

import argparse
import ast
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
METHODS = "minbert/methods"
MAX_DOCSTRING, MAX_FIRST_CODE = 30, 60


def head(source: str) -> tuple[int, int | None]:
    """(docstring lines, line of the first module-level def or class, decorators included)."""
    tree = ast.parse(source)
    body = tree.body
    doc = body[0] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else None
    doc_lines = doc.end_lineno - doc.lineno + 1 if doc is not None else 0
    defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    first = min((min([n.lineno] + [d.lineno for d in n.decorator_list]) for n in defs), default=None)
    return doc_lines, first


def files_at(rev: str | None) -> dict[str, str]:
    """{file name: source} of the method files, in the working tree or at a git revision."""
    if rev is None:
        return {p.name: p.read_text() for p in sorted((REPO / METHODS).glob("*.py")) if p.name != "__init__.py"}
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:{METHODS}"], cwd=REPO, check=True,
                           capture_output=True, text=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{METHODS}/{n}"], cwd=REPO, check=True, capture_output=True,
                              text=True).stdout for n in names if n.endswith(".py") and n != "__init__.py"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", default=None, help="a git revision to compare with (e.g. main)")
    args = p.parse_args()
    now = {n: head(s) for n, s in files_at(None).items()}
    before = {n: head(s) for n, s in files_at(args.before).items()} if args.before else {}

    def cell(value, limit):
        return "-" if value is None else f"{value}" + ("" if value <= limit else " (over)")

    header = ["file"] + (["docstring lines before", "first code before"] if args.before else []) + \
             ["docstring lines", "first code line"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in sorted(set(now) | set(before)):
        row = [f"`{METHODS}/{name}`"]
        if args.before:
            b = before.get(name, (None, None))
            row += [cell(b[0], MAX_DOCSTRING), cell(b[1], MAX_FIRST_CODE)]
        n = now.get(name, (None, None))
        row += [cell(n[0], MAX_DOCSTRING), cell(n[1], MAX_FIRST_CODE)]
        print("| " + " | ".join(row) + " |")
    over = [n for n, (d, f) in now.items() if d > MAX_DOCSTRING or f is None or f > MAX_FIRST_CODE]
    print(f"\nLimits: docstring ≤ {MAX_DOCSTRING} lines, first def/class by line {MAX_FIRST_CODE}. "
          f"Over now: {', '.join(over) if over else 'none'}.")


if __name__ == "__main__":
    main()
