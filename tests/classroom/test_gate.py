"""The gate (minbert/classroom/gate.py): a solution block may name only what its assignment's list holds, read before
anything runs; a refused block scores 0 where its function is graded, with one line.

Oracles: the routes red teams used to reach torch's or scikit-learn's own implementation, or to take the runtime
fence down from inside (frames reached through a generator, names passed as strings to a getattr read from a
frame's builtins, popped or disabled modes, local aliases of builtins, subscripted builtins, classes defining dunder
methods, local decorators, format fields reading attributes, global, yield), written out as submissions: each is
refused with its one line naming what it refused, and scores 0 when graded. The instructor's reference solutions and
the honest corpus written in other styles (tests/classroom/honest/: einsum, loops, in place, numpy, HF style) are
never refused, and score full points. The student copy's own pre-check refuses exactly what the grader's gate does.
"""

import functools
import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from classroom_helpers import ROOT, TOP, first_failure, scores, student, with_block  # noqa: F401

from minbert.classroom import allowlists, assignments as classroom, autograder, gate, results
from minbert.classroom.assignments import package_file
from minbert.classroom.grade import grade

FUSED = """torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(float(t)) for t in steps],
                    lr=torch.tensor(lr), beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False,
                    maximize=False)"""
FRAME = """def _g():
    yield 1
_gen = _g()
"""
WALK = """_gen = (i for i in [0])
_f = _gen.gi_frame.f_back
"""
FROM_BUILTINS = """_gen = (i for i in [0])
_ga = _gen.gi_frame.f_builtins['getattr']
"""

# name: (assignment, file, block, the name its refusal must quote)
ROUTES = {
    # Why 1: the fence switched off from inside, through a generator's frame (no private name written)
    "a generator's frame walked up to the child's locals (gi_frame, f_back, f_locals)": ("attention", "attention.py", """
_gen = (i for i in [0])
_fence = _gen.gi_frame.f_back.f_back.f_locals['fence']
y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
""", "`.gi_frame`"),
    "a generator function's frame (yield)": ("attention", "attention.py", FRAME + "y = q\n", "`yield`"),
    "torch._C's stack getter named as a string to a frame's getattr": ("adamw", "adamw.py", FROM_BUILTINS + """
_stack = _ga(_ga(torch, '_' + 'C'), '_get_dispatch_stack_at')(0)
""", "`.gi_frame`"),
    # Why 2: the two routes the docs admitted, names as strings
    "pop both fence modes, run the fused kernel, push them back": ("adamw", "adamw.py", """
_f, _d = torch._C._pop_torch_function_stack(), torch._C._pop_torch_dispatch_stack(None)
""" + FUSED + """
torch._C._push_on_torch_dispatch_stack(_d)
torch._C._push_on_torch_function_stack(_f)
""", "`torch._C`"),
    "the modes disabled for one call (_disable_current_modes)": ("adamw", "adamw.py", """
from torch.utils._python_dispatch import _disable_current_modes
with _disable_current_modes():
""" + "\n".join("    " + line for line in FUSED.splitlines()) + "\n", "`torch.utils`"),
    "torch._fused_adamw_ with a 0-dim tensor lr": ("adamw", "adamw.py", FUSED + "\n", "`torch._fused_adamw_`"),
    "the given fused step (left out of the copy)": ("adamw", "adamw.py", """
fused_step(params, grads, exp_avgs, exp_avg_sqs, steps, torch.tensor(lr), beta1, beta2, wd, eps)
""", "`fused_step`"),
    # Why 3: reflection through values
    "getattr through a local alias": ("attention", "attention.py", """
_get = getattr
y = _get(F, 'scaled_dot_product_' + 'attention')(q, k, v, attn_mask=mask)
""", "`getattr`"),
    "exec from a frame's builtins, by subscript": ("attention", "attention.py", """
_gen = (i for i in [0])
_gen.gi_frame.f_builtins['exec']('y = q')
y = q
""", "`.gi_frame`"),
    "print.__self__ (the builtins module)": ("attention", "attention.py", """
_m = print.__self__.__getattribute__('__imp' + 'ort__')('torch._higher_order_ops.flex_attention', None, None, ['x'])
y = q
""", "`.__self__`"),
    "a class defining __torch_dispatch__ (a Tensor subclass)": ("attention", "attention.py", """
class Free(torch.Tensor):
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
y = q
""", "`class Free`"),
    "a decorator compiling code": ("attention", "attention.py", """
@torch.jit.script
def probs(s):
    return s
y = probs(q @ k.transpose(-2, -1)) @ v
""", "`torch.jit`"),
    "a format field reading an attribute": ("attention", "attention.py", """
_name = '{0.T}'.format(q)
y = q
""", "`{0.T}`"),
    "a format field reading an item": ("attention", "attention.py", """
_name = '{0[exec]}'.format(q)
y = q
""", "`{0[exec]}`"),
    ".format on a built string": ("attention", "attention.py", """
_name = ('{0' + '.T}').format(q)
y = q
""", "`.format`"),
    "global": ("attention", "attention.py", "global F\ny = q\n", "`global`"),
    "nonlocal": ("attention", "attention.py", "def inner():\n    nonlocal q\ny = q\n", "`nonlocal`"),
    "a name bound only in a comprehension, used outside it": ("attention", "attention.py", """
_z = [0 for getattr in [1]]
y = getattr(F, 'soft' + 'max')(q, -1)
""", "`getattr`"),
    "a comprehension's first iterable reads the outer name": ("attention", "attention.py", """
_z = [g for getattr in [getattr] for g in [getattr]]
y = q
""", "`getattr`"),
    "a match class pattern reading an attribute": ("attention", "attention.py", """
match q:
    case torch.Tensor(T=_t):
        y = q
""", "`match class`"),
    # the earlier rounds: library implementations and names built from strings
    "flex attention's eager math_attention": ("attention", "attention.py", """
from torch._higher_order_ops.flex_attention import math_attention
y = q
""", "`torch._higher_order_ops`"),
    "scaled_dot_product_attention": ("attention", "attention.py",
                                     "y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n",
                                     "`torch.nn.functional.scaled_dot_product_attention`"),
    "torch.optim's AdamW": ("adamw", "adamw.py", "_opt = torch.optim.AdamW(params)\n", "`torch.optim`"),
    "operator.attrgetter": ("adamw", "adamw.py", """
import operator
_mods = operator.attrgetter('os.sys.modules')(torch)
""", "`operator.attrgetter`"),
    "scikit-learn": ("meanshift", "meanshift.py", """
from sklearn.cluster import estimate_bandwidth as eb
return float(eb(x.reshape(-1, 1), quantile=quantile))
""", "`sklearn`"),
    "a module as a value (an alias of torch)": ("attention", "attention.py", """
_t = torch
y = _t.inner(q, k)
""", "`torch`"),
    "a module another module imported (torch.nn.functional.torch)": ("attention", "attention.py", """
y = F.torch.inner(q, k)
""", "`torch.nn.functional.torch`"),
    "assigning a library's attribute": ("attention", "attention.py", """
torch.softmax = lambda *a, **kw: q
y = q
""", "`torch.softmax`"),
}


