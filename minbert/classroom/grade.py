"""Grade a submission: one sandboxed child per assignment, every verdict in this (parent) process.

Intake and the gate (submission.py), cases seeded by the submission and a secret salt (cases.py), every reference
computed here before any child starts, one box per assignment (sandbox.py), its bytes parsed here (wire.py), points
and hints (hints.py) decided here. docs/classroom.md (The protocol) gives each step.
"""

import builtins
import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from minbert.classroom import (assignments as C, box_root, cases as CASES, cleanup, fence, hints as HINTS,
                               sandbox, scenarios, submission, wire)
from minbert.classroom.child import refused_by_name

HERE = Path(__file__).resolve().parent
ATOL, RTOL = 1e-5, 1e-4
SELF_CHECK = "self-check, not authoritative: the grader could not isolate the submission here"
_ISOLATION = None


def isolation(require: str | bool | None) -> tuple[str, str]:
    """(the level this grade runs at, why not a stronger one). `require`: the weakest level accepted (a name in
    sandbox.LEVELS; True means "user+chroot", False "self-check"); None: "user+chroot" when running as root, else
    "self-check" (root without a chroot is a self-check only when asked for: the submission would run as root)."""
    global _ISOLATION
    if require is None or require is True:
        require = "user+chroot" if require or (hasattr(os, "geteuid") and os.geteuid() == 0) else "self-check"
    require = "self-check" if require is False else require
    if require not in sandbox.LEVELS:
        raise C.UserError(f"--require_isolation: {require!r} is not a level; choose from {', '.join(sandbox.LEVELS)} "
                          "(weakest first)")
    if _ISOLATION is None:
        _ISOLATION = sandbox.isolation_available()
    level, why = _ISOLATION
    if sandbox.LEVELS.index(level) < sandbox.LEVELS.index(require):
        raise C.UserError(f"grade: isolation {require!r} is required but this machine gives {level!r} ({why}); "
                          "grade as root on Linux (Docker's default capabilities are enough for 'user+chroot'; "
                          "Podman and CRI-O need CAP_SYS_CHROOT added), "
                          "or pass --require_isolation self-check for a grade labelled a self-check")
    return level, why


def secrets_of(root: Path) -> list[Path]:
    """The instructor's files a box's user must not be able to open: the grader, its references, the solutions."""
    graded = [root / rel for rel in submission.graded_files(set(C.BY_KEY))]
    return [root / "minbert" / "classroom" / "references.py", root / "minbert" / "classroom" / "grade.py", *graded]


def seed_of(template_dir: Path, salt: int = 0) -> int:
    """Per submission: a hash of its graded files as laid over the template (regrading gives the same cases)."""
    h = hashlib.sha256(str(salt).encode())
    for f in sorted((template_dir / "minbert").rglob("*.py")):
        h.update(f.read_bytes())
    return int.from_bytes(h.digest()[:6], "big")


class Message(str):
    """A case's verdict, written by the parent (the child sends bytes only: nothing it sends is one)."""


