"""The runtime fence: every operator (a TorchDispatchMode) and torch call (a TorchFunctionMode) a submission reaches
must be on its assignment's lists (`Assignment.allowed_ops`, `allowed_calls`), or the case fails: "called X, which
assignment K does not allow". `Fence(None, None)` records instead. Design and limits: docs/classroom.md.
"""

import functools
import operator
import sys
import traceback
from types import MappingProxyType

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Names a refusal can carry besides operators and torch callables (the parent accepts exactly these).
SUBCLASS = "a Tensor subclass with its own __torch_function__ or __torch_dispatch__"
THREAD = "a new thread (the fence watches the grading thread only)"
REMOVED = "code that removed or disabled the operator fence"
FIXED = (SUBCLASS, THREAD, REMOVED)
PLAIN = (torch.Tensor, torch.nn.Parameter)     # what a case's tensors are; no subclass runs code of its own

# Where torch's public callables live, searched in this order for an object's public name.
PUBLIC = ("torch", "torch.Tensor", "torch.nn.functional", "torch.nn", "torch.nn.init", "torch.linalg",
          "torch.special", "torch.fft", "torch.autograd")


@functools.cache
def _public_names() -> dict:
    """{id(object): (object, 'torch.nn.functional.softmax')} for the callables in PUBLIC (each object held here, so
    that its id is never another's). Module dictionaries only: no lazy import is triggered."""
    public = {}
    for where in PUBLIC:
        module, _, cls = where.rpartition(".") if where == "torch.Tensor" else (where, "", "")
        owner = getattr(sys.modules[module], cls) if cls else sys.modules.get(module)
        if owner is None:
            continue
        spaces = [vars(k) for k in type.mro(owner)[:-1]] if isinstance(owner, type) else [vars(owner)]
        for space in spaces:
            for name, obj in space.items():
                if callable(obj) and not isinstance(obj, type(sys)):
                    public.setdefault(id(obj), (obj, f"{where}.{name}"))
    return public


def op_name(func) -> str:
    """'aten::mm.default' for the OpOverload torch.ops.aten.mm.default (the dispatcher's name and overload)."""
    return f"{func._schema.name}.{func._overloadname}"


def normal_op_name(name: str) -> str:
    """'aten::bmm' (as torch._C._dispatch_get_all_op_names() lists a default overload) -> 'aten::bmm.default'."""
    return name if "." in name.partition("::")[2] else name + ".default"


def call_name(func, public=None) -> str:
    """The public dotted name of a torch callable, as the call layer and the lists write it: 'torch.matmul',
    'torch.Tensor.softmax', 'torch.nn.functional.gelu', 'torch.Tensor.shape.__get__', 'torch.ops.aten.mm.default';
    otherwise the object's module and qualified name ('torch._C._set_grad_enabled')."""
    if isinstance(func, torch._ops.OpOverload):
        return f"torch.ops.{func.namespace}.{func._schema.name.partition('::')[2]}.{func._overloadname}"
    if isinstance(func, torch._ops.OpOverloadPacket):
        return f"torch.ops.{func._qualified_op_name.replace('::', '.')}"
    found = (public or _public_names()).get(id(func))
    if found and found[0] is func:
        return found[1]
    owner = getattr(func, "__self__", None)
    if type(func).__name__ == "method-wrapper" and getattr(owner, "__objclass__", None) is torch._C.TensorBase:
        return f"torch.Tensor.{owner.__name__}.{func.__name__}"          # a property: shape, grad, data, ...
    module = getattr(func, "__module__", None) or type(func).__module__
    return f"{module}.{getattr(func, '__qualname__', None) or getattr(func, '__name__', '?')}"


@functools.cache
def all_op_names() -> frozenset:
    """Every operator overload the dispatcher knows, as op_name writes it."""
    return frozenset(normal_op_name(n) for n in torch._C._dispatch_get_all_op_names())


