"""The gate: what a solution block may name, read before any of it runs, by the grader and by the student (the
student copy carries this file with each assignment's list, ALLOWED.json and ALLOWED.md: `python tests/gate.py`).

Every identifier, attribute, import, call target and decorator in a block must be on its assignment's list (`Lists`,
ALLOWED.md says what each holds), resolved with Python's scoping; anything else is refused, so private and dunder
names, frame and code internals (INTERNALS, whoever defines them) and the constructs of OUTRIGHT. A refusal is one
line: "file:line: `name` is not on assignment K's list; <what is>".
"""

import ast
import builtins
import importlib
import inspect
import json
import re
import string
import sys
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
INTERNALS = re.compile(r"^(f|gi|cr|ag|tb|co)_|^(mro|fget|fset|fdel|ctypes|tofile|dump|dumps)$")   # frames, code...
OUTRIGHT = dict(zip((ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await, ast.AsyncFunctionDef, ast.AsyncFor,
                     ast.AsyncWith, ast.ClassDef, ast.MatchClass), ("global nonlocal yield yield_from await async_def "
                                                                    "async_for async_with class match_class").split()))


class Lists:
    """One assignment's list, from the lists' JSON form (allowlists.gate_lists): the shared vocabulary, the
    assignment's own calls, what it removes."""

    def __init__(self, data: dict, key: str):
        self.key, self.suggest, self.removed = key, data["suggest"], data["removed"].get(key, {})
        self.calls = {f"{space}{name}" for name in data["vocabulary"] if name not in self.removed
                      for space in data["namespaces"]} | set(data["own"][key])
        self.attributes = {c.split(".")[2] for c in self.calls if c.startswith("torch.Tensor.") and c.count(".") == 2}
        self.attributes |= set(data["attributes"])
        self.builtins, self.modules, self.members = set(data["builtins"]), set(data["modules"]), set(data["members"])

    def member(self, path: str, obj) -> bool:
        """Whether a module's member, by its canonical path, is on the list."""
        if isinstance(obj, type) and issubclass(obj, BaseException) or path in self.members or path in self.calls:
            return True
        if path.startswith("torch."):
            return type(obj).__name__ == "dtype" or type(obj) in (int, float, bool)
        return path.startswith("math.") and not path.split(".")[-1].startswith("_")

    def why(self, name: str) -> str:
        """The refusal's end: what is on the list instead."""
        short = name.rsplit(".", 1)[-1].lstrip("`")
        if short in self.removed or name in self.removed:
            return f"assignment {self.key} computes it ({self.removed.get(short) or self.removed[name]})"
        alt = self.suggest.get(name) or self.suggest.get(short)
        return f"{alt} is" if alt else f"see assignment {self.key}'s list in ALLOWED.md"


def _imported(node) -> dict:
    """{local name: dotted path} an import statement binds (`import a.b` binds a; `from a import b as c`: c, a.b)."""
    if isinstance(node, ast.Import):
        return {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names}
    return {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}


def _binds(scope) -> dict:
    """{name: import path or ''} that a module, function, lambda or comprehension binds in its own scope."""
    out, todo = {}, [g.target for g in getattr(scope, "generators", [])]
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        out = {x.arg: "" for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}
    if hasattr(scope, "body"):
        todo = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update(_imported(n))
        name = n.id if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) else n.rest if isinstance(
            n, ast.MatchMapping) else getattr(n, "name", None) if not isinstance(n, ast.alias) else None
        if isinstance(name, str):
            out.setdefault(name, "")
        if not isinstance(n, SCOPES + (ast.ClassDef,)):
            todo += ast.iter_child_nodes(n)
    return out


def blocks(text: str) -> list[tuple[str, int, int]]:
    """[(key, first line, last line)] of the solution blocks' bodies in a file."""
    found, key = [], None
    for n, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if s.startswith(BEGIN) and key is None:
            key, first = s[len(BEGIN):].strip(), n + 1
        elif s.startswith(END) and key is not None:
            found.append((key, first, n - 1))
            key = None
    return found


def given_attributes(package: Path) -> set:
    """The public attribute names the package's given code defines on its classes and objects: methods, class
    fields, `self.x = ...`, register_buffer/register_parameter/add_module names (solution blocks left out)."""
    found = set()
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        inside = {n for _, a, b in blocks(text) for n in range(a, b + 1)}
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue                                    # the grader reads the template; a student's own file
        for n in ast.walk(tree):
            if getattr(n, "lineno", 0) in inside:
                continue
            if isinstance(n, ast.ClassDef):
                for m in n.body:
                    found |= {m.name} if isinstance(m, (ast.FunctionDef, ast.ClassDef)) else \
                        {t.id for t in getattr(m, "targets", [getattr(m, "target", None)]) if isinstance(t, ast.Name)}
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                found.add(n.attr)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.args and n.func.attr in (
                    "register_buffer", "register_parameter", "add_module") and isinstance(n.args[0], ast.Constant):
                found.add(str(n.args[0].value))
    return {n for n in found if not n.startswith("_")}


