"""The grader's child process: run one assignment's cases against the submission, return the outputs.

    python -I child.py TEMPLATE KEY INPUTS GLUE_DIR        (inside the box of sandbox.py)

TEMPLATE holds the submission laid over the clean template (a `minbert/` package and nothing
else). This process imports the student's code; whatever it does here (patch torch or this file,
exit early, loop forever, fork) can only change the bytes it writes to fd 3, which the parent reads
with a byte cap, parses itself (wire.py: no unpickling) and compares with references it computed
itself, before this process started, on inputs it drew for this submission. An exception becomes
{"error": its type's name, "where": "minbert/x.py:N"}: the parent shows a builtin type and a line
of the student's file, never the message (text the submission controls).
"""

import json
import os
import sys
import traceback


def where(exc: BaseException, template: str) -> str:
    """'minbert/x.py:N' of the innermost frame in the submission's package, or ''."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename.removeprefix(template + '/')}:{exc.lineno}"
    found = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith(template):
            found = f"{frame.filename.removeprefix(template + '/')}:{frame.lineno}"
    return found


def record(exc: BaseException, template: str) -> dict:
    found = {"error": type(exc).__name__, "where": where(exc, template)}
    if isinstance(exc, (Banned, BannedImport)):
        found["banned"] = exc.op
    return found


# What an assignment replaces, refused before any of the submission's code is imported (its record's `fence` in
# assignments.py, handed to this process as fence.json): kernels in torch's dispatcher (whatever Python name reaches
# them: F.scaled_dot_product_attention, torch._C._nn..., torch.ops.aten...), torch's own Python implementations,
# and scikit-learn/scipy/transformers (no given code imports them; the box's tree does not even hold them). The
# student's process could still undo this by reflection: the integrity report flags that for the instructor.
BLOCKED_MODULES = ("sklearn", "scipy", "transformers")


class Banned(RuntimeError):
    def __init__(self, op):
        super().__init__(op)
        self.op = op


class BannedImport(ModuleNotFoundError):
    """A ModuleNotFoundError, so that library code guarding an optional import (`try: import scipy`) carries on."""

    def __init__(self, op):
        super().__init__(f"{op} is not available to this assignment", name=op)
        self.op = op


def aten_ops(fence: dict) -> list[str]:
    """The aten kernels refused: every aten op whose name holds one of the fence's words."""
    import torch
    words = fence.get("ops", ())
    return sorted({n.split("::")[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()
                   if n.startswith("aten::") and any(w in n for w in words)})


def _owner(where: str):
    import importlib
    try:
        return importlib.import_module(where)
    except ImportError:
        module, _, cls = where.rpartition(".")
        return getattr(importlib.import_module(module), cls)


def python_refusals(fence: dict) -> list[tuple[object, str, str]]:
    """(owner, attribute, the name its refusal carries) for every Python-level implementation the fence names:
    each (owner, attribute); a method of every subclass of a class (every optimizer torch ships, every multi-head
    attention module); every callable of a module (torch.optim._functional)."""
    found = [(_owner(where), name, name) for where, name in fence.get("python", [])]
    for where, method in fence.get("subclasses", []):
        root = _owner(where)
        found += [(cls, method, f"{cls.__name__}.{method}") for cls in _subclasses(root) - {root}]
    for where in fence.get("modules", []):
        module = _owner(where)
        found += [(module, n, f"{where}.{n}") for n in dir(module)
                  if callable(getattr(module, n)) and not n.startswith("__") and n != "Tensor"]
    return found


def blocked_ops(fence: dict) -> list[str]:
    """Every name a refusal in the child can carry (the parent accepts only these back)."""
    return aten_ops(fence) + [name for _, _, name in python_refusals(fence)] + list(BLOCKED_MODULES)


class _RefuseModules:
    """A meta-path finder: scikit-learn and scipy are found (torch asks whether they exist) but refuse to load;
    the meanshift assignment is numpy only, and no given code imports them."""

    def find_spec(self, name, path=None, target=None):
        import importlib.util
        if name.split(".")[0] in BLOCKED_MODULES:
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise BannedImport(module.__name__.split(".")[0])


def _subclasses(cls) -> set:
    found, todo = {cls}, [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def ban(fence: dict):
    """Refuse what an assignment replaces, before any of the submission's code is imported."""
    import warnings

    import torch

    def refuse(op):
        def call(*args, **kwargs):
            raise Banned(op)
        return call
    sys.meta_path.insert(0, _RefuseModules())
    for owner, attribute, name in python_refusals(fence):
        setattr(owner, attribute, refuse(name))
    ops = aten_ops(fence)
    if not ops:
        return
    lib = torch.library.Library("aten", "IMPL")
    ban.libraries = [*getattr(ban, "libraries", []), lib]   # kept alive: the registrations last as long as it does
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")             # "overriding a previously registered kernel": that is the point
        for op in ops:
            for dispatch_key in ("CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd"):
                try:
                    lib.impl(op, refuse(op), dispatch_key)
                except RuntimeError:
                    pass                             # no such kernel for this op: nothing to block there


def main():
    template, key, inputs, scenarios_dir = sys.argv[1:5]
    out = os.fdopen(3, "wb")                    # the results pipe (the parent caps what it reads)
    sys.path.insert(0, template)
    import torch
    torch.set_num_threads(1)
    cases = torch.load(inputs, weights_only=True)
    # The glue (the grader's scenarios.py, copied next to this file), loaded before any student code.
    glue, wire = (_load(f"_minbert_grader_{name}", f"{scenarios_dir}/_minbert_grader_{name}.py")
                  for name in ("scenarios", "wire"))
    run = glue.run
    with open(f"{scenarios_dir}/fence.json") as f:
        ban(json.load(f))
    results = []
    for case in cases:
        try:
            results.append(run(key, case))
        except BaseException as exc:            # SystemExit and KeyboardInterrupt too: one case lost
            results.append(record(exc, template))
    out.write(wire.encode(results))
    out.close()


def _load(name: str, path: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main()
