"""The integrity report (minbert/classroom/integrity.py): what the fence cannot stop is flagged for the instructor.

Oracle: the routes a red team used to reach torch's or scikit-learn's own implementation (each 10/10 on its
assignment before), written out as submissions: each must score 0 or be flagged on its assignment, and the
instructor's reference solutions must raise no flag. The report reaches the instructor only: the table, a
hidden test in results.json and its extra_data, never a visible test.
"""

from pathlib import Path

import pytest
from classroom_helpers import ISOLATION, ROOT, first_failure, scores, student, with_block  # noqa: F401

from minbert.classroom import assignments as classroom, integrity, results
from minbert.classroom.grade import grade

BUILTINS_BY_REFLECTION = "_b = type(torch).__getattribute__(torch, '__buil' + 'tins__')\n"

ROUTES = {
    "flex attention's eager math_attention": ("attention", "attention.py", """
_m = print.__self__.__getattribute__('__imp' + 'ort__')('torch._higher_order_ops.flex_attention', None, None, ['x'])
_am = mask.to(q.dtype).expand(q.shape[0], 1, 1, q.shape[2]).reshape(q.shape[0], q.shape[2])
y = _m.math_attention(q, k, v, lambda s, b, h, qi, ki: s + _am[b, ki], (lambda b, h, qi, ki: qi >= 0,),
                      q.shape[-1] ** -0.5, {})[0]
"""),
    "a fresh copy of torch/optim/adam.py": ("adamw", "adamw.py", BUILTINS_BY_REFLECTION + """
_u = _b['__imp' + 'ort__']('importlib.util', None, None, ['x'])
_spec = _u.spec_from_file_location('torch.optim._fresh_adam', torch.__getattribute__('op' + 'tim').__file__.rsplit('/', 1)[0] + '/adam.py')
_fresh = _u.module_from_spec(_spec)
_spec.loader.exec_module(_fresh)
_fresh._single_tensor_adam(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(t - 1.0) for t in steps],
                           None, None, amsgrad=False, has_complex=False, beta1=beta1, beta2=beta2, lr=lr,
                           weight_decay=wd, eps=eps, maximize=False, capturable=False, differentiable=False,
                           decoupled_weight_decay=True)
"""),
    "scikit-learn after taking the grader's finder off sys.meta_path": ("meanshift", "meanshift.py",
                                                                        BUILTINS_BY_REFLECTION.replace("torch", "np") + """
_sys = _b['__imp' + 'ort__']('sys')
_sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != '_RefuseModules']
_mods = _sys.__getattribute__('mod' + 'ules')
for _k in [k for k in _mods if k.startswith('skl' + 'earn')]:
    del _mods[_k]
_sk = _b['__imp' + 'ort__']('skl' + 'earn.cluster', None, None, ['x'])
return float(_sk.__getattribute__('estimate_' + 'bandwidth')(x.reshape(-1, 1), quantile=quantile))
"""),
}


def test_the_reference_solutions_raise_no_flag():
    flagged = integrity.report(ROOT, {a.key for a in classroom.ASSIGNMENTS})
    assert not any(flagged.values()), f"an honest solution was flagged: {flagged}"


@pytest.mark.parametrize("line, why", [
    ("_b = type(torch).__getattribute__(torch, '__buil' + 'tins__')", "reflection (__getattribute__)"),
    ("_b = type(torch).__getattribute__(torch, '__buil' + 'tins__')", "a name built from string pieces"),
    ("y = torch._C._nn.gelu(x)", "private internals (torch._C)"),
    ("y = torch.ops.aten.gelu(x)", "private internals (torch.ops)"),
    ("from torch._higher_order_ops.flex_attention import math_attention", "imports private internals"),
    ("import importlib", "imports importlib"),
    ("f = getattr(F, name)", "getattr with a computed name"),
    ("exec(code)", "dynamic code or names (exec)"),
    ("g = y.__dict__", "reflection (__dict__)"),
    ("src = torch.optim.__file__", "reflection (__file__)"),
    ("s = '/site-packages/torch/optim/adam.py'", "names a source or library file"),
    ("sys.meta_path.clear()", "reflection (meta_path)"),
])
def test_each_kind_of_reach_is_flagged_with_why(line, why):
    got = integrity.flags_in(line, "minbert/bert/attention.py", 40)
    assert got and got[0].startswith("minbert/bert/attention.py:40: ") and why in got[0], got


@pytest.mark.slow
@pytest.mark.parametrize("route", list(ROUTES))
def test_each_route_past_the_fence_scores_zero_or_is_flagged(route, student, tmp_path):
    key, file, block = ROUTES[route]
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
@pytest.mark.skipif(not ISOLATION, reason="needs the sandbox (root on Linux): the fence is what the box holds")
def test_libraries_no_assignment_needs_are_not_in_the_box(student, tmp_path):
    """scikit-learn's MeanShift, reached after taking the grader's import finder off sys.meta_path, scored 10/10:
    the whole virtual environment was mounted in the box. Only what the assignments need is there now."""
    key, file, block = ROUTES["scikit-learn after taking the grader's finder off sys.meta_path"]
    got = grade(with_block(student, tmp_path, file, key, block), {key}, salt=1)
    assert scores(got) == {key: 0}, f"scikit-learn was importable in the box: {first_failure(got, key)}"
    assert "raised ModuleNotFoundError" in first_failure(got, key), first_failure(got, key)
