"""The integrity report (minbert/classroom/integrity.py): every call in a solution block must resolve to a callable on
the assignment's list; anything else is flagged for the instructor, with its reason.

Oracles: the routes red teams used to reach torch's or scikit-learn's own implementation (each 10/10 on its
assignment before, some with no flag), written out as submissions: each must be flagged, and score 0 or be
flagged when graded; the instructor's reference solutions and an honest corpus written in other styles
(tests/classroom/honest/: einsum, loops, helper functions, asserts and raises with messages naming files,
`import types`) must raise no flag, and score full points. The report reaches the instructor only: the table,
a hidden test in results.json and its extra_data, never a visible test.
"""

from pathlib import Path

import pytest
from classroom_helpers import ISOLATION, ROOT, first_failure, scores, student, with_block  # noqa: F401

from minbert.classroom import assignments as classroom, autograder, integrity, results
from minbert.classroom.assignments import package_file
from minbert.classroom.grade import grade

HONEST = Path(__file__).parent / "honest"
BUILTINS_BY_REFLECTION = "_b = type(torch).__getattribute__(torch, '__buil' + 'tins__')\n"
FRESH_ADAM_CALL = """(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(t - 1.0) for t in steps], None, None,
    amsgrad=False, has_complex=False, beta1=beta1, beta2=beta2, lr=lr, weight_decay=wd, eps=eps, maximize=False,
    capturable=False, differentiable=False, decoupled_weight_decay=True)"""

