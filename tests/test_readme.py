"""The README's figures are produced by the code, not typed: its size line and every line range it cites.

A reading path says "`file` lines A–B, `name`": the function, class or method `name` (or the module's
`(docstring)`) must span exactly lines A to B of `file` today. The size line must equal what the files hold.
Each failure prints the line as it should read, so fixing the README is a copy.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CITED = re.compile(r"`([\w./-]+\.py)` lines (\d+)–(\d+), `([\w.()]+)`")
BERT = ("config", "attention", "dropout", "layers", "model")


def lines(rel: str) -> int:
    return len((ROOT / rel).read_text(encoding="utf-8").splitlines())


def spans(rel: str) -> dict[str, tuple[int, int]]:
    """{name or Class.method or '(docstring)': (first line, last line)} of one file."""
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    found = {}

    def walk(body, prefix=""):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found[prefix + node.name] = (node.lineno, node.end_lineno)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, prefix + node.name + ".")
    walk(tree.body)
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        found["(docstring)"] = (tree.body[0].lineno, tree.body[0].end_lineno)
    return found


def size_line() -> str:
    bert = sum(lines(f"minbert/bert/{f}.py") for f in BERT)
    return (f"The BERT is {bert:,} lines in {len(BERT)} files (`minbert/bert/`: {', '.join(BERT)}), the optimizer "
            f"{lines('minbert/adamw.py'):,} (`minbert/adamw.py`), and each training script is one flat file: "
            f"`train_multitask.py` {lines('train_multitask.py'):,} lines, `train_mml.py` {lines('train_mml.py'):,}.")


def test_the_size_line_is_what_the_files_hold():
    written = README.split("<!-- size:begin -->\n")[1].split("\n<!-- size:end -->")[0]
    assert written == size_line(), f"README.md's size line is stale; it should read:\n{size_line()}"


def test_every_cited_line_range_spans_the_code_it_names():
    cited = CITED.findall(README)
    assert len(cited) >= 10, "the reading paths cite their stops as `file` lines A–B, `name`"
    stale = []
    for rel, first, last, name in cited:
        span = spans(rel).get(name)
        if span != (int(first), int(last)):
            stale.append(f"`{rel}` lines {first}–{last}, `{name}`: " +
                         (f"now lines {span[0]}–{span[1]}" if span else "no such name in the file"))
    assert not stale, "README.md cites line ranges the code no longer has:\n" + "\n".join(stale)


def test_the_line_range_check_catches_a_moved_function():
    """The check itself, on a range that is off by one."""
    rel, name = "minbert/methods/pcgrad.py", "pcgrad_algorithm_1"
    first, last = spans(rel)[name]
    assert spans(rel)[name] != (first + 1, last + 1)
    assert CITED.findall(f"`{rel}` lines {first}–{last}, `{name}`") == [(rel, str(first), str(last), name)]