def compare(got, want: dict) -> str:
    """'' when every output matches, else what differs first. `got` is a parent's Message or a dict of tensors
    the parent built itself from the child's bytes (wire.decode); only torch functions touch them."""
    if isinstance(got, Message):
        return got
    for name, w in want.items():
        g = got.get(name)
        if g is None:
            return f"output {name!r} is missing"
        if g.shape != w.shape:
            if g.dim() != w.dim():          # the submission's shape is its to choose: quote a bounded part of it
                return (f"{name}: expected shape {tuple(w.shape)} ({w.dim()} dimensions), "
                        f"got {min(g.dim(), 99)} dimensions")
            return f"{name}: expected shape {tuple(w.shape)}, got {tuple(min(int(n), 10**6) for n in g.shape)}"
        if not torch.is_floating_point(w):  # equal values, whatever the dtype: a float 2.7 is not the label 2
            if not torch.equal(g, w):
                i = tuple(int(x) for x in torch.unravel_index(torch.argmax((g != w).int()), w.shape)) if w.dim() else ()
                got = f"{float(g[i]):.6g}" if torch.is_floating_point(g) else int(g[i])
                return f"{name}: expected {w.tolist()}, first difference at index {i} (got {got})"
            continue
        g = torch.as_tensor(g, dtype=torch.float64)
        if not torch.all(torch.isfinite(g)) and torch.all(torch.isfinite(w)):
            return f"{name}: holds NaN or inf"
        if not torch.allclose(g, w, atol=ATOL, rtol=RTOL):
            diff = torch.abs(g - w)
            i = tuple(int(x) for x in torch.unravel_index(torch.argmax(diff), diff.shape)) if diff.dim() else ()
            return (f"{name}: max abs difference {float(torch.max(diff)):.3g} at index {i} (expected "
                    f"{float(w[i]):.6g}, got {float(g[i]):.6g}; tolerance {ATOL:g} + {RTOL:g}·|expected|)")
    return ""


def error_message(record: wire.Error, files: dict, key: str, gated: dict | None = None) -> Message:
    """A child's exception, as the student may see it: the builtin type and a line of their own file, or the gate's
    line when it is the stub of a block the gate refused (`gated`: {"minbert/x.py:N": line}). Everything in the
    record is the submission's to choose, so each field is checked against what the parent knows (a builtin name, a
    line that exists, an op the parent itself blocks, a stub it laid itself), never quoted."""
    kind, where, op = record.kind, record.where, record.banned
    if kind == "NotImplementedError" and where in (gated or {}):
        return Message(gated[where])
    m = re.fullmatch(r"(minbert/(?:\w+/)?\w+\.py):(\d{1,6})", where)
    at = f" at {where}" if m and m.group(1) in files and 1 <= int(m.group(2)) <= len(files[m.group(1)]) else ""
    if op and refusable(op, C.BY_KEY[key]):
        return Message(fence.refusal_line(op, at.removeprefix(" at "), key))
    if kind == "Banned":                        # a refusal whose name this process cannot check: not quoted
        return Message(f"called an operation{at} that assignment {key} does not allow (its list: ALLOWED.md)")
    if kind == "NotImplementedError" and at:
        line = files[m.group(1)][int(m.group(2)) - 1]
        stub = C.STUB_LINE.search(line)
        # a key of ours, not a word of theirs
        if stub and stub.group(1) in C.BY_KEY and line.lstrip().startswith("raise "):
            key = C.BY_KEY[stub.group(1)].key
            return Message(f"not written yet: the stub{at} still raises NotImplementedError (assignment {key})")
    builtin = isinstance(getattr(builtins, kind, None), type) and issubclass(getattr(builtins, kind), BaseException)
    text = f"raised {kind}" if builtin else "raised an exception of a class your code defines"
    return Message(text + at + " (run your tests locally for the message)")


_BY_NAME = {}


def refusable(op: str, a) -> bool:
    """Whether a refusal the child reports names something assignment `a`'s fence refuses: an operator or a torch
    callable off its lists, a library implementation it refuses by name, or one of the fence's own reasons. Only
    then is the name quoted: it is text the submission could have chosen."""
    if a.key not in _BY_NAME:
        _BY_NAME[a.key] = set(refused_by_name(a.fence)) | set(fence.FIXED)
    if op in _BY_NAME[a.key]:
        return True
    return op not in a.allowed_ops and op not in a.allowed_calls and fence.names_something(op)


def outputs_of(outcome: sandbox.Outcome, n: int, files: dict, key: str, gated=None) -> tuple[list | None, str]:
    """(per case: plain tensors or a parent's Message; '' or why the box gave nothing usable)."""
    if outcome.why:
        return None, outcome.why
    if not outcome.result:
        if outcome.status is not None and outcome.status < 0:
            return None, (f"the code was killed by signal {-outcome.status} before its outputs were saved (a limit: "
                          "memory, processes or file size?)")
        return None, (f"the code exited (status {outcome.status}) before its outputs were saved: an exit() or "
                      "os._exit in the code, or the interpreter crashed")
    try:
        results = wire.decode(outcome.result, n)
    except wire.WireError as e:
        return None, f"the outputs could not be read: {e}"
    return [error_message(r, files, key, gated) if isinstance(r, wire.Error) else
            Message("the outputs are not a dict of tensors") if r is wire.NOT_TENSORS else r for r in results], ""