@functools.cache
def elementwise(base: frozenset) -> tuple[frozenset, frozenset]:
    """(ops, calls) from torch's registry: every overload of each `aten::` operator tagged pointwise or reduction (no
    random draw) or in `base`, of its `_foreach_` forms and of dropout's draws, and the torch callables of those
    names (docs/classroom.md, The fence checks its own handlers)."""
    keep, drop = {torch.Tag.pointwise, torch.Tag.reduction}, torch.Tag.nondeterministic_seeded
    packets = {}
    for name in all_op_names():
        if name.startswith("aten::"):
            packets.setdefault(name[6:].partition(".")[0], []).append(name)
    bases = {n[6:].partition(".")[0] for n in base} | {"bernoulli", "bernoulli_", "native_dropout"}
    for packet, names in packets.items():
        for name in names:
            overload = name.partition(".")[2]
            tags = torch._C._get_operation_overload(f"aten::{packet}", "" if overload == "default" else overload)[2]
            if keep & set(tags) and drop not in tags:
                bases.add(packet)
    plain = {b.rstrip("_") for b in bases}
    bases |= {p for p in packets if p.startswith("_foreach_") and p[9:].rstrip("_") in plain}
    ops = frozenset(n for b in bases for n in packets.get(b, ()))
    calls = frozenset(f"{space}{b}" for b in bases for space in ("torch.", "torch.Tensor.", "torch.nn.functional.")
                      ) | {f"torch.special.{b[8:]}" for b in bases if b.startswith("special_")}
    return ops, calls


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


def refusal_line(op: str, at: str, key: str) -> str:
    """What the student reads for a refusal, from the grader and from the copy's own tests alike."""
    return f"called {op}{f' at {at}' if at else ''}, which assignment {key} does not allow (its list: ALLOWED.md)"


class Banned(RuntimeError):
    """A refusal: `op` is what was called (an operator, a torch callable or one of FIXED)."""

    def __init__(self, op):
        super().__init__(op)
        self.op = op


class Fence:
    """One assignment's layers and the refusals they made. `ops`/`calls`: the allow-lists, fixed here (None: record
    what runs, refuse nothing); `layers`: the modes to build (a test builds one alone; each then verifies only
    that one)."""

    def __init__(self, ops, calls, key: str = "", layers=("calls", "ops")):
        self.key = key
        self.refusals = []                               # (name, [(file, line), ...]): what case_done reports
        self.seen_ops, self.seen_calls = set(), set()
        self.check_op, self.check_call, self.refuse, self.hold, self.intact, self.modes = _layers(
            None if ops is None else frozenset(ops), None if calls is None else frozenset(calls), layers,
            self.refusals, self.seen_ops, self.seen_calls)

    def install(self):
        """Both modes on, for good: the child exits with them on, and nothing that would take them off is left."""
        for mode in self.modes:
            mode.__enter__()
        _take_away(self.refuse, self.hold)

    def case_done(self, template: str) -> tuple[str, str]:
        """(the name that fails the case just run, or '': its first refusal, or REMOVED when the modes are not both
        on, or a handler or installed function is not the fence's own; 'minbert/x.py:N', the innermost line of the
        submission's package on the refusal's stack, or '')."""
        refused, stack = self.refusals[0] if self.refusals else ("", [])
        self.refusals.clear()
        call_mode, op_mode = self.modes
        if not refused and not (self.intact() and _len_function() == 1 and _function_at(0) is call_mode
                                and _len_dispatch() == 1 and _dispatch_at(0) is op_mode
                                and not torch._C._is_torch_function_all_disabled() and not _excluded(_PYTHON)):
            refused = REMOVED
        inside = [f"{file.removeprefix(template + '/')}:{line}" for file,
                  line in stack if file.startswith(template + "/")]
        return refused, inside[-1] if inside else ""


_len_dispatch, _dispatch_at = torch._C._len_torch_dispatch_stack, torch._C._get_dispatch_stack_at
_len_function, _function_at = torch._C._len_torch_function_stack, torch._C._get_function_stack_at
_excluded, _PYTHON = torch._C._dispatch_tls_is_dispatch_key_excluded, torch._C.DispatchKey.Python


