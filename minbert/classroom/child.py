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


# What an assignment replaces, refused before any of the submission's code is imported: kernels in torch's
# dispatcher (whatever Python name reaches them: F.scaled_dot_product_attention, torch._C._nn..., torch.ops.aten...),
# torch's own Python implementations, and scikit-learn/scipy (no given code imports them). The student's process
# could still undo this by reflection; the parent's AST check and this block are the fence, academic-integrity
# review is the rest (the threat model, docs/classroom.md).
BLOCKED_OPS = {"attention": ("scaled_dot_product", "multi_head_attention"),
               "layer": ("transformer_encoder_layer", "multi_head_attention"),
               "adamw": ("fused_adam",)}
BLOCKED_PYTHON = {"attention": [("torch.nn.functional", "multi_head_attention_forward"),
                                ("torch.nn.modules.activation.MultiheadAttention", "forward"),
                                ("torch.nn.attention.flex_attention", "flex_attention"),
                               ("torch._higher_order_ops.flex_attention", "math_attention")],
                  "layer": [("torch.nn.modules.transformer.TransformerEncoderLayer", "forward")],
                  "adamw": [("torch.optim.adamw", "adamw"), ("torch.optim.adam", "adam"),
                            ("torch.optim.adamw", "_single_tensor_adamw"), ("torch.optim.adamw", "_multi_tensor_adamw"),
                            ("torch.optim.adam", "_single_tensor_adam"), ("torch.optim.adam", "_multi_tensor_adam"),
                            ("torch.optim.adam.Adam", "step"), ("torch.optim.adamw.AdamW", "step")]}
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


def aten_ops(key: str) -> list[str]:
    """The aten kernels refused in `key`'s child."""
    import torch
    words = BLOCKED_OPS.get(key, ())
    return sorted({n.split("::")[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()
                   if n.startswith("aten::") and any(w in n for w in words)})


def python_refusals(key: str) -> list[tuple[object, str, str]]:
    """(owner, attribute, the name its refusal carries) for every Python-level implementation `key` replaces:
    BLOCKED_PYTHON, every multi-head attention module (torch.ao's quantizable one too) for attention, and for
    AdamW every optimizer torch ships and its functional forms."""
    import importlib

    import torch
    found = []
    for where, name in BLOCKED_PYTHON.get(key, []):
        try:
            owner = importlib.import_module(where)
        except ImportError:
            module, _, cls = where.rpartition(".")
            owner = getattr(importlib.import_module(module), cls)
        found.append((owner, name, name))
    if key == "attention":
        importlib.import_module("torch.ao.nn.quantizable")
        found += [(cls, "forward", "MultiheadAttention.forward") for cls in _subclasses(torch.nn.MultiheadAttention)]
    if key == "adamw":
        found += [(cls, "step", f"{cls.__name__}.step")
                  for cls in _subclasses(torch.optim.Optimizer) - {torch.optim.Optimizer}]
        functional = importlib.import_module("torch.optim._functional")
        found += [(functional, n, f"torch.optim._functional.{n}") for n in dir(functional)
                  if callable(getattr(functional, n)) and not n.startswith("__") and n != "Tensor"]
    return found


def blocked_ops(key: str) -> list[str]:
    """Every name a refusal in `key`'s child can carry (the parent accepts only these back)."""
    return aten_ops(key) + [name for _, _, name in python_refusals(key)] + list(BLOCKED_MODULES)


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


def ban(key: str):
    """Refuse what an assignment replaces, before any of the submission's code is imported."""
    import warnings

    import torch

    def refuse(op):
        def call(*args, **kwargs):
            raise Banned(op)
        return call
    sys.meta_path.insert(0, _RefuseModules())
    for owner, attribute, name in python_refusals(key):
        setattr(owner, attribute, refuse(name))
    ops = aten_ops(key)
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
    ban(key)
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