class _Reader:
    """Reads one file's blocks: every node on a block's lines against that block's list."""

    def __init__(self, tree, text: str, rel: str, lists: dict, given: set):
        self.rel, self.lists, self.seen = rel, lists, set()
        self.words = {k: lists[k].attributes | given for k in lists}
        self.line_of = {n: (key, first) for key, first, last in blocks(text) if key in lists
                        for n in range(first, last + 1)}
        top = _binds(tree)                                   # the file's imports and definitions: given code
        self.module, self.given = {n: p for n, p in top.items() if p}, {n for n, p in top.items() if not p}
        for n in ast.walk(tree):                             # attributes a block gives its own objects
            if n.__dict__.get("lineno") in self.line_of:
                key = self.line_of[n.lineno][0]
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                    self.words[key].add(n.attr)
                elif isinstance(n, ast.Call) and getattr(n.func, "attr",
                                                         getattr(n.func, "id", "")) == "SimpleNamespace":
                    self.words[key] |= {k.arg for k in n.keywords if k.arg}
        self.words = {k: {w for w in words if not INTERNALS.search(w)} for k, words in self.words.items()}
        self.found = {}                                      # {(key, first line): the block's first refusal}
        self.visit(tree, [])

    def refuse(self, node, name: str, why: str = "") -> bool:
        key, first = self.line_of[node.lineno]
        why = why or f"is not on assignment {key}'s list"
        self.found.setdefault((key, first), f"{self.rel}:{node.lineno}: `{name}` {why}; {self.lists[key].why(name)}")
        return False

    def visit(self, node, scopes):
        mine = getattr(node, "lineno", 0) in self.line_of
        if mine and type(node) in OUTRIGHT:
            what = f"class {node.name}" if isinstance(node, ast.ClassDef) else OUTRIGHT[type(node)].replace("_", " ")
            return self.refuse(node, what, "is refused in a solution block")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            outer = a.defaults + [d for d in a.kw_defaults if d] + getattr(node, "decorator_list", []) + [
                x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x and x.annotation]
            if mine and not isinstance(node, ast.Lambda):
                if node.name.startswith("__") and node.name.endswith("__"):
                    return self.refuse(node, node.name, "is a dunder method: refused in a solution block")
                for d in node.decorator_list:
                    base = d.func if isinstance(d, ast.Call) else d
                    while isinstance(base, ast.Attribute):
                        base = base.value
                    if isinstance(base, ast.Name) and self.lookup(base.id, scopes) == "":
                        return self.refuse(d, "@" + ast.unparse(d), "is a decorator the block defines: refused")
            for n in outer + ([node.returns] if getattr(node, "returns", None) else []):
                self.visit(n, scopes)
            inner = scopes + [_binds(node)]
            for n in node.body if isinstance(node.body, list) else [node.body]:
                self.visit(n, inner)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            self.visit(node.generators[0].iter, scopes)
            inner = scopes + [_binds(node)]
            rest = [node.elt] if hasattr(node, "elt") else [node.key, node.value]
            for g in node.generators:
                rest += [g.target, *g.ifs] + ([g.iter] if g is not node.generators[0] else [])
            for n in rest:
                self.visit(n, inner)
            return
        if mine and isinstance(node, ast.Name):
            return self.name(node, scopes)
        if mine and isinstance(node, ast.Attribute):
            return self.attribute(node, scopes)
        if mine and isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                path = f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
                if getattr(node, "level", 0) or alias.name == "*":
                    return self.refuse(node, f"from {'.' * node.level}{node.module or ''} import {alias.name}",
                                       "is refused in a solution block")
                if not self.chain(node, path, [], imported=True):
                    return
        for child in ast.iter_child_nodes(node):
            self.visit(child, scopes)

    def lookup(self, name: str, scopes) -> str | None:
        """'' for a local value, a dotted path for an import, 'given' for the file's own name; None: not bound."""
        for scope in reversed(scopes):
            if name in scope:
                return scope[name]
        return self.module.get(name) or ("given" if name in self.given else None)

    def name(self, node, scopes):
        key, _ = self.line_of[node.lineno]
        if node.id.startswith("__") and node.id.endswith("__"):
            return self.refuse(node, node.id, "is a dunder name: refused in a solution block")
        found = self.lookup(node.id, scopes)
        if found == "" or found == "given" and not node.id.startswith("_"):
            return
        if found and found != "given":
            return self.chain(node, found, [])
        obj = getattr(builtins, node.id, None)
        if found is None and (node.id in self.lists[key].builtins or isinstance(obj, type) and
                              issubclass(obj, BaseException)):
            return
        self.refuse(node, node.id)

    def attribute(self, node, scopes):
        parts, base = [], node
        while isinstance(base, ast.Attribute):
            parts.insert(0, base.attr)
            base = base.value
        found = self.lookup(base.id, scopes) if isinstance(base, ast.Name) else ""
        if found and found != "given":
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                return self.refuse(node, ".".join([found, *parts]), "is a library's attribute: assigning it is refused")
            return self.chain(node, found, parts)
        self.visit(base, scopes)
        self.values(node, parts, base)

    def values(self, node, parts, base) -> bool:
        """Attributes of a value: each from the vocabulary; `.format` on a string literal whose fields name
        positions or keywords only."""
        key, _ = self.line_of[node.lineno]
        for i, part in enumerate(parts):
            if part == "format" and i == 0 and isinstance(base, ast.Constant) and isinstance(base.value, str):
                if any(re.search(r"[.\[]", f) for f in _fields(base.value)):
                    return self.refuse(node, base.value, "reads an attribute or an item in a format field: refused")
            elif part.startswith("_") or part == "format" or part not in self.words[key]:
                return self.refuse(node, f".{part}")
        return True

    def chain(self, node, path: str, parts: list, imported=False) -> bool:
        """A module's member by its canonical path (`F.softmax` -> torch.nn.functional.softmax), then the
        attributes of that value; a module itself only where an import names it, or on the way to a member."""
        key, _ = self.line_of[node.lineno]
        lists, names = self.lists[key], path.split(".") + parts
        if names[0] == "minbert" and not imported and not path.startswith("minbert.core"):
            return self.values(node, parts, None)                  # the course's given code, as the file imports it
        if names[0] not in lists.modules:
            return self.refuse(node, ".".join(names[:2] if names[0] == "minbert" else names[:1]))
        obj = sys.modules.get(names[0]) or importlib.import_module(names[0])
        for i in range(1, len(names) + 1):
            here = ".".join(names[:i])
            if not inspect.ismodule(obj):
                self.seen.add(here)
                private = [p for p in names[:i] if p.startswith("_")]
                if private and (private != names[i - 1:i] or here not in lists.calls) or not lists.member(here, obj):
                    return self.refuse(node, here)
                return self.values(node, names[i:], None)
            if obj.__name__ != here:                          # a module another module imported: not its member
                return self.refuse(node, here)
            if i == len(names):
                if imported and here in lists.modules:
                    return True
                return self.refuse(node, here, "is a module: only `import` may name it alone")
            try:
                obj = inspect.getattr_static(obj, names[i])
            except AttributeError:
                return self.refuse(node, ".".join(names[:i + 1]))
        return True


