"""The fence checks its own handlers (minbert/classroom/fence.py, `Fence.intact`): torch calls a mode's handler as it
finds it on the mode object, its class or a base (`__getattribute__` included), so a handler rebound there leaves
the same mode objects on both of torch's stacks, and every check of those stacks passes. Every check, and every
case's end, compares each handler and each function the fence installed with the one it recorded.

Oracle: the red team's route (each mode's handler replaced on its class by one that runs the call unchecked, then
F.scaled_dot_product_attention) scored attention 10/10 against the fence alone before; it must score 0 with the
fence's own line, and each rebinding, made in this process, must be refused by the layer left whole or at the
case's end. The gate is switched off here (`without_gate`): this is the fence's own defence, the second wall.
"""

import types

import pytest
import torch
import torch.nn.functional as F
from classroom_helpers import (first_failure, grade, needs_isolation, scores, student, with_block,  # noqa: F401
                               without_gate)
from test_fence import attention_inputs, fenced

from minbert.classroom import fence as FENCE


def unchecked(self, func, types, args=(), kwargs=None):
    """A handler that runs every call as asked, checking nothing."""
    return func(*args, **(kwargs or {}))


def rebind_on_class(mode, name):
    setattr(type(mode), name, unchecked)


def rebind_on_instance(mode, name):
    setattr(mode, name, types.MethodType(unchecked, mode))


def swap_instance_dict(mode, name):
    mode.__dict__ = {**vars(mode), name: types.MethodType(unchecked, mode)}


def rebind_code(mode, name):
    """The handler's function object kept, its code replaced by the unchecked one (with the same free variables,
    which Python requires)."""
    handler = getattr(type(mode), name)
    free = handler.__code__.co_freevars
    maker = ("def maker():\n" + "".join(f"    {n} = None\n" for n in free) + "    def handler(self, func, types, "
             "args=(), kwargs=None):\n        " + ", ".join(free) + "\n        return func(*args, **(kwargs or {}))\n"
             "    return handler\n")
    space = {}
    exec(maker, space)
    handler.__code__ = space["maker"]().__code__


def swap_class(mode, name):
    mode.__class__ = type("Unchecked", (type(mode).__mro__[1],), {name: unchecked})


def rebind_lookup(mode, name):
    """Every attribute looked up on the mode object answers with the unchecked handler."""
    def lookup(self, attribute):
        return types.MethodType(unchecked, self) if attribute == name else object.__getattribute__(self, attribute)
    type(mode).__getattribute__ = lookup


REBINDINGS = {f.__name__: f for f in (rebind_on_class, rebind_on_instance, swap_instance_dict, rebind_code, swap_class,
                                      rebind_lookup)}
HANDLER = {0: "__torch_function__", 1: "__torch_dispatch__"}     # fence.modes: (call mode, op mode)


@pytest.mark.parametrize("layers", [(0,), (1,), (0, 1)], ids=["call mode", "op mode", "both modes"])
@pytest.mark.parametrize("rebind", list(REBINDINGS))
def test_a_rebound_handler_is_refused_by_the_fence_alone(rebind, layers):
    """The fence alone, entered in this process: a handler rebound (on the class, on the instance, its code, the
    object's class, the class's attribute lookup) is refused by the other layer's next check when one is left, and
    at the case's end in any event: the kernel either never ran or its case fails."""
    q, k, v, mask = attention_inputs()
    with fenced("attention") as f:
        assert f.intact() and f.case_done("/t")[0] == ""
        classes = [type(mode) for mode in f.modes]
        for i in layers:
            REBINDINGS[rebind](f.modes[i], HANDLER[i])
        try:
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            ran = True
        except FENCE.Banned as e:
            assert e.op == FENCE.REMOVED, e.op
            ran = False
        assert ran == (len(layers) == 2), f"{rebind}: the layer left whole let SDPA run" if ran else \
            f"{rebind}: both handlers rebound, yet a check ran"
        assert f.case_done("/t")[0] == FENCE.REMOVED
        for mode, cls in zip(f.modes, classes):         # (each class is this fence's own: nothing else sees it)
            mode.__class__ = cls


def test_a_function_the_fence_installed_is_held():
    """A function the fence put in place of one it takes away (torch._C's pop of a dispatch mode) is compared at
    every check: put back, the next call is refused."""
    with fenced("attention") as f:
        space, original = vars(torch._C), torch._C._pop_torch_dispatch_stack
        f.hold(space, "_pop_torch_dispatch_stack", lambda *a: None)
        with pytest.raises(FENCE.Banned, match="removed or disabled"):
            torch.ones(2) + 1
        assert space["_pop_torch_dispatch_stack"] is original


# The red team's route, as a block: each mode found on torch's stacks, its handler replaced on its class.
REBOUND_BLOCK = """
for count, at, name in ((torch._C._len_torch_function_stack, torch._C._get_function_stack_at, "__torch_function__"),
                        (torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at, "__torch_dispatch__")):
    for i in range(count()):
        setattr(type(at(i)), name, lambda self, func, types, args=(), kwargs=None: func(*args, **(kwargs or {})))
y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
"""


@needs_isolation
@pytest.mark.slow
def test_a_block_that_rebinds_the_modes_handlers_on_their_class_scores_zero_against_the_fence_alone(
        student, tmp_path, without_gate):  # noqa: F811
    """10/10 before, with no refusal: every stack check passed. Now every case fails with the fence's line."""
    sub = with_block(student, tmp_path, "attention.py", "attention", REBOUND_BLOCK)
    entries = grade(sub, {"attention"}, salt=3)
    assert scores(entries) == {"attention": 0}, [e["output"] for e in entries]
    assert first_failure(entries, "attention").startswith(f"called {FENCE.REMOVED}, which assignment attention"), \
        first_failure(entries, "attention")
