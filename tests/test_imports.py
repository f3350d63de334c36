"""The package's import graph: no cycles, and no module importing one from a layer above it.

The layers, bottom to top (the README's file tree follows them). A module may import from its own
layer or below, never above: so `model.py` never needs a training concern, and a reader can learn
the package bottom-up. A new module must be placed here, or this test fails and says so.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "minbert"
LAYERS = [
    ("basics", {"errors", "atomic", "flags", "recipes", "metrics", "report", "seed_statistics", "meanshift", "dropout"}),
    ("machine, data and runs", {"device", "distributed", "interrupt", "hub", "config", "tokenizer", "data", "glue",
                                "sampling", "checkpoint", "optimizer_step", "adamw", "run_dir", "progress", "fast_paths"}),
    ("the model", {"attention", "layers", "model", "compiled", "export", "embedding_eval"}),
    ("tasks and heads", {"pair_heads", "multitask", "mml", "pals", "loss_scaling"}),
    ("methods and stages", {"smart", "r3f", "pcgrad", "gradvac", "gradient_compromise", "mnr", "head_pretraining",
                            "stages", "simcse"}),
    ("tools", {"ensemble", "mml_study", "study", "download", "classroom"}),
]


def imports(path: Path) -> set[str]:
    """The minbert modules `path` imports (at any depth of the file, lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "minbert":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("minbert."):
            found.add(node.module.split(".")[1])
    return found - {path.stem}


def test_every_module_has_a_layer():
    placed = set().union(*(mods for _, mods in LAYERS))
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules <= placed, f"place these minbert modules in a layer of tests/test_imports.py: {modules - placed}"


def test_no_module_imports_from_a_layer_above_it():
    layer = {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}
    upward = [f"{p.stem} ({LAYERS[layer[p.stem]][0]}) imports {m} ({LAYERS[layer[m]][0]})"
              for p in sorted(PACKAGE.glob("*.py")) if p.stem in layer
              for m in sorted(imports(p)) if m in layer and layer[m] > layer[p.stem]]
    assert not upward, "imports that climb the layers:\n" + "\n".join(upward)


def test_no_import_cycles():
    graph = {p.stem: imports(p) for p in PACKAGE.glob("*.py")}
    done, stack = set(), []

    def visit(m):
        if m in stack:
            raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
        if m in done or m not in graph:
            return
        stack.append(m)
        for d in sorted(graph[m]):
            visit(d)
        stack.pop()
        done.add(m)

    for m in sorted(graph):
        visit(m)