def _layers(ops, calls, layers, refusals, seen_ops, seen_calls):
    """(check_op, check_call, refuse, hold, intact, (call mode or None, op mode or None)): the lists and what the
    checks use are this function's locals, held by the closures only."""
    len_dispatch, dispatch_at, len_function, function_at = _len_dispatch, _dispatch_at, _len_function, _function_at
    excluded, python, all_disabled = _excluded, _PYTHON, torch._C._is_torch_function_all_disabled
    stack, frame, public = traceback.extract_stack, sys._getframe, MappingProxyType(dict(_public_names()))
    name_op, name_call = op_name, lambda func: call_name(func, public)   # torch's names, as this fence was built

    def refuse(name: str):
        """Record the refusal (it fails the case even if the submission catches it) and raise it."""
        refusals.append((name, [(f.filename, f.lineno) for f in stack()]))
        raise Banned(name)

    def check(name: str, types, allowed, seen):
        if any(t not in PLAIN for t in types):
            refuse(SUBCLASS)
        if allowed is None:
            seen.add(name)
        elif name not in allowed:
            refuse(name)

    def check_op(func, types):
        check(name_op(func), types, ops, seen_ops)

    def check_call(func, types):
        check(name_call(func), types, calls, seen_calls)

    held, functions, codes = {}, [], []                  # {id(space): (space.get, [name], [what it holds])}
    is_, code_of = operator.is_, operator.attrgetter("__code__")

    def hold(space, name: str, value=None):
        """Note that `space[name]` (a module's, a class's or an object's __dict__) is `value` (None: absent), its
        code unchanged, for every check to compare."""
        get, names, values = held.setdefault(id(space), (space.get, [], []))
        names.append(name)
        values.append(value)
        if hasattr(value, "__code__"):
            functions.append(value)
            codes.append(value.__code__)

    def intact() -> bool:
        """Whether every handler and function the fence holds is still the one it installed (torch calls a mode's
        handler as looked up on the mode object, its class or a base, `__getattribute__` included). C loops: this
        runs at every check."""
        for get, names, values in held.values():
            if not all(map(is_, map(get, names), values)):
                return False
        return all(map(is_, map(code_of, functions), codes)) and all(
            type(mode) is cls and cls.__mro__ == mro and vars(mode) is space for mode, cls, mro, space in classes)

    def inside(handler) -> bool:
        """Whether `handler`'s code runs further up this Python stack. A mode is set aside while its handler runs
        the call (torch's stash, or handle_torch_function's pop): what runs inside is under that layer still."""
        f = frame(2)
        while f is not None and f.f_code is not handler:
            f = f.f_back
        return f is not None

    class CallMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if not intact() or op_mode is not None and not (len_dispatch() == 1 and dispatch_at(0) is op_mode
                                                            and not excluded(python) or inside(op_handler)):
                refuse(REMOVED)
            check_call(func, types)
            return func(*args, **(kwargs or {}))

    class OpMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            """False: torch would otherwise wrap __torch_dispatch__ in torch._dynamo.disable, and the first op of
            every box would import torch._dynamo (sympy included): seconds per assignment, for no compiler."""
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not intact() or call_mode is not None and not (len_function() == 1 and function_at(0) is call_mode
                                                              and not all_disabled() or inside(call_handler)):
                refuse(REMOVED)
            check_op(func, types)
            return func(*args, **(kwargs or {}))

    call_handler, op_handler = CallMode.__torch_function__.__code__, OpMode.__torch_dispatch__.__code__
    call_mode = CallMode() if "calls" in layers else None
    op_mode = OpMode() if "ops" in layers else None
    classes = [(mode, type(mode), type(mode).__mro__, vars(mode)) for mode in (call_mode, op_mode) if mode is not None]
    for mode, cls, mro, _ in classes:
        handler = "__torch_function__" if mode is call_mode else "__torch_dispatch__"
        hold(vars(mode), handler)
        hold(vars(cls), handler, vars(cls)[handler])
        for k in mro[:-1]:
            hold(vars(k), "__getattribute__")
    return check_op, check_call, refuse, hold, intact, (call_mode, op_mode)


# What takes a mode off or switches a layer off (torch._C's names): refused once the fence is installed.
TAKEN = ("_pop_torch_dispatch_stack", "_unset_dispatch_mode", "DisableTorchFunction", "_DisableTorchDispatch",
         "_ExcludeDispatchKeyGuard", "_SetExcludeDispatchKeyGuard", "_ForceDispatchKeyGuard",
         "_dispatch_tls_set_dispatch_key_excluded", "_RestorePythonTLSSnapshot")


def _take_away(refuse, hold):
    """Replace TAKEN, the torch-function pop (but torch's own handle_torch_function's) and `_disable_current_modes`
    in every module that holds them, each refusing REMOVED, held for every check to compare (docs/classroom.md)."""
    import contextlib
    import torch.overrides as O
    import torch.utils._python_dispatch as D

    def refused(*args, **kwargs):
        refuse(REMOVED)

    chain = (O._pop_mode.__code__, O._pop_mode_temporarily.__wrapped__.__code__,
             contextlib._GeneratorContextManager.__enter__.__code__, O.handle_torch_function.__code__)
    pop, frame = torch._C._pop_torch_function_stack, sys._getframe

    def torch_own_pop():
        f = frame(1)
        for code in chain:
            if f is None or f.f_code is not code:
                refuse(REMOVED)
            f = f.f_back
        return pop()

    swap = {id(o): (o, refused) for o in [getattr(torch._C, n) for n in TAKEN] + [D._disable_current_modes]}
    swap[id(pop)] = pop, torch_own_pop                  # (each original held here until every module is done)
    for module in list(sys.modules.values()):
        space = getattr(module, "__dict__", None)
        if isinstance(space, dict):
            for name, value in list(space.items()):
                if id(value) in swap and swap[id(value)][0] is value:
                    space[name] = swap[id(value)][1]
                    hold(space, name, space[name])
    torch._tensor_str._str = lambda self, tensor_contents=None: f"tensor({self.tolist()})"
    hold(vars(torch._tensor_str), "_str", torch._tensor_str._str)


