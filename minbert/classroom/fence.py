"""The runtime fence: while a submission runs, every operator it reaches must be on its assignment's allow-list.

Copied into each box as `_minbert_grader_fence.py` and installed by child.py before any of the submission's code
is imported; it stays installed until the child has written its results. Two layers, each an allow-list held in
the assignment's record (assignments.py: `Assignment.allowed_ops` and `allowed_calls`), each refusing what it does
not list with one line, "called X, which assignment K does not allow":

  ops    every ATen operator call by its full name and overload (`aten::mm.default`, `aten::_fused_adamw_.tensor_lr`),
         seen by a TorchDispatchMode at the dispatcher's Python key: below autograd, where every kernel that
         computes runs (fused optimizers, the SDPA kernels, `_native_multi_head_attention`, backward kernels),
         whichever Python name or overload reached it;
  calls  every call into torch's Python API (`torch.matmul`, `torch.Tensor.softmax`, a property such as
         `torch.Tensor.shape.__get__`, `torch.ops.aten.X`), seen by a TorchFunctionMode before anything runs. This
         layer exists for the composites: a CompositeImplicitAutograd operator is decomposed before the dispatch
         layer sees it, so `F.scaled_dot_product_attention` on its math path, `torch.ops.aten._scaled_dot_product_
         attention_math` or `F.multi_head_attention_forward(need_weights=True)` would reach the dispatch layer as
         `bmm` and `_softmax` only, which attention allows. Refused here by their own names.

Why modes and not a dispatcher registration per operator: a mode sees every call at its layer whatever dispatch
key would run it (CPU, sparse, meta), and recording and checking are one mechanism, so a list derived by recording
is exactly what the check compares against. A refusal registered at CompositeImplicitAutograd would also fire
inside allowed operators that use an unlisted composite internally, which no recording at either layer sees.
Modes are per thread and can be popped: so the child refuses new threads, a Tensor subclass that brings its
own `__torch_function__`/`__torch_dispatch__` is refused, and after every case `intact()` checks that both modes are
the only ones on their stacks and still see a canary call; the case fails otherwise. A refusal fails its case even
when the submission catches the exception. What a pop-compute-push inside one case would still get past needs
private names (`torch._C._pop_torch_dispatch_stack`, `torch.utils._python_dispatch._disable_current_modes`): the
integrity report flags every such line (integrity.py).

What no operator list can tell apart: torch's own Python implementation of an assignment (`torch.optim.AdamW.step`
runs `mul_`, `lerp_`, `addcdiv_`, which AdamW's list must allow) computes with the same operators as a student's.
child.py refuses those by name, and the integrity report flags any call not on the assignment's list.

`Fence(None, None)` records instead of refusing: how `python -m minbert classroom allowlists` derives each list
from the reference solution (allowlist_recording.py).
"""

import sys
import traceback

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Names a refusal can carry besides operators and torch callables (the parent accepts exactly these).
SUBCLASS = "a Tensor subclass with its own __torch_function__ or __torch_dispatch__"
THREAD = "a new thread (the fence watches the grading thread only)"
REMOVED = "code that removed or disabled the operator fence"
FIXED = (SUBCLASS, THREAD, REMOVED)
PLAIN = (torch.Tensor, torch.nn.Parameter)     # what a case's tensors are; no subclass runs code of its own

# Captured when this module is loaded, before any submission code: what intact() relies on.
_len_dispatch, _dispatch_at = torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at
_len_function, _function_at = torch._C._len_torch_function_stack, torch._C._get_function_stack_at
_pop_dispatch, _pop_function = torch._C._pop_torch_dispatch_stack, torch._C._pop_torch_function_stack
_zeros = torch.zeros

# Where torch's public callables live, searched in this order for an object's public name.
PUBLIC = ("torch", "torch.Tensor", "torch.nn.functional", "torch.nn", "torch.nn.init", "torch.linalg",
          "torch.special", "torch.fft", "torch.autograd")
_public = {}