# name: (assignment, file, block, what the report must say of it)
ROUTES = {
    "flex attention's eager math_attention": ("attention", "attention.py", """
_m = print.__self__.__getattribute__('__imp' + 'ort__')('torch._higher_order_ops.flex_attention', None, None, ['x'])
_am = mask.to(q.dtype).expand(q.shape[0], 1, 1, q.shape[2]).reshape(q.shape[0], q.shape[2])
y = _m.math_attention(q, k, v, lambda s, b, h, qi, ki: s + _am[b, ki], (lambda b, h, qi, ki: qi >= 0,),
                      q.shape[-1] ** -0.5, {})[0]
""", "dunder attribute (.__self__)"),
    "a fresh copy of torch/optim/adam.py": ("adamw", "adamw.py", BUILTINS_BY_REFLECTION + """
_u = _b['__imp' + 'ort__']('importlib.util', None, None, ['x'])
_spec = _u.spec_from_file_location('torch.optim._fresh_adam', torch.__getattribute__('op' + 'tim').__file__.rsplit('/', 1)[0] + '/adam.py')
_fresh = _u.module_from_spec(_spec)
_spec.loader.exec_module(_fresh)
_fresh._single_tensor_adam""" + FRESH_ADAM_CALL + "\n", "a string built with +"),
    "scikit-learn after taking the grader's finder off sys.meta_path": ("meanshift", "meanshift.py",
                                                                        BUILTINS_BY_REFLECTION.replace("torch", "np") + """
_sys = _b['__imp' + 'ort__']('sys')
_sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != '_RefuseModules']
_mods = _sys.__getattribute__('mod' + 'ules')
for _k in [k for k in _mods if k.startswith('skl' + 'earn')]:
    del _mods[_k]
_sk = _b['__imp' + 'ort__']('skl' + 'earn.cluster', None, None, ['x'])
return float(_sk.__getattribute__('estimate_' + 'bandwidth')(x.reshape(-1, 1), quantile=quantile))
""", "dynamic code or names (type)"),
    # Why 1: the given fused step with a 0-dim tensor lr (aten::_fused_adamw_.tensor_lr): 10/10, no flag
    "the given fused step with a 0-dim tensor lr": ("adamw", "adamw.py", """
fused_step(params, grads, exp_avgs, exp_avg_sqs, steps, torch.tensor(lr), beta1, beta2, wd, eps)
""", "calls fused_step, which is not on assignment adamw's list"),
    "torch._fused_adamw_ with a 0-dim tensor lr": ("adamw", "adamw.py", """
torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(float(t)) for t in steps],
                    lr=torch.tensor(lr), beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False,
                    maximize=False)
""", "private attribute (._fused_adamw_)"),
    # Why 2: names passed as strings
    "attrgetter('os.sys.modules'), a %-built path, attrgetter('_single_tensor_adam')": ("adamw", "adamw.py", """
import operator
_mods = operator.attrgetter('os.sys.modules')(torch)
_util = _mods['importlib'].util
_spec = _util.spec_from_file_location('torch.optim._fresh_adam', '%s/adam.py' % operator.attrgetter('optim.__path__')(torch)[0])
_fresh = _util.module_from_spec(_spec)
_spec.loader.exec_module(_fresh)
operator.attrgetter('_single_tensor_adam')(_fresh)""" + FRESH_ADAM_CALL + "\n", "imports operator"),
    "functools.reduce over attrgetter": ("adamw", "adamw.py", """
import functools
import operator
_adam = functools.reduce(lambda o, n: operator.attrgetter(n)(o), ['os', 'sys', 'modules'], torch)['torch.optim.adam']
operator.attrgetter('_single_tensor_adam')(_adam)""" + FRESH_ADAM_CALL + "\n", "imports functools"),
    "a name built with str.join": ("attention", "attention.py", """
import operator
_sdpa = operator.attrgetter('.'.join(['nn', 'functional', 'scaled_dot_product_attention']))(torch)
y = _sdpa(q, k, v, attn_mask=mask)
""", "a string built with join"),
    # the fence itself, as a determined student with the grader's source would take it down (fence.py)
    "pop both fence modes, run the fused kernel, push them back": ("adamw", "adamw.py", """
_f, _d = torch._C._pop_torch_function_stack(), torch._C._pop_torch_dispatch_stack(None)
torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(float(t)) for t in steps],
                    lr=torch.tensor(lr), beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False,
                    maximize=False)
torch._C._push_on_torch_dispatch_stack(_d)
torch._C._push_on_torch_function_stack(_f)
""", "private attribute (._C)"),
    "the modes disabled for one call (_disable_current_modes)": ("adamw", "adamw.py", """
from torch.utils._python_dispatch import _disable_current_modes
with _disable_current_modes(), torch._C.DisableTorchFunction():
    torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(float(t)) for t in steps],
                        lr=torch.tensor(lr), beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False,
                        maximize=False)
""", "imports torch.utils._python_dispatch"),
    "a thread running the fused kernel (modes are per thread)": ("adamw", "adamw.py", """
_threads = print.__self__.__getattribute__('__imp' + 'ort__')('thread' + 'ing')
_t = _threads.Thread(target=lambda: torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [],
                     [torch.tensor(float(t)) for t in steps], lr=torch.tensor(lr), beta1=beta1, beta2=beta2,
                     weight_decay=wd, eps=eps, amsgrad=False, maximize=False))
_t.start()
_t.join()
""", "dunder attribute (.__self__)"),
    "a Tensor subclass whose __torch_dispatch__ runs outside the modes": ("attention", "attention.py", """
_sdpa = F.__getattribute__('scaled_dot_' + 'product_attention')
class _Free(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return _sdpa(args[0].as_subclass(torch.Tensor), k, v, attn_mask=mask)
y = torch.Tensor._make_subclass(_Free, q) + 0
""", "private attribute (._make_subclass)"),
    "TorchScript around SDPA's math composite (no call layer inside)": ("attention", "attention.py", """
def _math(a, b, c, m):
    return torch.ops.aten._scaled_dot_product_attention_math(a, b, c, m)[0]
y = torch.jit.script(_math)(q, k, v, mask)
""", "calls torch.jit.script, which is not on assignment attention's list"),
    "attrgetter(...)(torch)['__builtins__']": ("meanshift", "meanshift.py", """
import operator
_b = operator.attrgetter('random.__dict__')(np)['__builtins__']
_sk = _b['__import__']('sklearn.cluster', None, None, ['x'])
return float(_sk.__getattribute__('estimate_' + 'bandwidth')(x.reshape(-1, 1), quantile=quantile))
""", "a string naming a path, a dunder or a source file"),
}


