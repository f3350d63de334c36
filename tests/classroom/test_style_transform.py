"""The style transform: every reference block rewritten mechanically (Python's `ast`) into the styles students write,
then read and graded with both walls on. Five rewrites, each one style of the honest corpus (classroom_helpers.CLASSES):

  hints      a type hint on every local (`x: torch.Tensor = ...`, loop and tuple targets declared first; the blocks
             define no function, and the parameters are the given code's); a module attribute the block calls becomes
             an annotated local of its class, read from the given `__init__` (`table: nn.Embedding = self.table`)
  losses     a loss or an activation called as a function, called in module form (`F.mse_loss(a, b)` ->
             `nn.MSELoss()(a, b)`, `torch.softmax(x, dim=-1)` -> `nn.Softmax(dim=-1)(x)`)
  imports    the module functions a block calls, imported by name at the top of the file, outside the blocks
             (`torch.einsum(...)` -> `einsum(...)` with `from torch import einsum` among the file's imports)
  getattr    an attribute read of `self` or of a parameter through `getattr(obj, "name", None)`
  messages   a guard whose message names `type(first parameter).__name__` at the top of every block, and that name
             in front of every message the block raises

Oracles: the reference's own outputs (the rewritten blocks with both walls off, classroom_helpers.walls_off: the
rewrites keep the maths) and the assignments' full points. Expected with both walls on: 0 refused, 0 points lost.
"""

import ast
import builtins
import importlib
import inspect
import textwrap
from pathlib import Path

import pytest
import torch
from classroom_helpers import ROOT, Variant, first_failure, grade, scores, student, submission, walls_off  # noqa: F401

from minbert.classroom import assignments as classroom, gate, submission as intake

LOSSES = {"cross_entropy": "CrossEntropyLoss", "binary_cross_entropy_with_logits": "BCEWithLogitsLoss",
          "binary_cross_entropy": "BCELoss", "mse_loss": "MSELoss", "kl_div": "KLDivLoss", "nll_loss": "NLLLoss",
          "l1_loss": "L1Loss", "smooth_l1_loss": "SmoothL1Loss"}
ACTIVATIONS = {"gelu": "GELU", "softmax": "Softmax", "log_softmax": "LogSoftmax", "sigmoid": "Sigmoid",
               "tanh": "Tanh", "relu": "ReLU", "logsigmoid": "LogSigmoid"}
KINDS = ("hints", "losses", "imports", "getattr", "messages")