def _public_names() -> dict:
    """{id(object): (object, 'torch.nn.functional.softmax')} for the callables in PUBLIC (each object held here, so
    that its id is never another's). Module dictionaries only: no lazy import is triggered."""
    if not _public:
        for where in PUBLIC:
            module, _, cls = where.rpartition(".") if where == "torch.Tensor" else (where, "", "")
            owner = getattr(sys.modules[module], cls) if cls else sys.modules.get(module)
            if owner is None:
                continue
            spaces = [vars(k) for k in type.mro(owner)[:-1]] if isinstance(owner, type) else [vars(owner)]
            for space in spaces:
                for name, obj in space.items():
                    if callable(obj) and not isinstance(obj, type(sys)):
                        _public.setdefault(id(obj), (obj, f"{where}.{name}"))
    return _public


def op_name(func) -> str:
    """'aten::mm.default' for the OpOverload torch.ops.aten.mm.default (the dispatcher's name and overload)."""
    return f"{func._schema.name}.{func._overloadname}"


def normal_op_name(name: str) -> str:
    """'aten::bmm' (as torch._C._dispatch_get_all_op_names() lists a default overload) -> 'aten::bmm.default'."""
    return name if "." in name.partition("::")[2] else name + ".default"


def call_name(func) -> str:
    """The public dotted name of a torch callable, as the call layer and the lists write it: 'torch.matmul',
    'torch.Tensor.softmax', 'torch.nn.functional.gelu', 'torch.Tensor.shape.__get__', 'torch.ops.aten.mm.default';
    otherwise the object's module and qualified name ('torch._C._set_grad_enabled')."""
    if isinstance(func, torch._ops.OpOverload):
        return f"torch.ops.{func.namespace}.{func._schema.name.partition('::')[2]}.{func._overloadname}"
    if isinstance(func, torch._ops.OpOverloadPacket):
        return f"torch.ops.{func._qualified_op_name.replace('::', '.')}"
    found = _public_names().get(id(func))
    if found and found[0] is func:
        return found[1]
    owner = getattr(func, "__self__", None)
    if type(func).__name__ == "method-wrapper" and getattr(owner, "__objclass__", None) is torch._C.TensorBase:
        return f"torch.Tensor.{owner.__name__}.{func.__name__}"          # a property: shape, grad, data, ...
    module = getattr(func, "__module__", None) or type(func).__module__
    return f"{module}.{getattr(func, '__qualname__', None) or getattr(func, '__name__', '?')}"


def all_op_names() -> frozenset:
    """Every operator overload the dispatcher knows, as op_name writes it."""
    global _all_ops
    if _all_ops is None:
        _all_ops = frozenset(normal_op_name(n) for n in torch._C._dispatch_get_all_op_names())
    return _all_ops


_all_ops = None


def resolve(path: str):
    """The object a dotted path names among the modules already imported, read without running anything (no
    import, no __getattr__), or None. 'torch.Tensor.shape.__get__' gives the method-wrapper call_name names."""
    import inspect
    parts = path.split(".")
    i = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in sys.modules), 0)
    if not i:
        return None
    obj = sys.modules[".".join(parts[:i])]
    for part in parts[i:]:
        if type(obj).__name__ == "getset_descriptor" and part in ("__get__", "__set__"):
            obj = getattr(obj, part)                     # the bound method-wrapper of a property
            continue
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            return None
        obj = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
    return obj


def names_something(name: str) -> bool:
    """Whether `name` (from a child: text the submission may have chosen) is the name of an operator or of a torch
    callable as op_name/call_name write them, looked up without importing or running anything."""
    if "::" in name:
        return name in all_op_names()
    if name.startswith("torch.ops."):
        ns, _, rest = name[len("torch.ops."):].partition(".")
        op = f"{ns}::{rest}"
        return normal_op_name(op) in all_op_names() or any(n.startswith(op + ".") for n in all_op_names())
    obj = resolve(name)
    return obj is not None and callable(obj) and call_name(obj) == name


class Banned(RuntimeError):
    """A refusal: `op` is what was called (an operator, a torch callable or one of FIXED)."""

    def __init__(self, op):
        super().__init__(op)
        self.op = op


