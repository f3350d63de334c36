"""The integrity report: every call in a solution block must resolve, by reading the code, to a callable on the
assignment's list; whatever does not is flagged, with a one-line reason, for a person to read.

The sandbox keeps a submission from the instructor's files, the network and the machine; the runtime fence
(fence.py) refuses every operator and torch call off the assignment's allow-lists. Neither can tell torch's own
Python implementation of an assignment (`torch.optim.AdamW.step`, flex attention's eager `math_attention`) from a
student's, and reflection inside the student's process can take the fence down (`torch._C._pop_torch_dispatch_
stack`). Both need a name that is not tensor maths: a library class or module, a private or dunder attribute,
getattr, a string that names a path. So this report is an allow-list too. A call is listed when it resolves to:
  - a torch callable on the assignment's `allowed_calls` (fence.call_name: `torch.matmul`, `torch.nn.functional.
    softmax`, `torch.Tensor.softmax` for a method of any value), written by its public name;
  - a builtin of BUILTINS or an exception class; a public function of `math`; numpy's elementary functions and
    array methods (NUMPY, NDARRAY) in a file that imports numpy; OTHER (Counter, dataclasses.replace, ...);
  - the file's own given code: what it defines, what it imports from minbert (not minbert.core), `self`'s
    members and their methods (nn.Module's MODULE methods, containers' CONTAINER methods), a name the enclosing
    function binds (a parameter, a loop variable) and what the block defines (a def, a lambda).
Flagged, each with its reason: any other call or reference to a library callable; the names of DYNAMIC
(getattr, eval, __import__, ...); an import of a module not in IMPORTABLE (operator, functools, importlib, sys,
...); a dunder or private attribute (unless the written name is itself listed: AdamW's `torch._foreach_mul_`); an
assignment to a library's attribute; a string constant that names a dotted path, a dunder or a .py file; a string
built with %, format, an f-string, join or +. Strings in an assert's message, a raise or a print are messages, not
names: `import types` is not flagged either (its constructors of code are calls off the list).

Instructor-only: it goes to the instructor's table, and to results.json as a hidden test (Gradescope never shows
hidden tests to students) and in `extra_data`. The reference solutions and an honest corpus in other styles raise
no flag (tests/classroom/test_integrity.py).
"""

import ast
import builtins
import inspect
import math  # noqa: F401  (resolve_path reads these modules as imported, and imports nothing itself)
import re

import numpy  # noqa: F401
import torch  # noqa: F401

from minbert.classroom import assignments as C, submission
from minbert.classroom.fence import call_name, resolve as resolve_path

BUILTINS = {"abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "frozenset", "int", "isinstance",
            "iter", "len", "list", "max", "min", "next", "pow", "print", "range", "reversed", "round", "set", "slice",
            "sorted", "str", "sum", "super", "tuple", "zip"}
DYNAMIC = {"getattr", "setattr", "delattr", "hasattr", "eval", "exec", "compile", "__import__", "globals", "locals",
           "vars", "open", "breakpoint", "input", "type", "object", "dir", "id", "memoryview", "callable", "map",
           "filter", "classmethod", "staticmethod", "property"}
IMPORTABLE = {"math", "torch", "torch.nn", "torch.nn.functional", "numpy", "collections", "typing", "types",
              "dataclasses"}
OTHER = {"collections.Counter", "collections.defaultdict", "collections.OrderedDict", "dataclasses.replace",
         "types.SimpleNamespace", "copy.copy", "copy.deepcopy"}
CONTAINER = {"append", "extend", "insert", "pop", "remove", "clear", "items", "keys", "values", "get", "update",
             "setdefault", "copy", "index", "count", "add", "discard", "sort", "reverse", "startswith", "endswith",
             "split", "strip", "lower", "upper", "most_common"}
MODULE = {"parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
          "named_modules", "state_dict", "load_state_dict", "train", "eval", "requires_grad_", "zero_grad", "forward"}
NUMPY = {"abs", "absolute", "sort", "argsort", "lexsort", "unique", "where", "zeros", "ones", "empty", "full",
         "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace", "array", "asarray", "concatenate",
         "stack", "flatnonzero", "nonzero", "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "maximum",
         "minimum", "sqrt", "exp", "log", "clip", "cumsum", "diff", "isclose", "allclose", "all", "any", "round",
         "floor", "ceil", "searchsorted", "median", "partition", "take", "take_along_axis", "count_nonzero",
         "logical_and", "logical_or", "logical_not", "isfinite", "isnan", "square", "sign", "float64", "int64",
         "bool_", "float32", "int32", "newaxis", "inf", "nan"}