def honest_corpus() -> list:
    """[(name, key, file, nth block, body)] from tests/classroom/honest/*.py: '# honest variant: KEY FILE N: style'."""
    found = []
    for path in sorted(HONEST.glob("*.py")):
        head, _, body = path.read_text().partition("\n")
        key, file, nth = head.removeprefix("# honest variant: ").split(":")[0].split()
        found.append((path.stem, key, file, int(nth), body))
    return found


def laid(tmp_path, key, file, body, nth=0) -> tuple[str, str]:
    """(rel, text): the instructor's file, as the copy hands it out, with `body` in the nth block of `key`."""
    rel = package_file(Path(file).name)
    path = tmp_path / Path(file).name
    path.write_text(classroom.omit((ROOT / rel).read_text(), rel, set(classroom.BY_KEY)))
    autograder._replace_block(path, key, body.strip("\n"), nth=nth)
    text = path.read_text()
    assert all(line in text for line in body.strip("\n").splitlines()), f"{file} has no block {nth} of {key}"
    return rel, text


def test_the_reference_solutions_raise_no_flag():
    flagged = integrity.report(ROOT, {a.key for a in classroom.ASSIGNMENTS})
    assert not any(flagged.values()), f"an honest solution was flagged: {flagged}"


def test_the_honest_corpus_raises_no_flag(tmp_path):
    """Other styles than the references' (einsum, loops, baddbmm, helper functions, erf for GELU, numpy loops,
    asserts and raises whose messages name a .py file, `import types`): the false-flag count must be 0."""
    corpus = honest_corpus()
    assert len(corpus) >= 20 and {key for _, key, *_ in corpus} == set(classroom.BY_KEY), "the corpus covers too little"
    false_flags = []
    for name, key, file, nth, body in corpus:
        rel, text = laid(tmp_path, key, file, body, nth)
        false_flags += [f"{name}: {line}" for line in integrity.check_file(text, rel, {key})[key]]
    assert not false_flags, f"{len(false_flags)} false flag(s) on the honest corpus:\n" + "\n".join(false_flags)


@pytest.mark.parametrize("route", list(ROUTES))
def test_each_route_is_flagged_with_its_reason(route, tmp_path):
    key, file, block, why = ROUTES[route]
    rel, text = laid(tmp_path, key, file, block)
    flagged = integrity.check_file(text, rel, {key})[key]
    assert any(why in line for line in flagged), f"{route}: not flagged for '{why}': {flagged}"


@pytest.mark.parametrize("line, why", [
    ("y = torch._C._nn.gelu(x)", "private attribute (._C)"),
    ("y = torch.ops.aten.gelu(x)", "calls torch.ops.aten.gelu, which is not on assignment attention's list"),
    ("from torch._higher_order_ops.flex_attention import math_attention", "imports torch._higher_order_ops"),
    ("import importlib", "imports importlib"),
    ("import operator", "imports operator"),
    ("f = getattr(F, 'softmax')", "dynamic code or names (getattr)"),
    ("exec('y = q')", "dynamic code or names (exec)"),
    ("y = eval('q')", "dynamic code or names (eval)"),
    ("g = y.__dict__", "dunder attribute (.__dict__)"),
    ("src = torch.optim.__file__", "dunder attribute (.__file__)"),
    ("s = '/site-packages/torch/optim/adam.py'", "a string naming a path, a dunder or a source file"),
    ("s = 'os.path'", "a string naming a path, a dunder or a source file"),
    ("s = 'x' + str(q.shape)", "a string built with +"),
    ("s = '%s.py' % 'adam'", "a string built with %"),
    ("s = '{}'.format(1)", "a string built with format"),
    ("s = f'{q.shape}'", "a string built with an f-string"),
    ("y = F.scaled_dot_product_attention(q, k, v)", "calls torch.nn.functional.scaled_dot_product_attention, which is not"),
    ("f = F.scaled_dot_product_attention", "refers to torch.nn.functional.scaled_dot_product_attention, which is not"),
    ("y = list(map(F.scaled_dot_product_attention, [q], [k], [v]))[0]", "dynamic code or names (map)"),
    ("opt = torch.optim.AdamW([q])", "calls torch.optim.AdamW, which is not on assignment attention's list"),
    ("m = torch.optim", "refers to the module torch.optim"),
    ("torch.softmax = lambda *a, **k: q", "assigns to torch.softmax, a library's attribute"),
    ("y = q.apply_(abs)", "calls .apply_(), which is not on assignment attention's list"),
    ("y = torch.jit.script(lambda a: a)(q)", "calls torch.jit.script, which is not on assignment attention's list"),
])
def test_each_kind_of_reach_is_flagged_with_why(line, why, tmp_path):
    rel, text = laid(tmp_path, "attention", "attention.py", line + "\ny = q")
    got = integrity.check_file(text, rel, {"attention"})["attention"]
    assert got and got[0].startswith("minbert/bert/attention.py:") and why in got[0], got


