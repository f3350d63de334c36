"""The fence's operator list holds every elementwise and reduction operator, in every overload, `_foreach_` forms
included (fence.elementwise): an honest answer may reach any of them, and none computes an assignment's answer.

Oracles: torch's own registry, read through the public OpOverload objects (`torch.ops.aten.X.Y.tags`, another path
than the fence's): every operator tagged pointwise or reduction (no random draw) is allowed to every assignment;
the `_foreach_` forms of the reference's operators, each overload the dispatcher lists (Scalar, ScalarList, List,
Tensor), too; torch's fused optimizer and attention kernels stay refused. End to end, AdamW in the `_foreach_`
style its docstring invites, bias corrections as per-tensor lists (`aten::_foreach_div_.ScalarList`, which the
fence refused: 2.5/10 for a correct answer), scores full marks.
"""

import pytest
import torch
from classroom_helpers import grade, scores, solution, student, with_block  # noqa: F401 (student: a fixture)
from test_fence import fenced, refusal

from minbert.classroom import allowlists, assignments as C, autograder, fence as FENCE


def overloads(prefix):
    return sorted(n for n in FENCE.all_op_names() if n.startswith(prefix) and n[len(prefix)] in "._")


def public_op(name):
    packet, _, overload = name[6:].partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload)


@pytest.mark.parametrize("key", list(C.BY_KEY))
def test_every_tagged_elementwise_and_reduction_operator_is_allowed_in_every_overload(key):
    a = C.BY_KEY[key]
    tagged = [n for n in FENCE.all_op_names() if n.startswith("aten::")
              and {torch.Tag.pointwise, torch.Tag.reduction} & set(public_op(n).tags)
              and torch.Tag.nondeterministic_seeded not in public_op(n).tags]
    assert len(tagged) > 500, f"only {len(tagged)} tagged operators: the registry was not read"
    missing = allowlists.without(tagged, a.removes) - a.allowed_ops
    assert not missing, f"{key} refuses {sorted(missing)[:5]}"


FOREACH = ("add", "sub", "mul", "div", "addcmul", "addcdiv", "sqrt", "lerp", "maximum", "pow", "neg", "exp", "abs",
           "clamp_min", "reciprocal", "norm", "copy", "zero")


@pytest.mark.parametrize("op", FOREACH)
def test_every_foreach_overload_of_an_elementwise_operator_is_allowed(op):
    found = overloads(f"aten::_foreach_{op}") + overloads(f"aten::_foreach_{op}_")
    assert len(found) >= 2, f"the dispatcher lists {found} for _foreach_{op}"
    for a in C.ASSIGNMENTS:
        assert set(found) <= a.allowed_ops, f"{a.key} refuses {sorted(set(found) - a.allowed_ops)}"
        assert f"torch._foreach_{op}_" in a.allowed_calls or f"torch._foreach_{op}" in a.allowed_calls


@pytest.mark.parametrize("prefix", ["aten::_fused_adamw", "aten::_fused_adam", "aten::_fused_sgd",
                                    "aten::_fused_adagrad", "aten::_scaled_dot_product", "aten::_native_multi_head",
                                    "aten::_transformer_encoder_layer_fwd", "aten::_fused_rms_norm"])
def test_no_library_kernel_comes_with_the_elementwise_operators(prefix):
    found = [n for n in FENCE.all_op_names() if n.startswith(prefix)]
    assert found
    allowed = FENCE.elementwise(allowlists.elementary_ops())[0]
    assert not set(found) & allowed, sorted(set(found) & allowed)


def test_a_foreach_step_with_per_tensor_lists_runs_under_adamws_fence():
    """Each overload the foreach style reaches, called under the fence: none refused."""
    g = torch.Generator().manual_seed(0)
    p, m, v, grads = ([torch.randn(3, generator=g) for _ in range(2)] for _ in range(4))
    with fenced("adamw"):
        torch._foreach_mul_(p, [0.99, 0.98])                     # ScalarList
        torch._foreach_lerp_(m, grads, [0.1, 0.1])
        torch._foreach_mul_(v, torch.tensor(0.999))              # Tensor
        torch._foreach_addcmul_(v, grads, grads, [0.001, 0.001])
        denom = torch._foreach_sqrt(v)
        torch._foreach_div_(denom, [0.5, 0.25])
        torch._foreach_add_(denom, [1e-8, 1e-8])
        update = torch._foreach_div(m, denom)                    # List
        torch._foreach_sub_(p, update)
        torch._foreach_addcdiv_(p, m, denom, [-0.01, -0.02])



@pytest.mark.parametrize("key", list(C.BY_KEY))
def test_torch_from_numpy_after_a_numpy_step_runs_under_every_fence(key):
    """`torch.from_numpy` reaches the call layer as the operator it runs (torch.ops.aten.lift_fresh.default), which
    the op layer allows: a numpy step turned back into a tensor is honest in every assignment (surgery's numpy
    variants lost 6.4-8.6 points on it)."""
    import numpy as np
    got = refusal(key, lambda: torch.from_numpy(np.fabs(np.array([-1.0, 2.0]))) * 2)
    assert got == "", f"assignment {key}: the fence refused {got} for torch.from_numpy (classroom/assignments.py)"

# AdamW's step as a student writes it from the hint in the foreach style, every scalar a per-tensor list (names the
# reference block uses, overloads it never reaches).
FOREACH_STEP = """
n = len(params)
if wd != 0:
    torch._foreach_mul_(params, [1 - lr * wd] * n)
torch._foreach_lerp_(exp_avgs, grads, [1 - beta1] * n)
torch._foreach_mul_(exp_avg_sqs, [beta2] * n)
torch._foreach_addcmul_(exp_avg_sqs, grads, grads, [1 - beta2] * n)
denom = torch._foreach_sqrt(exp_avg_sqs)
torch._foreach_div_(denom, [(1 - beta2 ** t) ** 0.5 for t in steps])
torch._foreach_add_(denom, [eps] * n)
torch._foreach_addcdiv_(params, exp_avgs, denom, [-lr / (1 - beta1 ** t) for t in steps])
"""


@pytest.mark.slow
def test_adamw_in_the_foreach_style_with_per_tensor_lists_scores_full_marks(student, tmp_path):
    """2.5/10 before: the fence refused aten::_foreach_div_.ScalarList, while the gate and the copy's tests passed."""
    sub = with_block(student, tmp_path, "adamw.py", "adamw", FOREACH_STEP)
    schedule = "# Warm-up" + solution("adamw.py", "adamw").split("# Warm-up")[1]     # the reference's schedule
    autograder._replace_block(sub / "minbert" / "adamw.py", "adamw", schedule, nth=1)
    entries = grade(sub, {"adamw"}, salt=3)
    assert scores(entries) == {"adamw": 10}, [e["output"] for e in entries if e["score"] < e["max_score"]][:3]
