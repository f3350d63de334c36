"""Each invariant the fence verifies (minbert/classroom/fence.py), broken alone with nothing taken away (the fence
entered in this process): the first check after it, or the case's end, refuses with the fence's own line, and an
allowed call made meanwhile never runs unchecked. Each was seen passing a broken fence when its condition was
dropped from fence.py.

Oracle: torch's own mode stacks and dispatch-key state (torch._C), read independently of the fence: a second mode on
either stack, a layer disabled, or a mode taken off is a state in which some call or operator escapes its layer.
"""

import contextlib

import pytest
import torch
from test_fence import fenced
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from minbert.classroom import fence as FENCE


class Above(TorchDispatchMode):
    """A second operator mode, pushed above the fence's: it sees every operator before the fence does."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class AboveCalls(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def popped(f, which):
    """One of the fence's modes taken off torch's stack, and put back after."""
    pop, push = ((torch._C._pop_torch_function_stack, torch._C._push_on_torch_function_stack) if which == "calls" else
                 (lambda: torch._C._pop_torch_dispatch_stack(None), torch._C._push_on_torch_dispatch_stack))
    mode = pop()
    try:
        yield
    finally:
        push(mode)


# Each break, and whether the next check refuses it ("check") or only the case's end can ("end": a function mode
# above the call layer is set aside while its handler runs, and every call reaches the fence's call mode after it).
BREAKS = {
    "a second dispatch mode pushed above the op layer": (lambda f: Above(), "check"),
    "a second function mode pushed above the call layer": (lambda f: AboveCalls(), "end"),
    "the Python dispatch key excluded (the op layer skipped)": (lambda f: torch._C._DisableTorchDispatch(), "check"),
    "torch functions disabled (the call layer skipped)": (lambda f: torch._C.DisableTorchFunction(), "check"),
    "the call mode popped": (lambda f: popped(f, "calls"), "check"),
    "the op mode popped": (lambda f: popped(f, "ops"), "check"),
}


@pytest.mark.parametrize("broken", list(BREAKS))
def test_each_broken_invariant_is_refused_by_the_next_check_or_the_cases_end(broken):
    make, by = BREAKS[broken]
    with fenced("attention") as f:
        assert f.case_done("/t")[0] == ""
        x = torch.ones(2)
        with make(f):
            try:
                x + 1
                refused = ""
            except FENCE.Banned as e:
                refused = e.op
            at_end = f.case_done("/t")[0]
        assert at_end == FENCE.REMOVED, f"{broken}: the case's end let it pass"
        assert refused == (FENCE.REMOVED if by == "check" else ""), f"{broken}: the next check gave {refused!r}"
        assert f.case_done("/t")[0] == ""                # put back: the fence is whole again


def test_the_call_layer_refuses_a_second_dispatch_mode_above_the_op_layer_at_once():
    """Not only at the case's end: the call layer's own check sees the op mode is not alone on its stack."""
    with fenced("attention"), Above():
        with pytest.raises(FENCE.Banned, match="removed or disabled"):
            torch.ones(2) + 1


def test_a_refusal_fails_the_case_though_the_code_caught_it():
    q = torch.ones(1, 1, 2, 2)
    with fenced("attention") as f:
        try:
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
        except FENCE.Banned:
            pass
        assert f.case_done("/t")[0] == "torch.nn.functional.scaled_dot_product_attention"