def source_lines(path: Path) -> list[str]:
    """A file's lines as Python numbers them, at \\n, \\r\\n or \\r (read_text makes those \\n): str.splitlines would
    also break at a form feed or U+2028, and a line named by an exception would be looked for on the wrong line."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    return lines[:-1] if lines[-1] == "" else lines          # the text after the last \n, if any, is a line


def write_job(job: Path, key: str, cases: list) -> None:
    """The child's job folder: the glue it loads (scenarios, wire, the fence), the fence's lists, the inputs."""
    job.mkdir(parents=True)
    for src, name in ((HERE / "scenarios.py", "_minbert_grader_scenarios.py"),
                      (HERE / "wire.py", "_minbert_grader_wire.py"),
                      (HERE / "fence.py", "_minbert_grader_fence.py"), (HERE / "child.py", "child.py")):
        (job / name).write_bytes(src.read_bytes())
    a = C.BY_KEY[key]
    (job / "fence.json").write_text(json.dumps({"fence": a.fence, "ops": sorted(a.allowed_ops),
                                                "calls": sorted(a.allowed_calls)}))
    torch.save(cases, job / "inputs.pt")
    for path in (job, *job.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)        # readable by the box's user, writable by none


def run_child(template_dir: Path, key: str, cases: list, job: Path, timeout: float, level: str, secrets: list,
              gated=None, **box_options):
    """The child's per-case outputs (or messages), '' or why not, and the box's isolation layers."""
    write_job(job, key, cases)
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": "0"}
    box = sandbox.BOX
    argv = [sys.executable, "-I", f"{box}job/child.py", f"{box}template", key, f"{box}job/inputs.pt", f"{box}job"]
    outcome = sandbox.run(argv, env, {"template": str(template_dir), "job": str(job)},
                          sandbox.Limits(wall_s=timeout), level, secrets=secrets, **box_options)
    files = {str(p.relative_to(template_dir)): source_lines(p) for p in (template_dir / "minbert").rglob("*.py")}
    results, why = outputs_of(outcome, len(cases), files, key, gated)
    return results, why, outcome.layers


def grade_assignment(a, cases, wants, template_dir, work, problems, timeout, level, secrets, gated=None,
                     **box_options) -> list[dict]:
    """Every case's entry for assignment `a`; `gated`: the gate's refusals ({stub: line}); `box_options`:
    sandbox.run's stop event and hard-link tree."""
    number = C.ASSIGNMENTS.index(a) + 1
    share = [round(a.points / len(cases), 4)] * len(cases)
    share[-1] = round(a.points - sum(share[:-1]), 4)
    start = time.perf_counter()
    if problems:
        outcome, why, layers = None, " | ".join(problems), []
    else:
        outcome, why, layers = run_child(template_dir, a.key, cases, work / a.key, timeout, level, secrets,
                                         gated=gated, **box_options)
    entries, firsts = [], {}
    for i, case in enumerate(cases):
        firsts.setdefault(case.get("op"), i)   # each function's first case is public too
    for i, (case, want) in enumerate(zip(cases, wants)):
        visible = i < CASES.VISIBLE or i in firsts.values()
        message = why
        if outcome is not None:
            try:
                message = compare(outcome[i], want)
                if message and not isinstance(outcome[i], Message):
                    hint = HINTS.recognise(a.key, case, outcome[i])
                    message += f" (hint: {hint})" if hint else ""
            except Exception as e:     # noqa: BLE001 - odd tensors must cost the case, never the grader
                message = f"the outputs could not be compared ({type(e).__name__})"
        name = f"{number}. {a.key}: {'' if visible else 'hidden '}case {i + 1} ({CASES.describe(case)})"
        output = message or "passed"
        entries.append({"name": name,
                        "assignment": a.key, "score": 0.0 if message else share[i], "max_score": share[i],
                        "output": output if level != "self-check" else f"{output} [{SELF_CHECK}]",
                        "visibility": "visible" if visible else "after_due_date", "isolation": layers})
    elapsed = time.perf_counter() - start
    for e in entries:
        e["execution_time"] = round(elapsed / len(entries), 3)
    return entries


