"""The grader's child process: run one assignment's cases against the submission, return the outputs.

    python -I child.py TEMPLATE KEY INPUTS GLUE_DIR        (inside the box of sandbox.py)

TEMPLATE holds the submission laid over the clean template (a `minbert/` package and nothing
else). This process imports the student's code; whatever it does here (patch torch or this file,
exit early, loop forever, fork) can only change what it writes to fd 3, which the parent reads
with a byte cap and torch.load(weights_only=True) and compares with references it computed itself,
before this process started, on inputs it drew for this submission. An exception becomes
{"error": its type's name, "where": "minbert/x.py:N"}: the parent shows a builtin type and a line
of the student's file, never the message (text the submission controls).
"""

import io
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
    if isinstance(exc, Banned):
        found["banned"] = exc.op
    return found


# The kernels an assignment replaces, blocked in torch's dispatcher: whatever Python name reaches them
# (F.scaled_dot_product_attention, torch._C._nn..., torch.ops.aten...), the call raises. The student's
# process could still undo this by reflection; the parent's AST check and this block are the fence,
# academic-integrity review is the rest (the threat model, docs/classroom.md).
BLOCKED_OPS = {"attention": ("scaled_dot_product", "multi_head_attention"),
               "layer": ("transformer_encoder_layer", "multi_head_attention"),
               "adamw": ("fused_adam",)}


class Banned(RuntimeError):
    def __init__(self, op):
        super().__init__(op)
        self.op = op


def ban(key: str):
    """Block the library kernels an assignment replaces, before any of the submission's code is imported."""
    import warnings

    import torch
    ban.libraries = getattr(ban, "libraries", [])
    words = BLOCKED_OPS.get(key, ())
    ops = sorted({n.split("::")[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()
                  if n.startswith("aten::") and any(w in n for w in words)})
    if not ops:
        return
    lib = torch.library.Library("aten", "IMPL")
    ban.libraries.append(lib)

    def refuse(op):
        def call(*args, **kwargs):
            raise Banned(op)
        return call
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
    import importlib.util

    import torch
    torch.set_num_threads(1)
    cases = torch.load(inputs, weights_only=True)
    # The glue (the grader's scenarios.py, copied next to this file), loaded before any student code.
    spec = importlib.util.spec_from_file_location("_minbert_grader_scenarios",
                                                  f"{scenarios_dir}/_minbert_grader_scenarios.py")
    glue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(glue)
    run = glue.run
    ban(key)
    results = []
    for case in cases:
        try:
            results.append(run(key, case))
        except BaseException as exc:            # SystemExit and KeyboardInterrupt too: one case lost
            results.append(record(exc, template))
    buffer = io.BytesIO()
    torch.save(results, buffer)
    out.write(buffer.getvalue())
    out.close()


if __name__ == "__main__":
    main()
