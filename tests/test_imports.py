"""The package's import graph: the folders are the layers, and nothing imports upward or in a circle.

A module's layer is its folder (`minbert/bert/model.py` is in `bert`; a module at the top, such as
`adamw.py`, is a layer of its own). The order of the layers, bottom to top, is the one minbert/__init__.py's
docstring lists. A module may import from its own layer or one listed before it, never after: so the
model never needs a training concern, and a reader can learn the package bottom-up. A new module is
placed by the folder it is saved in; no table here needs editing.
"""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "minbert"


def layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return ".".join(("minbert",) + (rel.parts[:-1] if rel.name == "__init__" else rel.parts))


def is_module(dotted: str) -> bool:
    """'minbert.bert.model' names a file or a package (not a function or class imported from one)."""
    path = PACKAGE.parent / dotted.replace(".", "/")
    return path.with_suffix(".py").exists() or path.is_dir()


def imports(path: Path) -> set[str]:
    """The minbert modules (or packages) `path` imports, as dotted names, lazy imports included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:        # relative: resolve against the file's package
                base = module_of(path).split(".")
                base = base[: len(base) - node.level + (path.name == "__init__.py")]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "minbert" or mod.startswith("minbert."):
                found.add(mod)
                found |= {f"{mod}.{a.name}" for a in node.names if is_module(f"{mod}.{a.name}")}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("minbert.")}
    return found - {module_of(path), "minbert"}


def layer_of_module(name: str) -> str:
    return name.split(".")[1]


def modules():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def declared_order() -> list[str]:
    """The layers as minbert/__init__.py's docstring lists them, bottom to top ('    core/  ...', '    adamw.py ...')."""
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text()))
    return [m.group(1) for m in re.finditer(r"^\s{4}(\w+)(?:/|\.py)\s", doc, re.M)]


def test_every_layer_is_listed_in_the_package_docstring():
    on_disk = {layer_of(p) for p in modules()} - {"__init__", "__main__"}
    listed = declared_order()
    gone = set(listed) - on_disk - {"classroom"}        # the student copy has no classroom/
    assert on_disk <= set(listed) and not gone, (f"minbert/__init__.py's docstring lists the layers {listed}; the "
                                                 f"folders and top modules on disk are {sorted(on_disk)}: add or "
                                                 f"remove a line there")


def test_every_folder_says_what_its_layer_is():
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = folder / "__init__.py"
        assert init.exists() and ast.get_docstring(ast.parse(init.read_text())), \
            f"minbert/{folder.name}/__init__.py should open with a docstring saying what the layer is"


def test_the_top_of_the_package_is_a_map_of_at_most_ten_entries():
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 10, f"minbert/ holds {len(entries)} entries: {entries}; put new modules in a layer folder"


def test_no_module_imports_from_a_layer_above_it():
    order = {name: i for i, name in enumerate(declared_order())}
    upward = [f"{p.relative_to(PACKAGE.parent)} ({layer_of(p)}) imports {m} ({layer_of_module(m)})"
              for p in modules() if layer_of(p) in order
              for m in sorted(imports(p)) if order.get(layer_of_module(m), -1) > order[layer_of(p)]]
    assert not upward, ("imports that climb the layers (order: " + " < ".join(declared_order()) + "):\n"
                        + "\n".join(upward))


def test_the_folder_graph_has_no_cycle():
    graph = {}
    for p in modules():
        graph.setdefault(layer_of(p), set()).update(layer_of_module(m) for m in imports(p))
    find_cycle({k: v - {k} for k, v in graph.items()}, "folder")


def test_no_import_cycles():
    find_cycle({module_of(p): imports(p) for p in modules()}, "import")


def find_cycle(graph: dict, what: str):
    done, stack = set(), []

    def visit(m):
        if m in stack:
            raise AssertionError(f"{what} cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
        if m in done or m not in graph:
            return
        stack.append(m)
        for d in sorted(graph[m]):
            visit(d)
        stack.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