class Grade(list):
    """Gradescope's test entries, in course order, and what only the instructor sees: `salt` (the secret mixed
    into the seed: a regrade with it draws the same cases) and `refused` ({assignment: the gate's refusals})."""

    def __init__(self, entries, salt: int, refused: dict):
        super().__init__(entries)
        self.salt, self.refused = salt, refused


def grade(sub: Path, selected=None, timeout: float = 60.0, workers: int = 2, salt: int | None = None, handout=None,
          require_isolation: str | bool | None = None) -> Grade:
    """Grade the submission at `sub` (folder, file or .zip), as `classroom grade` does (its --help says each
    option). Everything the grade makes lives in one temporary folder, removed however the grade ends: SIGTERM,
    SIGHUP and Ctrl-C raise cleanup.Stopped here, the boxes still running are killed, then the folder goes."""
    salt = secrets.randbits(48) if salt is None else salt
    with cleanup.signals_as_interrupts() as guard:
        level, _ = isolation(require_isolation)
        tmp = cleanup.folder("grade")              # after removing what a grade killed with SIGKILL left
        try:
            return _grade(Path(sub), selected, handout, timeout, workers, salt, level, tmp, guard)
        finally:
            with guard.shielded():
                cleanup.remove_tree(tmp)


def _grade(sub: Path, selected, handout, timeout, workers, salt, level, tmp: Path, guard) -> Grade:
    chosen = [a for a in C.ASSIGNMENTS if selected is None or a.key in selected]
    keys = [a.key for a in chosen]
    handout = sorted(set(C.BY_KEY if handout is None else handout) | set(keys))
    template = tmp / "template"
    submission.write_template(template, handout)
    problems, gated = {k: [] for k in keys}, {k: {} for k in keys}
    if sub.is_file() and sub.suffix == ".zip" and not sub.is_symlink():   # as Gradescope's download gives it
        try:
            submission.extract_zip(sub, tmp / "submission")
            sub = tmp / "submission"
        except submission.Refused as e:
            problems = {k: [f"refused: {e}"] for k in keys}
    if not any(problems.values()):
        problems, gated = submission.lay_over(sub, template, keys, handout)
        for k, found in submission.syntax_errors(template, keys).items():
            problems[k] = found or problems[k]
    seed = seed_of(template, salt)
    drawn = {a.key: CASES.draw(a.key, seed) for a in chosen}
    wants = {k: [scenarios.run(k, case) for case in cs] for k, cs in drawn.items()}   # before any child
    instructors = secrets_of(C.ROOT)                     # what each box's user must fail to open
    stop, tasks = threading.Event(), cleanup.Tasks()     # stop set: every box still running is killed within 0.5 s
    options = {"stop": stop, "chroot_root": box_root.link_tree(tmp / "root") if level == "user+chroot" else None}
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        futures = [pool.submit(tasks.run, grade_assignment, a, drawn[a.key], wants[a.key], template, tmp / "jobs",
                               problems[a.key], timeout, level, instructors, gated=gated[a.key], **options)
                   for a in chosen]
        return Grade([e for f in futures for e in f.result()], salt, {k: sorted(v.values()) for k, v in gated.items()})
    finally:
        with guard.shielded():
            stop.set()
            tasks.stop()
            pool.shutdown(wait=True, cancel_futures=True)
