"""The grader's child process: run one assignment's cases against the submission, return the outputs.

    python -I child.py TEMPLATE KEY INPUTS GLUE_DIR        (inside the box of sandbox.py)

Whatever the student's code does here can only change the bytes written to fd 3, which the parent caps and parses
(wire.py). An exception becomes its type's name and "minbert/x.py:N", never its message.
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


def record_of(exc: BaseException, template: str) -> dict:
    found = {"error": type(exc).__name__, "where": where(exc, template)}
    if isinstance(exc, BannedImport):
        found["banned"] = exc.op
    return found


# Beside the fence, refused by name (`ban`): torch's own Python implementations of an assignment, which compute with
# the operators its list allows (its record's `fence`), and these libraries (no given code imports them).
BLOCKED_MODULES = ("sklearn", "scipy", "transformers")


class BannedImport(ModuleNotFoundError):
    """A ModuleNotFoundError, so that library code guarding an optional import (`try: import scipy`) carries on."""

    def __init__(self, op):
        super().__init__(f"{op} is not available to this assignment", name=op)
        self.op = op


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


def refused_by_name(fence: dict) -> list[str]:
    """The names a refusal by name can carry (the parent accepts these back, with what fence.py refuses)."""
    return [name for _, _, name in python_refusals(fence)] + list(BLOCKED_MODULES)


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
    return {cls}.union(*map(_subclasses, cls.__subclasses__()))


def ban(spec: dict, fence):
    """Refuse by name what an assignment replaces, before any of the submission's code is imported; `fence.refuse`
    records the refusal and raises it, `fence.hold` has every check compare each replacement."""
    def refusal(name):
        def call(*args, **kwargs):
            fence.refuse(name)
        call.hooked = True              # torch's Optimizer wraps a class's `step` unless so marked: it stays as held
        return call
    sys.meta_path.insert(0, _RefuseModules())
    refused = python_refusals(spec)
    for owner, attribute, name in refused:
        setattr(owner, attribute, refusal(name))
    for owner, attribute, _ in refused:                 # (one attribute may be named twice: the last one stays)
        fence.hold(vars(owner), attribute, vars(owner)[attribute])


def main():
    template, key, inputs, scenarios_dir = sys.argv[1:5]
    record = sys.argv[5:] == ["--record"]      # deriving the allow-lists (assignments.py): note, refuse nothing
    out = os.fdopen(3, "wb")                    # the results pipe (the parent caps what it reads)
    sys.path.insert(0, template)
    import torch
    torch.set_num_threads(1)
    cases = torch.load(inputs, weights_only=True)
    # The glue (the grader's scenarios.py, wire.py, fence.py, copied next to this file), loaded before any student code.
    glue, wire, fences = (_load(f"_minbert_grader_{name}", f"{scenarios_dir}/_minbert_grader_{name}.py")
                          for name in ("scenarios", "wire", "fence"))
    run = glue.run
    with open(f"{scenarios_dir}/fence.json") as f:
        spec = json.load(f)
    fence = fences.Fence(None if record else set(spec["ops"]), None if record else set(spec["calls"]), key)
    ban(spec["fence"], fence)
    fences.refuse_threads(fence)
    fence.install()                             # from here on every operator and torch call is checked
    results = []
    for case in cases:
        try:
            result = run(key, case)
        except BaseException as exc:            # SystemExit and KeyboardInterrupt too: one case lost
            result = record_of(exc, template)
        refused, at = fence.case_done(template)  # a refusal fails the case even when the code caught it
        if refused:
            result = {"error": "Banned", "where": at, "banned": refused}
        results.append(result)
    frame = wire.encode(results)
    if record:
        frame = json.dumps({"ops": sorted(fence.seen_ops), "calls": sorted(fence.seen_calls),
                            "errors": [r for r in results if "error" in r]}).encode()
    out.write(frame)
    out.close()


def _load(name: str, path: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    main()