def place(path, key, body, nth=0):
    """Write a variant into a graded file: its leading `# file top: <import>` lines among the file's imports (where
    a student adds one), the rest in the nth block of `key`."""
    lines = body.strip("\n").split("\n")
    top = [line.removeprefix(TOP) for line in itertools.takewhile(lambda s: s.startswith(TOP), lines)]
    autograder._replace_block(path, key, "\n".join(lines[len(top):]), nth=nth)
    text = path.read_text().split("\n")
    at = next(i for i, s in enumerate(text) if s.startswith(("import ", "from ")))
    path.write_text("\n".join(text[:at] + top + text[at:]))


def laid(tmp_path, key, file, body, nth=0) -> tuple[str, str]:
    """(rel, text): the instructor's file, as the copy hands it out, with `body` placed in the nth block of `key`."""
    rel = package_file(Path(file).name)
    path = tmp_path / Path(file).name
    path.write_text(classroom.omit((ROOT / rel).read_text(), rel, set(classroom.BY_KEY)))
    place(path, key, body, nth)
    text = path.read_text()
    assert all(line.removeprefix(TOP) in text for line in body.strip("\n").splitlines()), f"{file}: no block {nth}"
    return rel, text


@functools.cache
def all_lists():
    return gate.lists_of(allowlists.gate_lists(classroom.ASSIGNMENTS), classroom.BY_KEY)


def refusals(text, rel, key) -> list:
    return list(gate.check_text(text, rel, {key: all_lists()[key]}).values())


