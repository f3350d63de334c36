"""Every package the code imports is named in a requirements file, and optional ones degrade as documented.

Oracle: (c) a property. The imports of minbert/, the scripts, tests/ and bench/ are read with
`ast` (plus `pytest.importorskip("X")` calls), the standard library and the repository's own
modules are set aside, and each remaining module is mapped to the distribution that provides it
(importlib.metadata). That distribution must appear in requirements.txt or requirements-dev.txt.
CI installs only those files into a fresh virtual environment (.ci/run), so a package installed
on a machine by hand can no longer make the suite pass there and fail for users.
"""

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ["minbert", "train_multitask.py", "train_mml.py"]
ALL = RUNTIME + ["tests", "bench"]


def python_files(paths):
    for p in paths:
        p = ROOT / p
        yield from ([p] if p.is_file() else sorted(p.rglob("*.py")))


def imported_modules(paths) -> dict[str, str]:
    """{top-level module: first file:line importing it}, for modules outside the stdlib and this repo."""
    local = {p.stem for p in python_files(ALL)} | {"minbert", "bench"}
    found = {}
    for file in python_files(paths):
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                names = [node.args[0].value]
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.setdefault(top, f"{file.relative_to(ROOT)}:{node.lineno}")
    return found


def requirement_names(*files) -> set[str]:
    names = set()
    for f in files:
        for line in (ROOT / f).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                names.add(re.split(r"[<>=!~\[; ]", line)[0].lower().replace("_", "-"))
    return names


def distributions(module: str) -> list[str]:
    return [d.lower().replace("_", "-") for d in importlib.metadata.packages_distributions().get(module, [])]


def test_every_import_is_named_in_a_requirements_file():
    named = requirement_names("requirements.txt", "requirements-dev.txt")
    missing = {m: where for m, where in imported_modules(ALL).items() if not set(distributions(m)) & named}
    assert not missing, (f"imported but named in no requirements file (CI's fresh venv would not have them): "
                         f"{missing}; add the distribution to requirements.txt (runtime) or requirements-dev.txt")


def test_runtime_code_imports_only_runtime_requirements():
    named = requirement_names("requirements.txt")
    optional = {"matplotlib"}   # imported inside try/except ImportError: plots are skipped without it (README)
    extra = {m: where for m, where in imported_modules(RUNTIME).items()
             if m not in optional and not set(distributions(m)) & named}
    assert not extra, f"minbert/ and the scripts import packages that requirements.txt does not name: {extra}"
    assert "transformers" not in imported_modules(RUNTIME), "minbert/ must never import transformers"


def test_pyproject_installs_the_package_with_the_runtime_requirements():
    """`pip install -e .` must put every folder of minbert/ on the path (a package it leaves out is a
    ModuleNotFoundError outside the clone) and ask for exactly requirements.txt, nothing else."""
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tool = project["tool"]["setuptools"]
    assert project["project"]["dynamic"] == ["dependencies"] and "dependencies" not in project["project"], \
        "pyproject.toml: the dependencies must come from requirements.txt (dynamic), not a second list"
    assert tool["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}, \
        f"pyproject.toml: [tool.setuptools.dynamic] should read requirements.txt, reads {tool['dynamic']}"
    assert tool["packages"]["find"] == {"include": ["minbert", "minbert.*"]}, \
        f"pyproject.toml should install the package minbert and its folders only, finds {tool['packages']['find']}"
    folders = {p.parent for p in (ROOT / "minbert").rglob("*.py") if "__pycache__" not in p.parts}
    unpackaged = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert not unpackaged, f"setuptools installs only folders with an __init__.py; these have none: {unpackaged}"
