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
"""

import hashlib
import os
import signal
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