def test_the_reference_solutions_are_not_refused():
    lists = all_lists()
    found = []
    for rel in sorted({package_file(Path(f).name) for a in classroom.ASSIGNMENTS for f in
                       ["layers.py", "attention.py", "model.py", "adamw.py", "multitask.py", "pals.py", "smart.py",
                        "pcgrad.py", "gradvac.py", "meanshift.py", "mml.py"]}):
        text = classroom.omit((ROOT / rel).read_text(), rel, set(classroom.BY_KEY))
        found += gate.check_text(text, rel, lists).values()
    assert not found, f"the gate refused a reference solution: {found}"


@pytest.mark.parametrize("route", list(ROUTES))
def test_each_route_is_refused_with_one_line_naming_it(route, tmp_path):
    key, file, block, name = ROUTES[route]
    rel, text = laid(tmp_path, key, file, block)
    got = refusals(text, rel, key)
    assert len(got) == 1 and got[0].startswith(f"{rel}:") and name in got[0], f"{route}: {got}"


@pytest.mark.parametrize("line, name", [
    ("y = torch.inner(q, k)", None),                                   # widened: on every list
    ("y = F.dropout(q, 0.1, training=self.training)", None),
    ("y = torch.linalg.vector_norm(q, dim=-1)", None),
    ("y = q.sqrt_().exp_()", None),
    ("y = nn.GELU()(q)", None),
    ("y = f'{q.shape!r}' and q", None),
    ("y = '{0} {k:.2f}'.format(1, k=2.0) and q", None),
    ("y = torch._C._nn.gelu(q)", "`torch._C`"),
    ("y = torch.ops.aten.gelu(q)", "`torch.ops`"),
    ("import importlib\ny = q", "`importlib`"),
    ("y = eval('q')", "`eval`"),
    ("y = vars(q)", "`vars`"),
    ("y = type(q)", "`type`"),
    ("y = q.__dict__", "`.__dict__`"),
    ("y = __builtins__", "`__builtins__`"),
    ("y = torch.jit.script(lambda a: a)(q)", "`torch.jit`"),
    ("y = q.apply_(abs)", None),                                       # public maths: the fence's to check
    ("y = [e.__traceback__ for e in [ValueError()]] and q", "`.__traceback__`"),
    ("async def f():\n    pass\ny = q", "`async def`"),
    ("def __eq__(a, b):\n    return True\ny = q", "`__eq__`"),
    ("y = q.numpy().ctypes", "`.ctypes`"),
])
def test_each_kind_of_name_is_refused_or_allowed(line, name, tmp_path):
    rel, text = laid(tmp_path, "attention", "attention.py", line + "\ny = y")
    got = refusals(text, rel, "attention")
    assert (got == []) if name is None else (len(got) == 1 and name in got[0]), got


def test_a_refusal_names_what_it_refused_and_what_is_allowed_never_another_assignments_note(tmp_path):
    rel, text = laid(tmp_path, "surgery", "pcgrad.py", "x = torch.cdist(gram, gram)\n" + "return coef, projections")
    (got,) = refusals(text, rel, "surgery")
    assert got.startswith("minbert/methods/pcgrad.py:") and "`torch.cdist` is assignment surgery's answer (" in got \
        and got.endswith("; `(a[:, None] - b[None]).norm(dim=-1)` is"), got
    rel, text = laid(tmp_path, "surgery", "gradvac.py", "phi = torch.cosine_similarity(gram, gram)\n")
    (got,) = refusals(text, rel, "surgery")
    assert "`torch.cosine_similarity` is assignment surgery's answer (PCGrad's and GradVac's coefficients" in got, got
    assert "softmax attention" not in got and "scaled_dot" not in got


