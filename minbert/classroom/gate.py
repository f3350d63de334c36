"""The gate: what a solution block may name, read before any of it runs, by the grader and by the student (the
student copy carries this file with the lists, tests/ALLOWED.json and ALLOWED.md: `python tests/gate.py`).

It stops reflection, not maths: it reads every token of a block (identifiers, every link of an attribute chain, string
and bytes constants, f-string parts and format fields, dict keys, keyword names, decorators, imports) and refuses any
private or dunder name in any of them, what reaches code loading, files, processes or memory (`Lists`: the lists'
REFLECTION and WORDS), the assignment's own answer composites, and the constructs of OUTRIGHT. Every other public
name of the listed modules passes, in any form. A refusal is one line: "file:line: `name` why; what is".
"""

import ast
import builtins
import difflib
import importlib
import inspect
import json
import re
import string
import subprocess
import sys
import typing
from pathlib import Path

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
OUTRIGHT = dict(zip((ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await, ast.AsyncFunctionDef, ast.AsyncFor,
                     ast.AsyncWith, ast.ClassDef, ast.MatchClass), ("global nonlocal yield yield_from await async_def "
                                                                    "async_for async_with class match_class").split()))
FOREACH = re.compile(r"^torch\._foreach_[a-z]+_?$")   # the multi-tensor maths, elementwise (the fence checks each)
DUNDER = re.compile(r"(?<![A-Za-z0-9])__\w*[A-Za-z0-9]\w*")                     # anywhere in a string
PRIVATE_PATH = re.compile(r"^([A-Za-z]\w*\.)*_\w*[A-Za-z0-9]\w*(\.\w+)*$")    # a whole string naming `_x` or `a._b`


class Lists:
    """One assignment's lists, from their JSON form (allowlists.gate_lists): the modules and builtins a block may
    name, what is refused to every block (REFLECTION, WORDS) and to this one (its composites), each with its reason."""

    def __init__(self, data: dict, key: str | None):
        self.key, self.modules, self.builtins = key, set(data["modules"]), set(data["builtins"])
        self.forms, self.methods_of = data["forms"], data["methods_of"]
        self.words, self.suggest = re.compile(data["words"]), data["suggest"]
        self.refused = {p: f"is refused to every block ({why})" for p, why in data["reflection"].items()}
        self.refused |= {p: f"is assignment {key}'s answer ({why})"
                         for p, why in data["composites"].get(key, {}).items()}
        self.objects = {}                                  # {id: (object, path)}: the same object by any path
        for path in self.refused:
            obj = _resolve(path)
            if obj is not None:
                self.objects[id(obj)] = (obj, path)

    def listed(self, here: str, obj) -> str | None:
        """The refused path that `here` (reaching `obj`) is, or None."""
        if here in self.refused:
            return here
        for one in (obj, typing.get_origin(obj)):           # an alias of a refused class: np.typing.NDArray
            found = self.objects.get(id(one))
            if found and found[0] is one:
                return found[1]
        return None

    def why(self, name: str) -> str:
        """The refusal's end: what is on the list instead."""
        alt = self.suggest.get(name) or self.suggest.get(name.rsplit(".", 1)[0]) or self.suggest.get(name.strip("."))
        return f"{alt} is" if alt else "see ALLOWED.md"


def _resolve(path: str):
    """The object a dotted path names, read without running anything (modules already imported only), or None."""
    parts = path.split(".")
    obj = sys.modules.get(parts[0]) or importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 2):
        if obj is None:
            return None
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            obj = sys.modules.get(".".join(parts[:i]))
    return obj


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


def _type_nodes(n) -> list:
    """The names and attributes an annotation or isinstance's second argument names as types (never a call's)."""
    if isinstance(n, (ast.Name, ast.Attribute)):
        return [n]
    if isinstance(n, (ast.Tuple, ast.List)):
        return [t for e in n.elts for t in _type_nodes(e)]
    if isinstance(n, ast.Subscript):
        return _type_nodes(n.value) + _type_nodes(n.slice)
    return _type_nodes(n.left) + _type_nodes(n.right) if isinstance(n, ast.BinOp) else []


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


