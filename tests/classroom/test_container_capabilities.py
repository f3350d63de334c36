"""Grading inside a default container: root without CAP_SYS_ADMIN, as Gradescope, PrairieLearn's external
graders, otter's Docker grading and autograder.io run an autograder.

Docker's default capability set is given to the grader with util-linux's `setpriv` (Docker's seccomp profile
also refuses unshare and mount without CAP_SYS_ADMIN; the capabilities alone already make the kernel refuse
them). There the grader refused to grade at all ("isolation is required but unavailable"); it now grades at the
`user+chroot` level: a separate user, a chroot into hard links, seccomp against network sockets, rlimits,
kill(-1) as the box's user. Oracle: the blank copy scores 0 and this repository full points, the layers are
named, and an attack that needs the box (reading the instructor's solution) still scores 0. The attack tests
as a whole run under the same capabilities in CI (.ci/run).
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from classroom_helpers import GRADE_WITHOUT_GATE, ROOT, solution, student, submission, with_block  # noqa: F401

from minbert.classroom import assignments as classroom

DOCKER_DEFAULT_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid", "setfcap",
                       "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write")
SETPRIV = shutil.which("setpriv")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (SETPRIV and sys.platform.startswith("linux") and os.geteuid() == 0),
                                 reason="needs root on Linux and util-linux's setpriv to take capabilities away")]


def in_container(*args, timeout=900, command=(sys.executable, "-m", "minbert", "classroom")):
    """`python -m minbert classroom ...` (or `command`) as root with exactly Docker's default capabilities."""
    caps = "-all," + ",".join("+" + c for c in DOCKER_DEFAULT_CAPS)
    return subprocess.run([SETPRIV, f"--bounding-set={caps}", "--inh-caps=-all", *command, *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})


def graded(sub, tmp_path, *extra, gate=True):
    """A grade in the container; gate=False: the box alone (the gate, which refuses hostile blocks first, reads
    nothing)."""
    out = tmp_path / f"results-{len(list(tmp_path.iterdir()))}.json"
    if gate:
        r = in_container("grade", sub, "--json", out, "--salt", "7", *extra)
    else:
        r = in_container(sub, "--json", out, "--salt", "7", *extra, command=GRADE_WITHOUT_GATE)
    assert r.returncode == 0, f"grading in a default container failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return r.stdout, json.loads(out.read_text())


def test_a_default_container_grades_blank_zero_and_the_reference_full_and_names_its_layers(student, tmp_path):
    total = sum(a.points for a in classroom.ASSIGNMENTS)
    table, blank = graded(student, tmp_path)
    assert blank["score"] == 0, f"the blank copy scored {blank['score']} in a container"
    table, full = graded(ROOT, tmp_path)
    assert full["score"] == pytest.approx(total), f"the reference scored {full['score']} / {total} in a container:\n{table}"
    for layer in ("a separate user", "chroot", "seccomp", "rlimits", "kill(-1) as its user"):
        assert layer in full["output"] and layer in table, f"the layer {layer!r} is not named: {full['output']}"
    assert "PID, mount, network" not in full["output"], "namespaces were named where the kernel refuses them"


def test_a_default_container_refuses_a_stronger_level_than_it_has(tmp_path):
    r = in_container("grade", ROOT, "--assignments", "meanshift", "--require_isolation", "namespaces", timeout=300)
    assert r.returncode != 0 and "isolation 'namespaces' is required but this machine gives 'user+chroot'" in r.stderr, \
        r.stderr[-2000:]
    assert "Traceback" not in r.stderr, r.stderr[-2000:]


def test_reading_the_instructors_solution_from_a_default_container_scores_zero(student, tmp_path):
    """The box sees a tree of hard links to the runtime: the checkout is not in it, at its path or any other."""
    escape = f"""
_os = torch.__getattribute__('os')
src = b''
try:
    src = _os.read(_os.__getattribute__('op' + 'en')({str(ROOT / 'minbert' / 'bert' / 'attention.py')!r}, 0), 1 << 20)
except Exception:
    pass
assert b'### BEGIN SOLUTION attention' in src
{solution("attention.py", "attention")}"""
    sub = with_block(student, tmp_path, "attention.py", "attention", escape)
    _, report = graded(sub, tmp_path, "--assignments", "attention", gate=False)   # the box alone
    assert report["score"] == 0, f"the box read the instructor's solution: {report['tests'][0]['output']}"
    assert "raised AssertionError" in report["tests"][0]["output"], report["tests"][0]["output"]