def test_the_student_copys_precheck_says_what_the_grader_says(student, tmp_path):
    """tests/gate.py in the copy (ALLOWED.json, the copy's first commit as the handed-out files): planted refusals in
    blocks, an import of a refused module added at the top of a file, a changed line outside the blocks: exactly
    the grader's own lines (the intake's and the gate's, from lay_over); an allowed import at the top is no line."""
    import shutil

    from classroom_helpers import submission

    from minbert.classroom import submission as S
    sub = submission(student, tmp_path)
    shutil.copytree(student / ".git", sub / ".git")
    planted = {"attention": ("attention.py", "y = torch.jit.script(F.softmax)(q)\n"),
               "meanshift": ("meanshift.py", "import scipy\nreturn 0.0\n"),
               "mml": ("mml.py", "_g = (i for i in [0])\nreturn _g.gi_frame\n"),
               "smart": ("smart.py", "return math.fsum([0.0])\n")}
    for key, (file, body) in planted.items():
        autograder._replace_block(sub / package_file(file), key, body.strip("\n"))
    for file, line, top in (("smart.py", "import math", True), ("pals.py", "import torch.utils.cpp_extension", True),
                            ("pcgrad.py", "x = 1", False)):
        path = sub / package_file(file)
        lines = path.read_text().splitlines(keepends=True)
        at = next(i for i, s in enumerate(lines) if s.startswith(("import ", "from "))) if top else len(lines)
        path.write_text("".join(lines[:at] + [line + "\n"] + lines[at:]))
    template = S.write_template(tmp_path / "template", set(classroom.BY_KEY))
    problems, gated = S.lay_over(sub, template, list(classroom.BY_KEY))
    want = {m for ms in problems.values() for m in ms} | {line for g in gated.values() for line in g.values()}
    assert len(want) == 5 and any("import torch.utils.cpp_extension" in w for w in want), want
    assert "import math" in (template / package_file("smart.py")).read_text(), "the allowed import was not laid over"
    r = subprocess.run([sys.executable, "tests/gate.py"], cwd=sub, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and set(r.stdout.strip().splitlines()) == want, (r.stdout, r.stderr, want)
    assert (student / "ALLOWED.md").is_file() and "## surgery" in (student / "ALLOWED.md").read_text()
    r = subprocess.run([sys.executable, "tests/gate.py"], cwd=student, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"the blank copy's stubs were refused: {r.stdout}{r.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("route", ["a generator's frame walked up to the child's locals (gi_frame, f_back, f_locals)",
                                   "pop both fence modes, run the fused kernel, push them back",
                                   "a class defining __torch_dispatch__ (a Tensor subclass)", "getattr through a local alias"])
def test_a_refused_route_scores_zero_and_its_cases_say_the_gates_line(route, student, tmp_path):
    key, file, block, name = ROUTES[route]
    got = grade(with_block(student, tmp_path, file, key, block), {key}, salt=1)
    assert scores(got) == {key: 0}, f"{route}: scored {scores(got)[key]}"
    (line,) = got.refused[key]
    assert name in line and first_failure(got, key).startswith(line), first_failure(got, key)
    report = results.results_json(got)
    assert report["extra_data"]["refused"] == {key: [line]} and line in results.table(got)


# Why-1 routes in AdamW's step, each followed by the reference's own step: they score points exactly when the gate
# lets them run (with it removed, each scores 10/10: the route's line is harmless there, the rest is the answer).
TOKEN_ROUTES = {
    "a dunder attribute through a keyword": "import types\n_ns = types.SimpleNamespace(__array_interface__={})",
    "a dunder attribute through a ** key": "import types\n_ns = types.SimpleNamespace(**{'__array_interface__': {}})",
    "a name built with chr, to getattr": "_c = getattr(params, chr(95) * 2 + 'class' + chr(95) * 2, None)",
    "an address from repr, to ndarray's buffer": "import numpy as np\n_a = int(repr(print).split()[-1][:-1], 16)\n"
                                                 "_o = np.ndarray((1,), dtype=np.array([None]).dtype, "
                                                 "buffer=np.array([_a]))",
    "an object array's memoryview cast": "import numpy as np\n_o = np.array([None])\n_m = _o.data.cast('B')",
}


@pytest.mark.slow
def test_the_token_routes_score_no_points_beyond_the_honest_parts(student, tmp_path):
    """AdamW's schedule written honestly, its step holding a route then the reference's step: the grade equals the
    honest schedule's alone (the step refused with its one line), at whatever level this machine isolates."""
    import shutil

    from minbert.classroom import gate as G
    rel = package_file("adamw.py")
    blocks = G.split(classroom.omit((ROOT / rel).read_text(), rel, set(classroom.BY_KEY)))[1]
    step, schedule = (textwrap.dedent(body) for key, body, _ in blocks if key == "adamw")
    honest = tmp_path / "honest"
    shutil.copytree(student, honest, ignore=shutil.ignore_patterns(".git"))
    autograder._replace_block(honest / rel, "adamw", schedule.strip("\n"), nth=1)
    base = scores(grade(honest, {"adamw"}, salt=3))["adamw"]
    assert 0 < base < 10, f"the honest schedule alone scored {base}"
    for i, (route, line) in enumerate(TOKEN_ROUTES.items()):
        sub = tmp_path / str(i)
        shutil.copytree(honest, sub)
        autograder._replace_block(sub / rel, "adamw", line + "\n" + step.strip("\n"), nth=0)
        got = grade(sub, {"adamw"}, salt=3)
        assert scores(got)["adamw"] == base and len(got.refused["adamw"]) == 1, (route, scores(got), got.refused)