def _fields(text: str):
    """The field names of a format string, its nested specs' too."""
    try:
        for _, name, spec, _ in string.Formatter().parse(text):
            if name is not None:
                yield name
                yield from _fields(spec or "")
    except ValueError:
        return


def check_text(text: str, rel: str, lists: dict, given: set) -> dict:
    """{(key, first line of the block): its first refusal} for the blocks of `lists`' assignments in one file."""
    try:
        return _Reader(ast.parse(text), text, rel, lists, given).found
    except (SyntaxError, ValueError, MemoryError):
        return {}                                           # scored 0 already, with its reason
    except RecursionError:
        return {(key, first): f"{rel}:{first}: the block is nested too deeply to read; refused"
                for key, first, _ in blocks(text) if key in lists}


def lists_of(data: dict, keys) -> dict:
    return {k: Lists(data, k) for k in keys}


def named(text: str, lists: Lists) -> set:
    """The torch paths the blocks of `lists`' assignment write off its list (what allowlist_recording.py records)."""
    reader = _Reader(ast.parse(text), text, "", {lists.key: lists}, set())
    return {p for p in reader.seen if p.startswith("torch.") and not lists.member(p, None)}


def main() -> int:
    """The student's pre-check: every block of the copy's package read against ALLOWED.json; 1 if any is refused."""
    root = Path(__file__).resolve().parents[1]
    data = json.loads((Path(__file__).parent / "ALLOWED.json").read_text(encoding="utf-8"))
    lists, given, refused = lists_of(data, data["own"]), given_attributes(root / "minbert"), []
    for path in sorted((root / "minbert").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if BEGIN in text:
            refused += check_text(text, str(path.relative_to(root)), lists, given).values()
    print("\n".join(refused) or "gate: every solution block names only what its assignment's list holds (ALLOWED.md)")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
