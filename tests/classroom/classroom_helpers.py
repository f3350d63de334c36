"""Plumbing for the grader's tests (instructor-only: tests/classroom/ never ships to students). Not a
conftest.py: tests/conftest.py is imported by name (`from conftest import ...`), and a second module of that
name would shadow it. Test files import what they use, the `student` fixture included.

  student                     fixture: a fresh student copy (all assignments stripped)
  without_gate                fixture: the gate reads nothing, so a hostile block reaches the box (the box alone)
  GRADE_WITHOUT_GATE          the `grade` command, run with the gate reading nothing (the box alone, as a command)
  submission(student, tmp, restore)  a copy of it, with the instructor's files in `restore` put back
  with_block(sub, file, key, body)   a submission whose `key` block in minbert/`file` holds `body`
  solution(file, key)         the instructor's lines of a block, unindented (a correct answer to reuse)
  scores(entries)             {assignment: points}
  fingerprint(root)           sha256 of every file under the instructor's minbert/ and tests/
  Boxes(monkeypatch)          records the boxes a grading starts; .left(): their processes still alive
  needs_isolation             skip marker: the sandbox needs root (another user); LEVEL: the level this machine gives
  needs_namespaces            skip marker: the defence needs the namespaces level (the network, PID 1)
  grade(...)                  the grader, isolated where possible, else a self-check
  honest_corpus()             the honest variants of tests/classroom/honest/ (Variant: name, key, file, nth, body,
                              top, classes)
  lay(path, variant)          a graded file with the variant in its block and its `top` lines among the file's imports
  rounds(variants)            variants grouped so that a round holds at most one of each assignment (one grade each)
  walls_off(variants, tmp)    {name: '' or the first case it fails}, graded with the gate, the fence and the intake
                              off: the variant's outputs against the reference's, in a plain process
"""

import hashlib
import os
import signal
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

from minbert.classroom import assignments as classroom, autograder, sandbox
from minbert.classroom.assignments import package_file

ROOT = Path(__file__).resolve().parents[2]
ALL = [a.key for a in classroom.ASSIGNMENTS]
LEVEL, WHY_NOT = sandbox.isolation_available()
ISOLATION = LEVEL != "self-check"
needs_isolation = pytest.mark.skipif(not ISOLATION, reason=f"the sandbox cannot be built here: {WHY_NOT}")
needs_namespaces = pytest.mark.skipif(LEVEL != "namespaces", reason=f"needs the namespaces level, here {LEVEL!r}: "
                                                                     f"{WHY_NOT}")


def grade(*args, **kwargs):
    """The grader as the tests of its behaviour use it: isolated where this machine can, else as a self-check
    (as root without namespaces the grader would refuse; the attack tests, which need the box, skip there)."""
    from minbert.classroom.grade import grade as grade_
    return grade_(*args, **({} if ISOLATION else {"require_isolation": False}), **kwargs)


def run(*args, cwd, env=None):
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=env)


@pytest.fixture(scope="session")
def student(tmp_path_factory):
    out = tmp_path_factory.mktemp("student") / "copy"
    r = run("-m", "minbert", "classroom", "student", out, cwd=ROOT)
    assert r.returncode == 0, f"minbert.classroom.assignments student failed:\n{r.stdout}{r.stderr}"
    return out


@pytest.fixture
def without_gate(monkeypatch):
    """The box tested alone: the gate (gate.py), which refuses these blocks before they run, reads nothing. In this
    process only: a grade run as a command keeps its gate."""
    from minbert.classroom import gate
    monkeypatch.setattr(gate, "check_text", lambda *args: {})


GRADE_WITHOUT_GATE = [sys.executable, "-c", "from minbert.classroom import cli, gate; from minbert.core.errors import "
                      "cli as run; gate.check_text = lambda *args: {}; run(cli.main)", "grade"]


def submission(student, tmp_path, restore=()):
    """A copy of the student copy with the instructor's solution restored in `restore` (package files)."""
    sub = tmp_path / "sub"
    shutil.copytree(student, sub, ignore=shutil.ignore_patterns(".git"))
    for name in restore:
        shutil.copyfile(ROOT / package_file(name), sub / package_file(name))
    return sub