class Context:
    """What a block's rewrite needs from its file: the module each top-level name stands for, the names the file
    binds anywhere, the enclosing function's parameters, and the classes the enclosing class's __init__ gives its
    attributes."""

    def __init__(self, tree: ast.Module, first: int, last: int, rel: str):
        self.modules = {}
        for n in tree.body:
            if isinstance(n, ast.Import):
                self.modules |= {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0]
                                 for a in n.names}
            elif isinstance(n, ast.ImportFrom) and inspect.ismodule(_resolve(f"{n.module}.{n.names[0].name}")):
                self.modules |= {a.asname or a.name: f"{n.module}.{a.name}" for a in n.names}
        self.bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
            n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)} | set(dir(builtins))
        around = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.lineno < first
                  and n.end_lineno >= last]
        function = max((n for n in around if isinstance(n, ast.FunctionDef)), key=lambda n: n.lineno)
        self.params = [a.arg for a in function.args.posonlyargs + function.args.args]
        self.tensor = "np.ndarray" if rel.endswith("meanshift.py") else "torch.Tensor"
        self.nn = next((name for name, path in self.modules.items() if path == "torch.nn"), "torch.nn")
        self.classes = {}
        for cls in (n for n in around if isinstance(n, ast.ClassDef)):
            for init in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"):
                for a in (n for n in ast.walk(init) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)):
                    made = a.value.func
                    name = made.attr if isinstance(made, ast.Attribute) else getattr(made, "id", "")
                    for t in a.targets:
                        if name[:1].isupper() and isinstance(t, ast.Attribute) and getattr(t.value, "id", "") == "self":
                            self.classes[t.attr] = made

    def path(self, node) -> str | None:
        """'torch.nn.functional.softmax' for `F.softmax`, through the file's imports; None for anything else."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.insert(0, node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in self.modules:
            return ".".join([self.modules[node.id], *parts])
        return None


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


class Rewrite(ast.NodeTransformer):
    def __init__(self, ctx: Context, top: dict):
        self.ctx, self.top, self.count = ctx, top, 0


class Hints(Rewrite):
    """A type hint on every local."""

    def guess(self, value) -> ast.expr:
        if isinstance(value, ast.Constant):
            return _expr(f"{self.ctx.tensor} | None" if value.value is None else type(value.value).__name__)
        if isinstance(value, (ast.Compare, ast.BoolOp)):
            return _expr("bool")
        for kind, name in ((ast.List, "list"), (ast.ListComp, "list"), (ast.Dict, "dict"), (ast.DictComp, "dict"),
                           (ast.Tuple, "tuple"), (ast.Set, "set")):
            if isinstance(value, kind):
                return _expr(name)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in (
                "float", "int", "bool", "len", "str", "list", "dict", "tuple", "sorted"):
            return _expr({"len": "int", "sorted": "list"}.get(value.func.id, value.func.id))
        if isinstance(value, ast.Call) and self.ctx.path(value.func) and (
                self.ctx.path(value.func).startswith("torch.nn.") and isinstance(value.func, ast.Attribute)
                and value.func.attr[:1].isupper()):
            return value.func
        return _expr(self.ctx.tensor)

    def declare(self, target, value=None) -> list:
        names = [n for n in ast.walk(target) if isinstance(n, ast.Name)]
        self.count += len(names)
        return [ast.AnnAssign(target=ast.Name(n.id, ast.Store()), annotation=self.guess(value) if value is not None
                              else _expr(self.ctx.tensor), simple=1) for n in names]

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.count += 1
            return ast.AnnAssign(target=node.targets[0], annotation=self.guess(node.value), value=node.value, simple=1)
        if all(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
            return [d for t in node.targets for d in self.declare(t)] + [node]
        return node

    def visit_For(self, node):
        self.generic_visit(node)
        counting = isinstance(node.iter, ast.Call) and getattr(node.iter.func, "id", "") == "range"
        declared = self.declare(node.target)
        if counting:
            for d in declared:
                d.annotation = _expr("int")
        return declared + [node]

    def aliases(self, body: list) -> list:
        """`name: Class = self.name` first, for each module attribute of self the block calls (its class from the
        given __init__), and the calls through the local: a hint naming a torch class."""
        called = {n.func.attr for n in ast.walk(ast.Module(body, [])) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Attribute) and getattr(n.func.value, "id", "") == "self"}
        stored = {n.attr for n in ast.walk(ast.Module(body, [])) if isinstance(n, ast.Attribute)
                  and not isinstance(n.ctx, ast.Load)}
        names = sorted(a for a in called & set(self.ctx.classes) - stored if a not in self.ctx.bound)
        for n in ast.walk(ast.Module(body, [])):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in names and getattr(
                    n.func.value, "id", "") == "self":
                n.func = ast.Name(n.func.attr, ast.Load())
        self.count += len(names)
        return [ast.AnnAssign(target=ast.Name(a, ast.Store()), annotation=self.ctx.classes[a],
                              value=_expr(f"self.{a}"), simple=1) for a in names] + body


class Losses(Rewrite):
    """A loss or an activation called as a function, called in module form."""

    def visit_Call(self, node):
        self.generic_visit(node)
        path = self.ctx.path(node.func) or ""
        module, _, name = path.rpartition(".")
        if module not in ("torch", "torch.nn.functional") or name not in LOSSES | ACTIVATIONS:
            return node
        cls = getattr(torch.nn, (LOSSES | ACTIVATIONS)[name])
        takes = set(inspect.signature(cls).parameters)
        inputs = 2 if name in LOSSES else 1
        args, keywords = list(node.args), list(node.keywords)
        if name in ("softmax", "log_softmax") and len(args) == 2:
            keywords.append(ast.keyword("dim", args.pop()))
        if len(args) != inputs or any(k.arg not in takes for k in keywords):
            return node
        self.count += 1
        return ast.Call(ast.Call(_expr(f"{self.ctx.nn}.{cls.__name__}"), [], keywords), args, [])


class Imports(Rewrite):
    """The module functions a block calls, imported by name at the file's top: `from torch import einsum`."""

    def visit_Call(self, node):
        self.generic_visit(node)
        path = self.ctx.path(node.func)
        if path is None or not isinstance(node.func, ast.Attribute):
            return node
        module, _, name = path.rpartition(".")
        if not inspect.isroutine(_resolve(path)) or name.startswith("_") or self.top.get(name, module) != module \
                or name in self.ctx.bound and name not in self.top:
            return node
        self.top[name] = module
        self.count += 1
        node.func = ast.Name(name, ast.Load())
        return node


class Getattr(Rewrite):
    """An attribute read of `self` or of a parameter through `getattr(obj, "name", None)`."""

    def visit_Call(self, node):
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        if isinstance(node.func, ast.Attribute):                 # a method call stays one: its object is read
            node.func.value = self.visit(node.func.value)
        else:
            node.func = self.visit(node.func)
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and node.value.id in self.ctx.params \
                and not node.attr.startswith("_"):
            self.count += 1
            return ast.Call(ast.Name("getattr", ast.Load()), [node.value, ast.Constant(node.attr),
                                                              ast.Constant(None)], [])
        return node


class Messages(Rewrite):
    """`type(first parameter).__name__` in front of every message the block raises, and in a guard at its top."""

    def who(self) -> ast.expr:
        return _expr(f"type({self.ctx.params[0]}).__name__")

    def visit_Raise(self, node):
        self.generic_visit(node)
        call = node.exc
        if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], (ast.Constant, ast.JoinedStr)):
            first = call.args[0]
            parts = first.values if isinstance(first, ast.JoinedStr) else [first]
            call.args[0] = ast.JoinedStr([ast.FormattedValue(self.who(), -1, None), ast.Constant(": "), *parts])
            self.count += 1
        return node

    def guard(self, body: list) -> list:
        self.count += 1
        first = self.ctx.params[0]
        return ast.parse(f"if {first} is None:\n    raise TypeError(f'{{type({first}).__name__}}: got None "
                         f"for {first}')\n").body + body


