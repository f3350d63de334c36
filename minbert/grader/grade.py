"""Grade a submission: one child process per assignment, the verdict in this (parent) process.

Protocol, per assignment:
  1. the submission's graded blocks are laid over the template (submission.py); a changed line
     outside the blocks or a banned call scores the assignment 0 before anything runs;
  2. the parent draws the cases with a seed taken from the submission's blocks (cases.py) and
     computes the reference outputs itself, with the instructor's package (scenarios.py);
  3. the inputs go to a file; a child (`python -I child.py`) imports the submission, runs the
     same glue and saves its outputs; it is killed, with its process group, at the time limit;
  4. the parent loads the outputs with torch.load(weights_only=True) and compares each case:
     points per case; a miss that equals a known mistake (hints.py) gets that hint.
The parent imports nothing from the submission, and the references never touch the disk.
"""

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from .. import classroom as C
from . import cases as CASES
from . import hints as HINTS
from . import scenarios, submission

HERE = Path(__file__).resolve().parent
ATOL, RTOL = 1e-5, 1e-4


def seed_of(template_dir: Path, salt: int = 0) -> int:
    """Per submission: a hash of its graded files as laid over the template (regrading gives the same cases)."""
    h = hashlib.sha256(str(salt).encode())
    for f in sorted((template_dir / "minbert").glob("*.py")):
        h.update(f.read_bytes())
    return int.from_bytes(h.digest()[:6], "big")


def compare(got, want: dict) -> str:
    """'' when every output matches, else what differs first."""
    if isinstance(got, str):
        return got
    if not isinstance(got, dict):
        return f"the outputs are a {type(got).__name__}, not a dict"
    for name, w in want.items():
        g = got.get(name)
        if not isinstance(g, torch.Tensor):
            return f"output {name!r} is missing"
        if g.shape != w.shape:
            return f"{name}: expected shape {tuple(w.shape)}, got {tuple(g.shape)}"
        if not w.is_floating_point():
            if not torch.equal(g.to(w.dtype), w):
                return f"{name}: expected {w.tolist()}, got {g.tolist()}"
            continue
        g = g.double()
        if not torch.isfinite(g).all() and torch.isfinite(w).all():
            return f"{name}: holds NaN or inf"
        if not torch.allclose(g, w, atol=ATOL, rtol=RTOL):
            diff = (g - w).abs()
            i = tuple(int(x) for x in torch.unravel_index(diff.argmax(), diff.shape)) if diff.dim() else ()
            return (f"{name}: max abs difference {diff.max().item():.3g} at index {i} (expected "
                    f"{w[i].item():.6g}, got {g[i].item():.6g}; tolerance {ATOL:g} + {RTOL:g}·|expected|)")
    return ""


def run_child(template_dir: Path, key: str, cases: list, job: Path, timeout: float) -> tuple[list | None, str]:
    """(per-case outputs or error strings, '' or why the child gave nothing)."""
    job.mkdir(parents=True)
    shutil.copyfile(HERE / "scenarios.py", job / "_minbert_grader_scenarios.py")
    shutil.copyfile(HERE / "child.py", job / "child.py")
    torch.save(cases, job / "inputs.pt")
    out = job / "outputs.pt"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(job), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen([sys.executable, "-I", str(job / "child.py"), str(template_dir), key,
                             str(job / "inputs.pt"), str(out), str(job), str(int(timeout) + 5)], cwd=job, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, (f"timed out after {timeout:g} s (an infinite loop, or far too slow?); "
                      f"this assignment scores 0, the others are graded as usual")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)        # whatever it left running
        except ProcessLookupError:
            pass
    if not out.exists():
        tail = log.decode(errors="replace").strip().splitlines()[-1:] if log else []
        return None, (f"the code exited (status {proc.returncode}) before the grader could save its outputs"
                      + (f": {tail[0][:300]}" if tail else ""))
    try:
        results = torch.load(out, weights_only=True)
    except Exception as e:     # noqa: BLE001 - anything the child wrote that is not plain tensors
        return None, f"the outputs file could not be read safely ({type(e).__name__}); was it overwritten?"
    if not isinstance(results, list) or len(results) != len(cases):
        return None, "the outputs file does not hold one result per case; was it overwritten?"
    return results, ""


def grade_assignment(a, template_dir: Path, work: Path, seed: int, problems: list, timeout: float) -> list[dict]:
    number = C.ASSIGNMENTS.index(a) + 1
    cases = CASES.draw(a.key, seed)
    share = [round(a.points / len(cases), 4)] * len(cases)
    share[-1] = round(a.points - sum(share[:-1]), 4)
    start = time.perf_counter()
    if problems:
        outcome, why = None, " | ".join(problems)
    else:
        outcome, why = run_child(template_dir, a.key, cases, work / a.key, timeout)
    entries = []
    for i, case in enumerate(cases):
        visible = i < CASES.VISIBLE
        message = why
        if outcome is not None:
            want = scenarios.run(a.key, case)      # the reference, here in the parent, never on disk
            message = compare(outcome[i], want)
            if message and not isinstance(outcome[i], str):
                hint = HINTS.recognise(a.key, case, outcome[i])
                message += f" (hint: {hint})" if hint else ""
        name = f"{number}. {a.key}: {'' if visible else 'hidden '}case {i + 1} ({CASES.describe(case)})"
        entries.append({"name": name,
                        "assignment": a.key, "score": 0.0 if message else share[i], "max_score": share[i],
                        "output": message or "passed", "visibility": "visible" if visible else "after_due_date"})
    elapsed = time.perf_counter() - start
    for e in entries:
        e["execution_time"] = round(elapsed / len(entries), 3)
    return entries


def grade(sub: Path, selected=None, timeout: float = 60.0, workers: int = 2, salt: int = 0, handout=None) -> list[dict]:
    """Gradescope test entries, in course order, for the submission at `sub` (folder, file or .zip):
    `selected` the assignments to grade (default all), `handout` the ones removed from the hand-out
    (default all; `student --assignments X` hands out X only)."""
    chosen = [a for a in C.ASSIGNMENTS if selected is None or a.key in selected]
    keys = [a.key for a in chosen]
    handout = sorted(set(C.BY_KEY if handout is None else handout) | set(keys))
    with tempfile.TemporaryDirectory(prefix="minbert-grade-") as tmp:
        tmp = Path(tmp)
        template = tmp / "template"
        submission.write_template(template, handout)
        sub = Path(sub)
        if sub.is_file() and sub.suffix == ".zip":              # a zip as Gradescope's download gives it
            with zipfile.ZipFile(sub) as z:
                z.extractall(tmp / "submission")
            sub = tmp / "submission"
        problems = submission.lay_over(sub, template, keys, handout)
        seed = seed_of(template, salt)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            futures = [pool.submit(grade_assignment, a, template, tmp / "jobs", seed, problems[a.key], timeout)
                       for a in chosen]
            return [e for f in futures for e in f.result()]