NDARRAY = {"sum", "mean", "max", "min", "argmax", "argmin", "sort", "argsort", "copy", "reshape", "astype", "tolist",
           "any", "all", "nonzero", "item", "ravel", "flatten", "cumsum", "clip", "round", "squeeze", "transpose",
           "fill", "repeat", "take"}
PATHLIKE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$|__\w+__|\.pyc?\b|\.so\b|site-packages|/torch/")


def _dotted(node):
    """(base node, ['a', 'b']) for an attribute chain base.a.b."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return node, parts[::-1]


class _Block:
    """One solution block of one file, read in the context of the whole laid-over file."""

    def __init__(self, tree, lines: range, a, names: dict, given: set, numpy: bool):
        self.a, self.given, self.numpy, self.lines = a, given, numpy, lines
        self.nodes = [n for n in ast.walk(tree) if lines.start <= getattr(n, "lineno", 0) < lines.stop]
        self.names = dict(names)                      # the file's imports, and the block's own
        for n in self.nodes:
            self.names.update(_imported(n))
        scope = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.lineno < lines.start and f.end_lineno >= lines.stop - 1]
        self.bound = set()
        for f in scope:                               # what the enclosing functions bind, the block included
            args = f.args
            self.bound |= {x.arg for x in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if x}
            for n in ast.walk(f):
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    self.bound.add(n.id)
                elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not f:
                    self.bound.add(n.name)
                elif isinstance(n, ast.arg):
                    self.bound.add(n.arg)
        self.messages = set()                         # nodes inside an assert's message, a raise or a print
        for n in self.nodes:
            inside = (n.msg if isinstance(n, ast.Assert) else n.exc if isinstance(n, ast.Raise) else
                      n if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print" else None)
            if inside is not None:
                self.messages |= {id(m) for m in ast.walk(inside)}
        self.methods = {c.split(".")[2] for c in a.allowed_calls if c.startswith("torch.Tensor.") and c.count(".") == 2}
        self.methods |= CONTAINER | MODULE | (NDARRAY if numpy else set())

    def path(self, node):
        """'torch.nn.functional.softmax' for F.softmax, 'torch.nn.functional' for F (through the file's imports and
        the block's; a name the function binds is not an import), or None."""
        base, parts = _dotted(node)
        if isinstance(base, ast.Name) and base.id in self.names and base.id not in self.bound:
            return ".".join([self.names[base.id], *parts])
        return None

    def listed(self, path: str) -> str:
        """'' when the dotted path is a listed callable, else why not."""
        root = path.split(".")[0]
        obj = resolve_path(path)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return ""
        if root == "torch":
            if obj is None:
                return f"{path}, which torch does not have"
            if not callable(obj):
                return "" if not inspect.ismodule(obj) else f"refers to the module {path}"
            name = call_name(obj)
            if name in self.a.allowed_calls and (name == path or not any(p.startswith("_") for p in path.split("."))):
                return ""
            return f"{path}, which is not on assignment {self.a.key}'s list"
        public = len(path.split(".")) == 2 and not path.split(".")[1].startswith("_")
        if root == "math" and public or root == "numpy" and public and path.split(".")[1] in NUMPY:
            return ""
        if root == "minbert" and not path.startswith("minbert.core.") or path in OTHER:
            return ""
        return f"{path}, which is not on assignment {self.a.key}'s list"

    def why_call(self, call: ast.Call) -> str:
        f = call.func
        if isinstance(f, ast.Name):
            if f.id in DYNAMIC:
                return f"dynamic code or names ({f.id})"
            if f.id in self.bound or f.id in self.given or f.id in BUILTINS:
                return ""
            if f.id in self.names:
                why = self.listed(self.names[f.id])
                return f"calls {why}" if why else ""
            exc = getattr(builtins, f.id, None)
            if isinstance(exc, type) and issubclass(exc, BaseException):
                return ""
            return f"calls {f.id}, which is not on assignment {self.a.key}'s list"
        if isinstance(f, ast.Attribute):
            path = self.path(f)
            if path is not None:
                why = self.listed(path)
                return f"calls {why}" if why else ""
            base, parts = _dotted(f)
            if isinstance(base, ast.Name) and base.id == "self" and len(parts) == 1:
                return ""                                # a member of the object: given code
            if f.attr in ("format", "join"):
                return "" if id(call) in self.messages else f"a string built with {f.attr}"
            if f.attr in self.methods:
                return ""
            return f"calls .{f.attr}(), which is not on assignment {self.a.key}'s list"
        return ""                                        # a subscript, a lambda, a call's result: checked where made

    def why_node(self, node) -> str:
        if isinstance(node, ast.Call):
            return self.why_call(node)
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("__") and node.attr.endswith("__"):
                return f"dunder attribute (.{node.attr})"
            path = self.path(node)
            if node.attr.startswith("_") and not (path and self.listed(path) == "" and
                                                  resolve_path(path) is not None and path in self.a.allowed_calls):
                return f"private attribute (.{node.attr})"
            if path and isinstance(node.ctx, (ast.Store, ast.Del)):
                return f"assigns to {path}, a library's attribute"
            return ""
        if isinstance(node, ast.Name) and node.id.startswith("__") and node.id.endswith("__"):
            return f"dunder name ({node.id})"
        if isinstance(node, ast.Name) and node.id in DYNAMIC and node.id not in self.bound:
            return f"dynamic code or names ({node.id})"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for m in mods:
                if m not in IMPORTABLE and not m.startswith("minbert."):
                    return f"imports {m}"
            return ""
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return "rebinds a name outside the function"
        if id(node) in self.messages:
            return ""
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and PATHLIKE.search(node.value):
            return "a string naming a path, a dunder or a source file"
        if isinstance(node, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in node.values):
            return "a string built with an f-string"
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)) and any(
                isinstance(side, ast.JoinedStr) or isinstance(side, ast.Constant) and isinstance(side.value, str)
                for side in (node.left, node.right)):
            return f"a string built with {'%' if isinstance(node.op, ast.Mod) else '+'}"
        return ""

    def references(self):
        """Library callables named without a call (f = F.scaled_dot_product_attention, map(torch.x, ...))."""
        called = {id(n.func) for n in self.nodes if isinstance(n, ast.Call)}
        inner = {id(n.value) for n in self.nodes if isinstance(n, ast.Attribute)}
        for n in self.nodes:
            if isinstance(n, (ast.Attribute, ast.Name)) and id(n) not in called and id(n) not in inner and \
                    isinstance(n.ctx, ast.Load):
                path = self.path(n)
                if path:
                    obj = resolve_path(path)
                    if obj is not None and (callable(obj) or inspect.ismodule(obj)) and not (
                            isinstance(obj, type) and issubclass(obj, BaseException)):
                        why = self.listed(path) if callable(obj) and not inspect.ismodule(obj) else \
                            "" if isinstance(n, ast.Name) else f"the module {path}"
                        if why and not (path.split(".")[0] == "numpy" and isinstance(obj, type)):
                            yield n, f"refers to {why}"

    def used(self) -> set:
        """The torch callables this block's calls and references resolve to, by their call_name (how allowlist_recording.py
        records them)."""
        found = set()
        for n in self.nodes:
            path = self.path(n)
            obj = resolve_path(path) if path and path.startswith("torch.") else None
            if obj is not None and callable(obj) and not inspect.ismodule(obj):
                found.add(call_name(obj))
        return found

    def flags(self) -> dict:
        """{line: [reasons]}."""
        found = {}
        for node, why in [(n, self.why_node(n)) for n in self.nodes] + list(self.references()):
            if why and why not in found.setdefault(node.lineno, []):
                found[node.lineno].append(why)
        return {k: v for k, v in found.items() if v}


