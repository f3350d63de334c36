"""The integrity report: solution lines that reach past tensor maths, flagged for a person to read.

The sandbox keeps a submission from the instructor's files, the network and the machine; it cannot keep
it from torch itself, which is in the box because every assignment needs it. torch holds implementations
of what the assignments ask for (flex attention's eager `math_attention`, the Adam kernels in
`torch/optim/adam.py`), and Python's reflection reaches them whatever names the AST ban refuses
(`type(torch).__getattribute__(torch, "__buil" + "tins__")`). What cannot be fenced is flagged, as a
similarity checker flags copying: per assignment, each line of the solution blocks that uses reflection
or private internals, with why. Instructor-only: it goes to the instructor's table, and to results.json
as a hidden test (Gradescope never shows hidden tests to students) and in `extra_data`.

An honest solution is tensor maths on its arguments: the instructor's reference solutions raise no flag
(tests/classroom/test_integrity.py).
"""

import ast
import textwrap

from minbert.classroom import submission

REFLECTION = {"__getattribute__", "__getattr__", "__dict__", "__builtins__", "__globals__", "__code__", "__class__",
              "__bases__", "__mro__", "__subclasses__", "__file__", "__loader__", "__spec__", "__import__",
              "meta_path", "path_hooks", "modules", "_getframe"}
DYNAMIC = {"getattr": "getattr", "setattr": "setattr", "delattr": "delattr", "exec": "exec", "eval": "eval",
           "compile": "compile", "globals": "globals", "locals": "locals", "vars": "vars", "__import__": "__import__",
           "__builtins__": "__builtins__", "__file__": "__file__"}
MODULES = {"importlib", "sys", "builtins", "inspect", "types", "ctypes", "gc", "runpy", "imp", "pkgutil", "zipimport"}
LIBRARY_ROOTS = {"torch", "F", "nn", "np", "numpy", "functional"}


def _dotted(node) -> list[str]:
    """['torch', '_higher_order_ops', 'flex_attention'] for an attribute chain on a name, else []."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def _private(parts: list[str]) -> bool:
    """torch._C, torch.ops, F._x ...; torch's `_foreach_` ops are the tensor maths of the multi-tensor AdamW."""
    return len(parts) > 1 and parts[0] in LIBRARY_ROOTS and any(
        p == "ops" or (p.startswith("_") and not p.startswith("_foreach_") and not (p.startswith("__") and
                                                                                    p.endswith("__")))
        for p in parts[1:])


def _string_built(node) -> bool:
    """'__buil' + 'tins__': a name assembled from string pieces."""
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and all(
        isinstance(side, ast.Constant) and isinstance(side.value, str) or _string_built(side)
        for side in (node.left, node.right))


def why_flagged(node) -> str:
    """'' or why this node is worth a person's look."""
    if isinstance(node, ast.Attribute) and node.attr in REFLECTION:
        return f"reflection ({node.attr})"
    if isinstance(node, ast.Attribute) and _private(_dotted(node)) and not _private(_dotted(node.value)):
        return f"private internals ({'.'.join(_dotted(node))})"
    if isinstance(node, ast.Name) and node.id in DYNAMIC:
        if node.id in ("getattr", "setattr", "delattr"):
            return ""                                   # judged at the call: a constant name is plain access
        return f"dynamic code or names ({node.id})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr",
                                                                                             "delattr"):
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return f"{node.func.id} with a computed name"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
        for m in mods:
            parts = m.split(".")
            if parts[0] in MODULES:
                return f"imports {m}"
            if any(p.startswith("_") for p in parts[1:]) or "ops" in parts[1:]:
                return f"imports private internals ({m})"
    if _string_built(node):
        return "a name built from string pieces"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
            node.value.endswith((".py", ".pyc", ".so")) or "site-packages" in node.value or "/torch/" in node.value):
        return "names a source or library file"
    return ""


def flags_in(body: str, rel: str, first_line: int) -> list[str]:
    """'minbert/x.py:N: <the line> (why)' for each flagged line of one block, in line order, one per line."""
    lines = textwrap.dedent(body).splitlines()
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return []                                        # scored 0 already, with its reason
    found = {}
    for node in ast.walk(tree):
        why = why_flagged(node)
        line = getattr(node, "lineno", None)
        if why and line and why not in found.get(line, []):
            found.setdefault(line, []).append(why)
    return [f"{rel}:{first_line + n - 1}: {lines[n - 1].strip()[:100]} ({'; '.join(whys)})"
            for n, whys in sorted(found.items())]


def report(template_dir, selected) -> dict[str, list[str]]:
    """{assignment: flagged lines} over the solution blocks laid into the template (all assignments graded)."""
    out = {k: [] for k in selected}
    for path in sorted((template_dir / "minbert").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        rel = str(path.relative_to(template_dir))
        for key, body, first in submission.split(text)[1]:
            if key in out:
                out[key] += flags_in(body, rel, first)
    return out