@pytest.mark.slow
@pytest.mark.parametrize("route", list(ROUTES))
def test_each_route_past_the_fence_scores_zero_or_is_flagged(route, student, tmp_path):
    key, file, block, _ = ROUTES[route]
    sub = with_block(student, tmp_path, file, key, block)
    got = grade(sub, {key}, salt=1)
    flagged = got.integrity[key]
    assert scores(got)[key] == 0 or flagged, f"{route}: scored {scores(got)[key]} and was not flagged"
    assert flagged, f"{route}: not flagged for the instructor"
    report = results.results_json(got)
    visible = " ".join(t["output"] for t in report["tests"] if t["visibility"] != "hidden")
    assert flagged[0] not in visible and "integrity" not in visible, "a student would see the integrity report"
    hidden = [t for t in report["tests"] if t["visibility"] == "hidden"]
    assert hidden and flagged[0] in hidden[0]["output"] and report["extra_data"]["integrity"][key] == flagged
    assert flagged[0] in results.table(got)


@pytest.mark.slow
def test_the_honest_corpus_scores_full_points_past_the_fence(student, tmp_path):
    """The runtime allow-lists are not narrower than honest maths: every variant passes every case of its assignment.
    Variants of different assignments share a submission (one grade per round)."""
    from classroom_helpers import submission

    from minbert.classroom.submission import graded_files
    rounds = []                                          # at most one variant of each assignment per round
    for name, key, file, nth, body in honest_corpus():
        free = next((r for r in rounds if key not in {k for k, *_ in r}), None)
        if free is None:
            rounds.append(free := [])
        free.append((key, file, nth, name, body))
    for i, variants in enumerate(rounds):
        keys = {key for key, *_ in variants}
        restore = sorted({Path(rel).name for rel in graded_files(keys)})       # every block of these: the reference
        sub = submission(student, tmp_path / str(i), restore=restore)
        for key, file, nth, name, body in variants:
            autograder._replace_block(sub / package_file(Path(file).name), key, body.strip("\n"), nth=nth)
        got = grade(sub, keys, salt=11)
        want = {k: classroom.BY_KEY[k].points for k in keys}
        assert scores(got) == want, {k: first_failure(got, k) for k in keys if scores(got)[k] != want[k]} | {
            "variants": [name for *_, name, _ in variants]}


@pytest.mark.slow
@pytest.mark.skipif(not ISOLATION, reason="needs the sandbox (root on Linux): the fence is what the box holds")
def test_libraries_no_assignment_needs_are_not_in_the_box(student, tmp_path):
    """scikit-learn's MeanShift, reached after taking the grader's import finder off sys.meta_path, scored 10/10:
    the whole virtual environment was mounted in the box. Only what the assignments need is there now."""
    key, file, block, _ = ROUTES["scikit-learn after taking the grader's finder off sys.meta_path"]
    got = grade(with_block(student, tmp_path, file, key, block), {key}, salt=1)
    assert scores(got) == {key: 0}, f"scikit-learn was importable in the box: {first_failure(got, key)}"
    assert "ModuleNotFoundError" in first_failure(got, key) or "does not allow" in first_failure(got, key), \
        first_failure(got, key)
