"""The README's figures are produced by the code, not typed: its size line, every line range it cites, and its times.

A reading path says "`file` lines A–B, `name`": the function, class or method `name` (or the module's
`(docstring)`) must span exactly lines A to B of `file` today. The size line must equal what the files hold.
Each failure prints the line as it should read, so fixing the README is a copy.
"""

import ast
import re
from pathlib import Path
from conftest import bench_script

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


def readme_times():
    """bench/readme_times.py, the script that measures the README's times and renders its time lines."""
    return bench_script("readme_times")


def test_the_time_lines_are_what_bench_measured():
    """The quick start's, the tests' and the MML line's times are rendered from the committed measurements
    (bench/results/readme_times.json), and the quick suite, measured on a busy machine, printed every 30 s."""
    times = readme_times()
    results = times.load_results()
    for name in times.COMMANDS:
        written, measured = times.readme_region(name, README), times.render(name, results)
        assert written == measured, (f"README.md's {name} time line is not what bench/readme_times.py measured "
                                     f"(bench/results/readme_times.json); it should read:\n{measured}")
    busy = results.get("tests", {}).get("busy")
    assert busy is None or busy["silence_s"] <= times.SILENCE_RULE, (
        f"the quick suite was silent {busy['silence_s']} s on the busy machine (rule: at most "
        f"{times.SILENCE_RULE:.0f} s): make these tests fast or mark them slow: {busy['silent_tests'][:3]}")


def test_a_time_line_names_both_conditions_the_cpu_and_the_load():
    """The format, on one stored measurement of each condition: quiet and busy figures, the busy load, the CPU by
    family and model with what it gives bf16, the date; a condition not measured says so."""
    times = readme_times()
    one = {"wall_s": 600.0, "silence_s": 12.4, "load_start": 1.04, "load_mean": 2.26, "date": "2026-11-26",
           "cpu": "AMD EPYC 7B13", "family": "25", "model": "1", "isa": "AVX2 only", "bf16": False, "cores": 2,
           "torch": "2.13.0"}
    line = times.render("quickstart", {"quickstart": {"quiet": one, "busy": {**one, "wall_s": 900.0}}})
    assert line == ("**10.0 min** on a quiet machine (longest wait for output 12 s; load 1.0 at the start), "
                    "**15.0 min** with another job "
                    "busy on one core (longest wait for output 12 s; load 1.0 at the start, 2.3 over the run), on AMD "
                    "EPYC 7B13 (family 25, model 1; AVX2 only, so `--amp auto` runs fp32), 2 cores, torch 2.13.0; "
                    "2026-11-26; measured by `python bench/readme_times.py`"), line
    tests = {**one, "command": 'python -m pytest -q -m "not slow"', "ran": 1721, "suite": 1812}
    line = times.render("tests", {"tests": {"quiet": tests}})
    assert line.startswith('`python -m pytest -q -m "not slow"` runs **1,721 tests**: **10.0 min** on a quiet '
                           "machine (longest wait for output 12 s; load 1.0 at the start), with another job busy on "
                           "one core: not measured yet; 91 more, marked slow"), line