def rewritten(kinds=KINDS) -> tuple[dict, dict]:
    """({rel: the file as a student hands it in: the reference's blocks rewritten, the new imports at the top},
    {kind: how many places it rewrote})."""
    files, counts = {}, dict.fromkeys(kinds, 0)
    for rel, text in classroom.solution_files():
        text = classroom.omit(text, rel, set(classroom.BY_KEY))
        tree, lines, top = ast.parse(text), text.split("\n"), {}
        for key, first, last in reversed(gate.blocks(text)):
            ctx = Context(tree, first, last, rel)
            indent = lines[first - 2][:len(lines[first - 2]) - len(lines[first - 2].lstrip())]
            body = ast.parse(textwrap.dedent("\n".join(lines[first - 1:last]))).body
            for kind in ("losses", "messages", "getattr", "hints", "imports"):   # imports last: it renames calls
                if kind not in kinds:
                    continue
                ctx.bound |= {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name)}
                rewrite = {"hints": Hints, "losses": Losses, "imports": Imports, "getattr": Getattr,
                           "messages": Messages}[kind](ctx, top)
                body = [s for n in body for s in (lambda r: r if isinstance(r, list) else [r])(rewrite.visit(n))]
                body = rewrite.aliases(body) if kind == "hints" else rewrite.guard(body) if kind == "messages" \
                    else body
                counts[kind] += rewrite.count
            module = ast.fix_missing_locations(ast.Module(body, []))
            lines[first - 1:last] = [indent + line for line in ast.unparse(module).split("\n")]
        at = next(i for i, line in enumerate(lines) if line.startswith(("import ", "from ")))
        lines[at:at] = sorted(f"from {module} import {name}" for name, module in top.items())
        files[rel] = "\n".join(lines)
    return files, counts


def handed_in(student, tmp_path, files: dict) -> Path:
    """A submission: the student copy with the rewritten graded files."""
    sub = submission(student, tmp_path)
    for rel, text in files.items():
        (sub / rel).write_text(text)
    return sub


def test_each_rewrite_changes_the_references_in_many_places():
    """Not vacuous: every kind rewrites somewhere, and together they change every block of every assignment."""
    files, counts = rewritten()
    assert all(counts[k] >= 3 for k in KINDS), counts
    for rel, text in classroom.solution_files():
        mine = [text.split("\n")[a - 1:b] for _, a, b in gate.blocks(files[rel])]
        theirs = [classroom.omit(text, rel, set(classroom.BY_KEY)).split("\n")[a - 1:b]
                  for _, a, b in gate.blocks(classroom.omit(text, rel, set(classroom.BY_KEY)))]
        assert all(m != t for m, t in zip(mine, theirs)), f"{rel}: a block the rewrites left as it was"


def test_no_rewritten_reference_is_refused_by_the_intake_or_the_gate(tmp_path):
    """The grader's intake and gate (submission.lay_over) over every rewritten file at once: nothing refused."""
    files, _ = rewritten()
    sub = tmp_path / "sub"
    for rel, text in files.items():
        (sub / rel).parent.mkdir(parents=True, exist_ok=True)
        (sub / rel).write_text(text)
    template = intake.write_template(tmp_path / "template", set(classroom.BY_KEY))
    problems, gated = intake.lay_over(sub, template, set(classroom.BY_KEY))
    refused = [line for k in classroom.BY_KEY for line in problems[k] + sorted(gated[k].values())]
    assert not refused, f"{len(refused)} refusal(s) of the rewritten references:\n" + "\n".join(refused)


@pytest.mark.slow
def test_the_rewritten_references_keep_the_maths_and_score_full_points(student, tmp_path):
    """First with both walls off (the rewrites keep the outputs), then graded with both walls on, once: 110/110."""
    files, _ = rewritten()
    laid = []
    for rel, text in files.items():
        top = tuple(line for line in text.split("\n") if line.startswith("from ") and line not in
                    classroom.omit((ROOT / rel).read_text(), rel, set(classroom.BY_KEY)).split("\n"))
        lines = text.split("\n")
        for n, (key, first, last) in enumerate(gate.blocks(text)):
            nth = sum(1 for k, *_ in gate.blocks(text)[:n] if k == key)
            laid.append(Variant(f"{rel}:{key}:{nth}", key, rel.removeprefix("minbert/"), nth,
                                textwrap.dedent("\n".join(lines[first - 1:last])), top, ()))
    off = walls_off(laid, tmp_path / "off")
    assert not any(off.values()), {k: v for k, v in off.items() if v}
    got = grade(handed_in(student, tmp_path, files), None, salt=11)
    want = {a.key: a.points for a in classroom.ASSIGNMENTS}
    assert scores(got) == want, {k: first_failure(got, k) for k in want if scores(got)[k] != want[k]}
    assert not any(got.refused.values()), got.refused