class Fence:
    """The two modes and what they saw. `ops`/`calls`: the allow-lists (None: record, refuse nothing)."""

    def __init__(self, ops, calls, key: str = ""):
        self.ops, self.calls, self.key = ops, calls, key
        self.seen_ops, self.seen_calls = set(), set()
        self.refused = None                              # the first refusal of the current case
        self.refused_at = []                             # (file, line) of its stack, outermost first
        self.canary, self.saw_canary = False, set()
        self.modes = (_CallMode(self), _OpMode(self))

    def refuse(self, name: str):
        """Record the refusal (it fails the case even if the submission catches it) and raise it."""
        if self.refused is None:
            self.refused, self.refused_at = name, [(f.filename, f.lineno) for f in traceback.extract_stack()]
        raise Banned(name)

    def check_op(self, func, types):
        name = op_name(func)
        if self.canary:
            self.saw_canary.add("op")
            return
        if any(t not in PLAIN for t in types):
            self.refuse(SUBCLASS)
        if self.ops is None:
            self.seen_ops.add(name)
        elif name not in self.ops:
            self.refuse(name)

    def check_call(self, func, types):
        if self.canary:
            self.saw_canary.add("call")
            return
        if any(t not in PLAIN for t in types):
            self.refuse(SUBCLASS)
        name = call_name(func)
        if self.calls is None:
            self.seen_calls.add(name)
        elif name not in self.calls:
            self.refuse(name)

    def install(self):
        _public_names()                                  # named before the submission can rename torch's callables
        for mode in self.modes:
            mode.__enter__()                             # never left: the child exits with the fence on

    def intact(self) -> bool:
        """Both modes, and nothing else, on their stacks, and both still see a call (the canary)."""
        call_mode, op_mode = self.modes
        if (_len_function() != 1 or _function_at(0) is not call_mode or _len_dispatch() != 1
                or _dispatch_at(0) is not op_mode):
            return False
        self.canary, self.saw_canary = True, set()
        try:
            _zeros(())
        finally:
            self.canary = False
        return self.saw_canary == {"op", "call"}

    def case_done(self, template: str) -> tuple[str, str]:
        """(the name that fails the case just run, or '': its first refusal, or REMOVED when the fence is not
        intact; 'minbert/x.py:N', the innermost line of the submission's package on the refusal's stack, or ''),
        and the fence ready for the next case."""
        refused, stack = self.refused, self.refused_at
        self.refused, self.refused_at = None, []
        if not self.intact():
            refused, stack = refused or REMOVED, stack if refused else []
            self._reinstall()
        inside = [f"{file.removeprefix(template + '/')}:{line}" for file, line in stack if file.startswith(template + "/")]
        return refused or "", inside[-1] if inside else ""

    def _reinstall(self):
        while _len_function():
            _pop_function()
        while _len_dispatch():
            _pop_dispatch(None)
        self.modes = (_CallMode(self), _OpMode(self))
        self.install()


class _CallMode(TorchFunctionMode):
    def __init__(self, fence):
        super().__init__()
        self.fence = fence

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.fence.check_call(func, types)
        return func(*args, **(kwargs or {}))


class _OpMode(TorchDispatchMode):
    def __init__(self, fence):
        super().__init__()
        self.fence = fence

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch would otherwise wrap __torch_dispatch__ in torch._dynamo.disable, and the first op of every
        box would import torch._dynamo (sympy included): seconds per assignment, for a compiler no box uses."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.fence.check_op(func, types)
        return func(*args, **(kwargs or {}))


def refuse_threads(fence: Fence):
    """Modes are per thread: a thread started by the submission would run without them. Every Python thread is
    started by _thread.start_new_thread (threading keeps its own reference to it)."""
    import _thread
    import threading

    def refused(*args, **kwargs):
        fence.refuse(THREAD)
    _thread.start_new_thread = threading._start_new_thread = refused
    if hasattr(_thread, "start_joinable_thread"):          # Python 3.13
        _thread.start_joinable_thread = threading._start_joinable_thread = refused