def with_block(student, tmp_path, file, key, body, nth=0):
    sub = submission(student, tmp_path)
    autograder._replace_block(sub / package_file(file), key, textwrap.dedent(body), nth=nth)
    return sub


def solution(file, key):
    """The instructor's code of one block, unindented: a correct answer an attack can wrap."""
    text = (ROOT / package_file(file)).read_text()
    removed = classroom.strip(text, f"minbert/{file}", {key})[1]
    return textwrap.dedent("".join(removed))


def scores(entries):
    out = {}
    for e in entries:
        out[e["assignment"]] = out.get(e["assignment"], 0) + e["score"]
    return {k: round(v, 3) for k, v in out.items()}


def first_failure(entries, key):
    return next((e["output"] for e in entries if e["assignment"] == key and e["score"] < e["max_score"]), "")


def fingerprint(root=ROOT):
    h = {}
    for folder in ("minbert", "tests"):
        for p in sorted((root / folder).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                h[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return h


class Boxes:
    """Records the boxes a grading run starts (their uids, their job folders), so that `left()` finds their
    processes only: another grading on the same machine (a teacher's, another test run's) is none of ours."""

    def __init__(self, monkeypatch):
        self.uids, self.jobs = set(), set()
        free_uid, run = sandbox.free_uid, sandbox.run

        def recording_free_uid():
            uid = free_uid()
            self.uids.add(uid)
            return uid

        def recording_run(argv, env, box, limits, level, **kwargs):
            self.jobs.add(box.get("job", "/nonexistent-job"))
            return run(argv, env, box, limits, level, **kwargs)
        monkeypatch.setattr(sandbox, "free_uid", recording_free_uid)
        monkeypatch.setattr(sandbox, "run", recording_run)

    def left(self):
        """Pids of this run's box processes still alive (killed here, so a failing test leaves nothing behind)."""
        found = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and int(d.name) != os.getpid():
                try:
                    cmd = (d / "cmdline").read_bytes().decode(errors="replace")
                    if d.stat().st_uid in self.uids or any(job in cmd for job in self.jobs):
                        found.append(int(d.name))
                except OSError:
                    pass
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return found


# ---------------------------------------------------------------------- the honest corpus

HONEST = Path(__file__).parent / "honest"
HEAD, TOP = "# honest variant: ", "# file top: "
# The style classes of the corpus: what a correct answer written from the hints may look like (a variant's header
# names its classes in brackets; a variant without one writes the other styles: loops, einsum, in place, HF style)
CLASSES = {
    "type-hint": "a type hint naming a torch class on a parameter or a local (`table: nn.Embedding`)",
    "loss-module": "the module form of a loss whose function form is allowed (`nn.CrossEntropyLoss()`)",
    "member": "a public member of a listed class or module (`itertools.chain.from_iterable`, `torch.Tensor.add`)",
    "numpy": "numpy's everyday functions (`np.fabs`, `np.copy`, `np.linalg.norm`), `torch.from_numpy` after them",
    "foreach": "AdamW in the `_foreach_` style, with per-tensor bias corrections as lists",
    "idiom": "an idiom the given code uses next to the block (`torch.autocast(x.device.type, enabled=False)`, "
             "`type(self).__name__` in a message, `getattr(obj, \"name\", default)`)",
    "top-import": "an import of a listed module added at the top of the graded file, outside the blocks",
}


class Variant(NamedTuple):
    name: str          # the file's stem
    key: str           # the assignment
    file: str          # the graded file, as in its header ("bert/attention.py")
    nth: int           # which of the assignment's blocks in that file
    body: str          # the block's lines, unindented
    top: tuple         # lines added at the top of the graded file, among its imports
    classes: tuple     # its style classes (CLASSES), () for the other styles


def honest_corpus() -> list:
    """[Variant] from tests/classroom/honest/*.py. The format: a first line `# honest variant: KEY FILE N: [class,
    class] style`, then any number of `# file top: <import>` lines (added at the top of the graded file, among its
    imports: where a student adds one), then the block's body."""
    found = []
    for path in sorted(HONEST.glob("*.py")):
        head, *lines = path.read_text().split("\n")
        where, _, style = head.removeprefix(HEAD).partition(": ")
        key, file, nth = where.split()
        top = []
        while lines and lines[0].startswith(TOP):
            top.append(lines.pop(0).removeprefix(TOP))
        tags = style[1:style.index("]")].split(", ") if style.startswith("[") else []
        assert set(tags) <= set(CLASSES), f"{path.name}: unknown style class in {tags} (CLASSES)"
        found.append(Variant(path.stem, key, file, int(nth), "\n".join(lines), tuple(top), tuple(tags)))
    return found


def lay(path: Path, v: Variant) -> None:
    """Put the variant in its block of the graded file at `path`, and its `top` lines just above the file's first
    import (the top of the file, after its docstring)."""
    autograder._replace_block(path, v.key, v.body.strip("\n"), nth=v.nth)
    if v.top:
        lines = path.read_text().split("\n")
        first = next(i for i, line in enumerate(lines) if line.startswith(("import ", "from ")))
        lines[first:first] = list(v.top)
        path.write_text("\n".join(lines))


def rounds(variants: list) -> list:
    """Variants grouped so that a round holds at most one variant of each assignment (one grade per round), and a
    variant with `top` lines shares its graded file with no other (the intake reads the whole file)."""
    def clash(v, w):
        return v.key == w.key or (v.top or w.top) and Path(v.file).name == Path(w.file).name
    out = []
    for v in variants:
        free = next((r for r in out if not any(clash(v, w) for w in r)), None)
        if free is None:
            out.append(free := [])
        free.append(v)
    return out


WALLS_OFF_CHILD = """import sys
template, glue, inputs, out = sys.argv[1:5]
sys.path.insert(0, template)
import importlib.util
import torch
torch.set_num_threads(1)
spec = importlib.util.spec_from_file_location("walls_off_scenarios", glue)
scenarios = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scenarios)
found = {}
for key, cases in torch.load(inputs, weights_only=True).items():
    found[key] = []
    for case in cases:
        try:
            found[key].append({k: v.detach() for k, v in scenarios.run(key, case).items()})
        except Exception as e:
            found[key].append(f"raised {type(e).__name__}: {e}")
torch.save(found, out)
"""


def walls_off(variants: list, tmp_path: Path, seeds=(3, 5, 7)) -> dict:
    """{variant name: '' or its first failure}: each variant laid into the copy's package (the rest of its
    assignment's blocks the reference's), run in a plain process with no gate, fence, intake or box, on the cases of
    `seeds`, its outputs compared with the reference's by the grader's own comparison (atol 1e-5 + rtol 1e-4)."""
    from minbert.classroom import cases as CASES, scenarios, submission as S
    from minbert.classroom.grade import compare
    verdicts = {}
    for i, group in enumerate(rounds(variants)):
        keys = {v.key for v in group}
        template = S.write_template(tmp_path / f"walls-off-{i}", set(classroom.BY_KEY))
        for rel in S.graded_files(keys):
            (template / rel).write_text(classroom.omit((ROOT / rel).read_text(), rel, set(classroom.BY_KEY)))
        for v in group:
            lay(template / package_file(Path(v.file).name), v)
        drawn = {v.key: [c for seed in seeds for c in CASES.draw(v.key, seed)] for v in group}
        torch.save(drawn, tmp_path / f"walls-off-{i}.pt")
        r = run("-I", "-c", WALLS_OFF_CHILD, template, ROOT / "minbert" / "classroom" / "scenarios.py",
                tmp_path / f"walls-off-{i}.pt", tmp_path / f"walls-off-{i}.out", cwd=tmp_path)
        assert r.returncode == 0, f"the walls-off run failed: {r.stderr[-3000:]}"
        got = torch.load(tmp_path / f"walls-off-{i}.out", weights_only=True)
        for v in group:
            verdicts[v.name] = ""
            for n, case in enumerate(drawn[v.key]):
                out = got[v.key][n]
                why = out if isinstance(out, str) else compare(out, scenarios.run(v.key, case))
                if why:
                    verdicts[v.name] = f"case {n + 1} ({CASES.describe(case)}): {why}"
                    break
    return verdicts