class _Reader:
    """Reads one file's blocks: every node on a block's lines against that block's lists."""

    def __init__(self, tree, text: str, rel: str, lists: dict):
        self.rel, self.lists, self.found, self.types = rel, lists, {}, set()
        self.line_of = {n: (key, first) for key, first, last in blocks(text) if key in lists
                        for n in range(first, last + 1)}
        top = _binds(tree)                                   # the file's imports and definitions: given code
        self.module, self.given = {n: p for n, p in top.items() if p}, {n for n, p in top.items() if not p}
        for n in ast.walk(tree):                             # what names a type and never calls it
            if isinstance(n, ast.arg) and n.annotation or isinstance(n, ast.AnnAssign):
                self.types.update(map(id, _type_nodes(n.annotation)))
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.returns:
                self.types.update(map(id, _type_nodes(n.returns)))
            elif self._call(n, ("isinstance", "issubclass"), 2):
                self.types.update(map(id, _type_nodes(n.args[1])))
        self.visit(tree, [])

    @staticmethod
    def _call(n, names, nargs) -> bool:
        return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names and len(
            n.args) == nargs and not n.keywords

    def refuse(self, node, name: str, why: str) -> bool:
        key, first = self.line_of[node.lineno]
        self.found.setdefault((key, first), f"{self.rel}:{node.lineno}: `{name}` {why}; {self.lists[key].why(name)}")
        return False

    def visit(self, node, scopes):
        mine = getattr(node, "lineno", 0) in self.line_of
        if mine and type(node) in OUTRIGHT:
            what = f"class {node.name}" if isinstance(node, ast.ClassDef) else OUTRIGHT[type(node)].replace("_", " ")
            return self.refuse(node, what, "is refused in a solution block")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            params = [x for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x]
            outer = a.defaults + [d for d in a.kw_defaults if d] + getattr(node, "decorator_list", []) + [
                x.annotation for x in params if x.annotation] + ([node.returns] if getattr(node, "returns", 0) else [])
            for name in [getattr(node, "name", "")] + [x.arg for x in params] if mine else []:
                if name.startswith("__"):
                    return self.refuse(node, name, "is a dunder name: refused in a solution block")
            for n in outer:
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
        if mine:
            done = self.token(node, scopes)
            if done is not None:
                return done
        for child in ast.iter_child_nodes(node):
            self.visit(child, scopes)

    def token(self, node, scopes):
        """Reads one node of a block; None: read its children too."""
        if isinstance(node, ast.Name):
            return self.name(node, scopes)
        if isinstance(node, ast.Attribute):
            if node.attr == "__name__" and self._call(node.value, ("type",), 1) and self.lookup("type", scopes) is None:
                return self.visit(node.value.args[0], scopes)          # type(x).__name__: the class's name
            return self.attribute(node, scopes)
        if isinstance(node, ast.Call):
            return self.call(node, scopes)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            return self.text(node, node.value if isinstance(node.value, str) else node.value.decode("latin-1"))
        if isinstance(node, ast.JoinedStr):                  # f-string: its text parts hold no dunder; code is code
            for part in node.values:
                if isinstance(part, ast.Constant) and DUNDER.search(part.value):
                    return self.refuse(node, DUNDER.search(part.value).group(), "is a dunder name in a string")
                if isinstance(part, ast.FormattedValue):
                    self.visit(part.value, scopes)
                    if part.format_spec:
                        self.visit(part.format_spec, scopes)
            return True
        if isinstance(node, ast.keyword) and node.arg and node.arg.startswith("_"):
            return self.refuse(node, node.arg, "is a private or dunder keyword name")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if getattr(node, "level", 0) or alias.name == "*":
                    return self.refuse(node, f"from {'.' * node.level}{node.module or ''} import {alias.name}",
                                       "is refused in a solution block")
                path = f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
                forms = self.lists[self.line_of[node.lineno][0]].forms
                if path in forms or any(f.startswith(path + ".") for f in forms):
                    continue                                  # `import types`: only its FORMS may be named
                if not self.chain(node, path, [], imported=True):
                    return False
            return True
        return None

    def text(self, node, value: str):
        """A string or bytes constant (a key, a message, a format string): no dunder anywhere, no private name as a
        whole; a format string's fields read no attribute or item (nested specs too)."""
        found = DUNDER.search(value) or PRIVATE_PATH.match(value)
        if found:
            return self.refuse(node, found.group(), "is a private or dunder name in a string")
        for field in _fields(value):
            if re.search(r"[.\[]", field):
                return self.refuse(node, "{" + field + "}", "reads an attribute or an item in a format field")
        return True

    def lookup(self, name: str, scopes) -> str | None:
        """'' for a local value, a dotted path for an import, 'given' for the file's own name; None: not bound."""
        for scope in reversed(scopes):
            if name in scope:
                return scope[name]
        return self.module.get(name) or ("given" if name in self.given else None)

    def name(self, node, scopes):
        key, _ = self.line_of[node.lineno]
        if node.id.startswith("__"):
            return self.refuse(node, node.id, "is a dunder name: refused in a solution block")
        found = self.lookup(node.id, scopes)
        if found == "" or found == "given" and not node.id.startswith("_"):
            return True
        if found == "given":
            return self.refuse(node, node.id, "is the given code's private name")
        if found:
            return self.chain(node, found, [])
        obj = getattr(builtins, node.id, None)
        if isinstance(obj, type) and issubclass(obj, BaseException) or node.id in self.lists[key].builtins - {
                "getattr", "hasattr", "type"}:
            return True
        return self.refuse(node, node.id, "is not a builtin a block may name")

    def call(self, node, scopes):
        """The idioms read as what they mean: getattr/hasattr with a literal name (the attribute it names), a
        form of FORMS; a `**` only of a dict written out (its keys read as keyword names)."""
        for k in node.keywords:
            if k.arg is None and not (isinstance(k.value, ast.Dict) and all(
                    isinstance(x, ast.Constant) and isinstance(x.value, str) and x.value.isidentifier()
                    and self.visit(x, scopes) is not False for x in k.value.keys)):
                return self.refuse(node, "**" + ast.unparse(k.value)[:40], "passes names the gate cannot read")
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("getattr", "hasattr") and self.lookup(f.id, scopes) is None:
            if not (2 <= len(node.args) <= (3 if f.id == "getattr" else 2) and not node.keywords and isinstance(
                    node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                return self.refuse(node, f.id, "names an attribute the gate cannot read (not a literal)")
            read = ast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=ast.Load())
            ast.copy_location(read, node)
            return all(self.visit(n, scopes) is not False for n in [read] + node.args[2:])
        path = self.path(f, scopes)
        if path in self.lists[self.line_of[node.lineno][0]].forms:
            if node.args or any(k.arg is None for k in node.keywords):
                return self.refuse(node, path, "takes literal keyword arguments only")
            return all(self.visit(k, scopes) is not False for k in node.keywords)
        return None

    def path(self, node, scopes) -> str | None:
        """The import path a name or an attribute chain on one spells, else None."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        found = self.lookup(node.id, scopes) if isinstance(node, ast.Name) else None
        return ".".join([found, *parts]) if found and found != "given" else None

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
        return self.values(node, parts, base)

    def values(self, node, parts, base) -> bool:
        """Attributes of a value, each link: no private or dunder name, none of WORDS; `.format` only on a string
        literal (whose fields text() read)."""
        words = self.lists[self.line_of[node.lineno][0]].words
        for i, part in enumerate(parts):
            if part.startswith("_"):
                return self.refuse(node, f".{part}", "is a private or dunder attribute")
            if words.search(part):
                return self.refuse(node, f".{part}", "reaches frames, code, memory or files")
            if part == "format" and not (i == 0 and isinstance(base, ast.Constant) and isinstance(base.value, str)):
                return self.refuse(node, ".format", "on anything but a string literal is refused")
        if parts[-1:] == ["data"] and isinstance(node.ctx, ast.Load):
            return self.refuse(node, ".data", "is read only on the way to a method (an array's is a memoryview)")
        if parts[-1:] == ["strides"] and not isinstance(node.ctx, ast.Load):
            return self.refuse(node, ".strides", "is assigned: an object array's would read pointers misaligned")
        return True

    def chain(self, node, path: str, parts: list, imported=False) -> bool:
        """A module's member by the path written (`F.softmax` -> torch.nn.functional.softmax), link by link: no
        private link (but torch's _foreach_ maths), no refused object (by identity: any alias), no module that
        another module imported; then the attributes of the value reached."""
        lists, names = self.lists[self.line_of[node.lineno][0]], path.split(".") + parts
        if names[0] == "minbert" and not imported and not path.startswith("minbert.core"):
            return self.values(node, parts, None)                  # the course's given code, as the file imports it
        if ".".join(names[:2]) in lists.forms:
            return self.refuse(node, ".".join(names[:2]), "takes literal keyword arguments only, called where named")
        if names[0] not in lists.modules:
            return self.refuse(node, ".".join(names[:2] if names[0] == "minbert" else names[:1]),
                               "is not a module a block may name")
        obj = sys.modules.get(names[0]) or importlib.import_module(names[0])
        for i in range(1, len(names) + 1):
            here = ".".join(names[:i])
            if names[i - 1].startswith("_") and not FOREACH.match(here):
                return self.refuse(node, here, "is private: refused in a solution block")
            if lists.words.search(names[i - 1]):
                return self.refuse(node, here, "reaches frames, code, memory or files")
            hit = lists.listed(here, obj)
            named = id(node) in self.types or hit in lists.methods_of and i < len(names)    # a type, not called
            if hit and not (named and isinstance(obj, type)):
                return self.refuse(node, here, ("" if hit == here else f"is `{hit}`, which ") + lists.refused[hit])
            if not inspect.ismodule(obj):
                home = getattr(obj, "__module__", None) if callable(obj) else None
                if isinstance(home, str) and home.split(".")[0].lstrip("_") not in lists.modules:
                    return self.refuse(node, here, f"is {home}'s, not a member of {names[i - 2]}")
                return self.values(node, names[i:], None)
            if obj.__name__ != here:                          # a module another module imported: not its member
                return self.refuse(node, here, f"is the module {obj.__name__}, not a member of {names[i - 2]}")
            if i == len(names):
                return imported or self.refuse(node, here, "is a module: only `import` may name it alone")
            try:
                obj = inspect.getattr_static(obj, names[i])
            except AttributeError:
                if f"{here}.{names[i]}" in lists.refused or names[i].startswith("_"):
                    continue                                  # refused by its path next, before any import
                try:
                    obj = importlib.import_module(f"{here}.{names[i]}")      # a public submodule not yet imported
                except ImportError:
                    return self.refuse(node, f"{here}.{names[i]}", "does not exist")
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


def check_text(text: str, rel: str, lists: dict) -> dict:
    """{(key, first line of the block): its first refusal} for the blocks of `lists`' assignments in one file."""
    try:
        return _Reader(ast.parse(text), text, rel, lists).found
    except (SyntaxError, ValueError, MemoryError):
        return {}                                           # scored 0 already, with its reason
    except RecursionError:
        return {(key, first): f"{rel}:{first}: the block is nested too deeply to read; refused"
                for key, first, _ in blocks(text) if key in lists}


def lists_of(data: dict, keys) -> dict:
    return {k: Lists(data, k) for k in keys}


# ---------------------------------------------------------------------- outside the blocks: the intake's rule

def split(text: str):
    """(outside lines with one '<block>' placeholder per block body, [(key, body text, first line)])."""
    outside, found, body, key = [], [], None, None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith(BEGIN) and body is None:
            key, body = s[len(BEGIN):].strip(), []
            outside.append((n, line.rstrip()))
            start = n + 1
        elif s.startswith(END) and body is not None:
            found.append((key, "\n".join(body) + "\n", start))
            outside += [(0, "<block>"), (n, line.rstrip())]
            body = None
        elif body is not None:
            body.append(line)
        else:
            outside.append((n, line.rstrip()))
    if body is not None:
        raise ValueError(f"the block '{BEGIN} {key}' is never closed by '{END}'")
    return outside, found


def _an_import(line: str, common: Lists, bound: set) -> bool:
    """Whether a line added outside the blocks is an import at the top level that the gate reads as it would in a
    block (a listed module's public name, refused to no block; a composite is refused where a block uses it) and
    that binds no name the file binds already (given code would call what it binds)."""
    try:
        (node,) = ast.parse(line).body
    except (SyntaxError, ValueError):
        return False
    if line[:1].isspace() or not isinstance(node, (ast.Import, ast.ImportFrom)) or set(_imported(node)) & bound:
        return False
    return not check_text(f"{BEGIN} k\n{line}\n{END}\n", "", {"k": common})


def changed_lines(template: str, submitted: str, rel: str, common: Lists) -> tuple[list, str, list]:
    """(the submission's blocks, '' when only the blocks and imports of listed modules changed, else a message
    naming the changed lines, the outside lines to merge the blocks into)."""
    try:
        t_out, t_blocks = split(template)
        s_out, s_blocks = split(submitted)
    except ValueError as e:
        return [], f"{rel}: {e}; keep both marker lines of every block", []
    if [k for k, *_ in t_blocks] != [k for k, *_ in s_blocks]:
        return [], (f"{rel}: the solution markers changed: expected blocks {[k for k, *_ in t_blocks]}, found "
                    f"{[k for k, *_ in s_blocks]}; keep '{BEGIN} <key>' and '{END}' as handed out"), []
    a, b = [line for _, line in t_out], [line for _, line in s_out]
    if abs(len(a) - len(b)) > 100:               # difflib is quadratic: a padded file is refused before it
        return [], (f"{rel} has {len(b)} lines outside the solution blocks where the handed-out file has {len(a)}: "
                    "only the code between the markers is graded; put everything else back"), []
    changes, bound = [], set(_binds(ast.parse(template)))
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal" or op == "insert" and all(_an_import(line, common, bound) for line in b[j1:j2]):
            continue
        at = s_out[j1][0] if j1 < len(s_out) else (s_out[-1][0] if s_out else 0)
        got = "; ".join(line.strip() for _, line in s_out[j1:j2])[:120]
        want = "; ".join(line.strip() for line in a[i1:i2])[:120]
        changes.append(f"line {at}: {'expected ' + repr(want) if want else 'added'}"
                       f"{', found ' + repr(got) if got else ' is missing'}")
    if not changes:
        return s_blocks, "", b
    return s_blocks, (f"{rel} differs from the handed-out file outside the solution blocks (only the code between "
                      "the markers and imports of the listed modules are graded; put everything else back): "
                      + " | ".join(changes[:5]) + (f" | and {len(changes) - 5} more" if len(changes) > 5 else "")), b


def merge(outside: list, bodies: list) -> str:
    """The outside lines (split's, as text) with each '<block>' replaced by the next body."""
    bodies = iter(bodies)
    return "\n".join(next(bodies).rstrip("\n") if line == "<block>" else line for line in outside) + "\n"


def main() -> int:
    """The student's pre-check: every graded file of the copy against the handed-out one (the copy's first commit)
    as the intake compares them, then every block read against ALLOWED.json; 1 if anything is refused."""
    root = Path(__file__).resolve().parents[1]
    data = json.loads((Path(__file__).parent / "ALLOWED.json").read_text(encoding="utf-8"))
    lists, common, refused = lists_of(data, data["composites"]), Lists(data, None), []
    try:
        first = subprocess.run(["git", "rev-list", "--max-parents=0", "HEAD"], cwd=root, capture_output=True,
                               text=True).stdout.split()
    except OSError:                                       # no git: the blocks are read all the same
        first = []
    if not first:
        refused.append("gate: the copy has no git history: the lines outside the blocks were not compared")
    for path in sorted((root / "minbert").rglob("*.py")):
        text, rel = path.read_text(encoding="utf-8"), str(path.relative_to(root))
        if BEGIN not in text:
            continue
        handed = subprocess.run(["git", "show", f"{first[-1]}:{rel}"], cwd=root, capture_output=True,
                                text=True) if first else None
        message = changed_lines(handed.stdout, text, rel, common)[1] if handed and not handed.returncode else ""
        if message:                                       # the grader reads no block of such a file: it scores 0
            refused.append(message)
            continue
        refused += check_text(text, rel, lists).values()
    print("\n".join(refused) or "gate: every solution block names only what its assignment may name (ALLOWED.md)")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