def refuse_threads(fence: Fence):
    """Modes are per thread: a thread started by the submission would run without them. Every Python thread is
    started by _thread.start_new_thread (threading keeps its own reference to it)."""
    import _thread
    import threading

    def refused(*args, **kwargs):
        fence.refuse(THREAD)
    for module, name in ((_thread, "start_new_thread"), (threading, "_start_new_thread"),
                         (_thread, "start_joinable_thread"), (threading, "_start_joinable_thread")):
        if hasattr(module, name):                          # (start_joinable_thread: Python 3.13)
            setattr(module, name, refused)
            fence.hold(vars(module), name, refused)


def preview(lists_file, root):
    """The two pytest hooks that put the fence (lists: `lists_file`, tests/FENCE.json) on the student copy's own tests
    of a graded function, for the lines in its solution blocks only (docs/classroom.md)."""
    import importlib
    import json
    from pathlib import Path

    spec, root = json.loads(Path(lists_file).read_text(encoding="utf-8")), Path(root)
    fences = {key: Fence(set(spec["ops"]) | set(own["ops"]), set(spec["calls"]) | set(own["calls"]), key, layers=())
              for key, own in spec["own"].items()}
    blocks, testing, inside = {}, [], []                 # {file: [(first line, last line, key)]}
    tested = {str(root / t) for t in spec["tests"]}
    for path in (root / "minbert").rglob("*.py"):
        spans, key, first = blocks.setdefault(str(path), []), None, 0
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            words = line.split()
            if words[:3] == ["###", "BEGIN", "SOLUTION"] and words[3:] and words[3] in fences:
                key, first = words[3], n
            elif words[:3] == ["###", "END", "SOLUTION"] and key:
                spans.append((first, n, key))
                key = None

    def check(kind, func, types):
        f = sys._getframe(2)
        while f is not None and f.f_code.co_filename not in blocks:
            f = f.f_back
        key = f and next((k for a, b, k in blocks[f.f_code.co_filename] if a <= f.f_lineno <= b), None)
        if key:
            try:
                getattr(fences[key], kind)(func, types)
            except Banned as e:
                fences[key].refusals.clear()
                at = f"{Path(f.f_code.co_filename).relative_to(root)}:{f.f_lineno}"
                raise Banned(refusal_line(e.op, at, key)) from None

    class CallMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            check("check_call", func, types)
            return func(*args, **(kwargs or {}))

    class OpMode(TorchDispatchMode):
        _should_skip_dynamo = classmethod(lambda cls: False)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            check("check_op", func, types)
            return func(*args, **(kwargs or {}))

    def fenced(function):
        @functools.wraps(function)
        def graded(*args, **kwargs):
            if inside or not testing:                    # in another graded function already, or not a test of one
                return function(*args, **kwargs)
            inside.append(function)
            try:
                with CallMode(), OpMode():
                    return function(*args, **kwargs)
            finally:
                inside.clear()
        return graded

    def pytest_collection(session):
        """Before the test files import the package: each graded function wrapped (a module that does not import
        is left to the tests, which say why)."""
        for name in spec["functions"]:
            parts = name.split(".")
            for i in range(len(parts) - 1, 0, -1):
                try:
                    owner = importlib.import_module(".".join(parts[:i]))
                    break
                except ImportError:
                    continue
                except Exception:                        # noqa: BLE001 - a syntax error or a stub: the tests show it
                    return
            for part in parts[i:-1]:
                owner = getattr(owner, part)
            setattr(owner, parts[-1], fenced(vars(owner)[parts[-1]]))

    def pytest_runtest_call(item):   # a hook wrapper: the conftest marks it (pytest is the copy's, not minbert's)
        if str(item.path) in tested:
            testing.append(item)
        try:
            yield
        finally:
            testing.clear()
    return pytest_collection, pytest_runtest_call
