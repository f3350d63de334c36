"""The grader's child process: run one assignment's cases against the submission, write the outputs.

    python -I child.py TEMPLATE KEY INPUTS OUTPUTS GLUE_DIR CPU_SECONDS

TEMPLATE holds the submission laid over the clean template (a `minbert/` package and nothing
else). This process imports the student's code; whatever it does here (patch torch, pytest or
this file, exit early, loop forever) can only change the OUTPUTS file, which the parent reads
with torch.load(weights_only=True) and compares with references it computed itself on inputs it
drew for this submission. The parent kills this process at the assignment's time limit.
"""

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


def quote(exc: BaseException, template: str) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    line = text[-1] if text else type(exc).__name__
    if isinstance(exc, SyntaxError) and len(text) >= 2:
        line = f"{line} | {text[-3].strip() if len(text) >= 3 else ''}"
    at = where(exc, template)
    return (f"{at}: " if at else "") + line[:400]


def ban(key: str):
    """Defence in depth next to the parent's syntax check: the library calls an assignment replaces."""
    import torch
    import torch.nn.functional as F

    def banned(name):
        def call(*args, **kwargs):
            raise RuntimeError(f"{name} is not allowed in assignment {key}: write it yourself")
        return call
    if key == "attention":
        F.scaled_dot_product_attention = banned("F.scaled_dot_product_attention")
    if key == "adamw":
        import importlib
        torch.optim.AdamW = torch.optim.Adam = banned("torch.optim.AdamW")
        for name in ("torch.optim.adamw", "torch.optim.adam"):
            module = importlib.import_module(name)
            setattr(module, name.rsplit(".", 1)[1], banned(name + "." + name.rsplit(".", 1)[1]))


def main():
    template, key, inputs, outputs, scenarios_dir, cpu_seconds = sys.argv[1:7]
    # A CPU-time limit of its own (soft = hard, so it cannot be raised): should the parent die, a loop
    # here still ends. The parent's wall-clock limit is the one that normally applies.
    import resource
    resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_seconds), int(cpu_seconds)))
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
            results.append(quote(exc, template))
    torch.save(results, outputs)


if __name__ == "__main__":
    main()