def _imported(node) -> dict:
    """{local name: dotted path} an import statement binds (`import a.b` binds a; `from a import b as c`, c: a.b);
    {} for any other node, and for a relative import."""
    if isinstance(node, ast.Import):
        return {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
    return {}


def blocks_of(text: str, keys) -> list:
    """[(key, _Block)] for the solution blocks of `keys` in one laid-over file ([] if it does not parse)."""
    try:
        tree = ast.parse(text)
        blocks = submission.split(text)[1]
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return []                                        # scored 0 already, with its reason
    names, given, numpy = {}, set(), False
    for node in tree.body:                               # the file's own imports and definitions (given code)
        names.update(_imported(node))
        if isinstance(node, ast.Import):
            numpy |= any(a.name == "numpy" for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            given.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            given |= {t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                      if isinstance(t, ast.Name)}
    return [(key, _Block(tree, range(first, first + body.count("\n")), C.BY_KEY[key], names, given, numpy))
            for key, body, first in blocks if key in keys]


def check_file(text: str, rel: str, keys) -> dict[str, list[str]]:
    """{assignment: ['minbert/x.py:N: <the line> (why; why)', ...]} for the blocks of `keys` in one laid-over file."""
    out, lines = {k: [] for k in keys}, text.split("\n")
    for key, block in blocks_of(text, keys):
        for n, whys in sorted(block.flags().items()):
            out[key].append(f"{rel}:{n}: {lines[n - 1].strip()[:100]} ({'; '.join(whys)})")
    return out


def report(template_dir, selected) -> dict[str, list[str]]:
    """{assignment: flagged lines} over the solution blocks laid into the template (all assignments graded)."""
    out = {k: [] for k in selected}
    for path in sorted((template_dir / "minbert").rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if C.BEGIN not in text:
            continue
        for key, found in check_file(text, str(path.relative_to(template_dir)), selected).items():
            out[key] += found
    return out
