"""Attacks on what a grade leaves behind, on the machine's memory, and on a grader stopped mid-box (docs/classroom.md,
"Threat model"): each ends with results.json (or a clean one-line refusal), 0 points, and nothing of the grade's left
in the grader's temporary folder, in /tmp or in /dev/shm.

Oracle (c), a property, built as test_sandbox_attacks.py's are: an attacking block computes the right answer only
when its attack worked (it made a 1,500-deep chain of folders, 100,000 files, 64 MiB of files, a SysV segment, a
child process), so 0 points means the defence held. Before this file's defences, at user+chroot, the deep chain
crashed the cleanup (RecursionError: traceback, no results.json, ~2 GB left on disk); the writable /tmp of each box
took 64 MiB files and any number of inodes; 16 processes of 2 GiB each fit where no memory control group existed;
SIGTERM or SIGHUP left the temporary folders behind. Needs root (skips, saying so, where the sandbox cannot be built).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from classroom_helpers import (LEVEL, ROOT, Boxes, first_failure, grade, needs_isolation, scores, solution, student,  # noqa: F401
                               with_block, without_gate, GRADE_WITHOUT_GATE)

from minbert.classroom import cleanup, results, sandbox

pytestmark = [needs_isolation, pytest.mark.slow,   # each grades in a sandbox: seconds to a minute a test; CI runs them
              pytest.mark.usefixtures("without_gate")]   # the box alone: the gate would refuse these blocks first

ANSWER = solution("attention.py", "attention")
IMPORT = "_imp = print.__self__.__getattribute__('__imp' + 'ort__')\n_os = _imp('os')\n" \
         "_open = _os.__getattribute__('op' + 'en')\n"
# every folder a box might write to: its own folders, the usual temporary ones, the runtime's
PLACES = "[_os.getcwd(), _os.environ.get('HOME', '/'), _os.environ.get('TMPDIR', '/'), '/tmp', '/var/tmp', '/dev/shm', " \
         "'/', '/box', '/usr/tmp', _imp('sys').prefix]"


def wins_if(attack: str) -> str:
    """An attention block that runs `attack` (code that sets `done` True when it worked), then answers only if so."""
    return f"{IMPORT}done = False\n{attack}\nassert done\n{ANSWER}"


ATTACKS = {
    "a 1,500-deep chain of folders": f"""
for place in {PLACES}:
    try:
        fd, name = _open(place, _os.O_RDONLY), 'chain-' + _imp('uuid').uuid4().hex
        for _ in range(1500):
            _os.mkdir(name, dir_fd=fd)
            fd, up, name = _open(name, _os.O_RDONLY, dir_fd=fd), fd, 'd'
            _os.close(up)
        done = True
        break
    except OSError:
        pass
""",
    "100,000 files": f"""
for place in {PLACES}:
    try:
        for i in range(100_000):
            _os.close(_open(place + '/f%d' % i, _os.O_WRONLY | _os.O_CREAT, 0o666))
        done = True
        break
    except OSError:
        pass
""",
    "64 MiB files until a cap stops them": f"""
chunk, written = b'0' * (1 << 20), 0
for place in {PLACES}:
    for i in range(64):
        try:
            fd = _open(place + '/big%d' % i, _os.O_WRONLY | _os.O_CREAT, 0o666)
            for _ in range(64):
                written += _os.write(fd, chunk)
        except OSError:
            break
done = written >= 1 << 20
""",
    "an anonymous file in memory (memfd)": """
fd = _os.memfd_create('x')
for _ in range(64):
    _os.write(fd, b'0' * (1 << 20))
done = True
""",
    "a SysV shared memory segment that outlives the box": """
libc = _imp('ctypes').CDLL(None, use_errno=True)
done = libc.shmget(0, 64 << 20, 0o1000 | 0o666) >= 0          # IPC_PRIVATE, IPC_CREAT | 0666
""",
    "fork": """
kids = []
for _ in range(20):
    pid = _os.fork()
    if pid == 0:
        _os._exit(0)
    kids.append(_os.waitpid(pid, 0)[0])
done = len(kids) == 20
""",
    "a process started by subprocess": """
done = _imp('subprocess').run(['/bin/true']).returncode == 0
""",
}


def owned_by_boxes(folder: str) -> list[str]:
    """Entries of `folder` (not below) that a box's uid owns."""
    found = []
    for name in os.listdir(folder):
        try:
            if os.lstat(os.path.join(folder, name)).st_uid >= sandbox.UID_BASE:
                found.append(name)
        except OSError:
            pass
    return found


def sysv_of_boxes() -> list[str]:
    """SysV IPC objects (shared memory, semaphores, message queues) whose owner is a box's uid."""
    found = []
    for kind in ("shm", "sem", "msg"):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        head = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(head, line.split()))
            if int(row.get("uid", 0)) >= sandbox.UID_BASE:
                found.append(f"{kind} {row.get('key')} of uid {row['uid']}")
    return found


@pytest.fixture
def grader_tmp(tmp_path, monkeypatch):
    """The grader's temporary folder, empty before the grade: everything the grade makes goes under it."""
    folder = tmp_path / "grader-tmp"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch-cache"))   # torch's own cache, not the grade's
    return folder


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_box_can_fill_no_disk_memory_or_process_table_and_leaves_nothing(name, student, tmp_path, grader_tmp,
                                                                          monkeypatch):
    boxes = Boxes(monkeypatch)
    sub = with_block(student, tmp_path, "attention.py", "attention", wins_if(ATTACKS[name]))
    entries = grade(sub, {"attention"}, timeout=120)
    report = results.results_json(entries)                 # what Gradescope would get
    assert report["score"] == 0 and scores(entries) == {"attention": 0}, \
        f"{name}: the attack worked and scored: {first_failure(entries, 'attention')}"
    assert first_failure(entries, "attention").startswith("raised "), \
        f"{name}: the attack did not run to its end: {first_failure(entries, 'attention')}"
    assert not boxes.left(), f"{name}: processes of the box outlived grading"
    assert list(grader_tmp.iterdir()) == [], f"{name}: left in the grader's temporary folder: " \
                                             f"{[p.name for p in grader_tmp.iterdir()]}"
    for folder in ("/tmp", "/dev/shm"):
        assert not owned_by_boxes(folder), f"{name}: a box's file was left in {folder}: {owned_by_boxes(folder)}"
    assert not sysv_of_boxes(), f"{name}: a box's SysV object outlived it: {sysv_of_boxes()}"


def test_one_process_a_box_may_start_threads_but_not_processes():
    """seccomp refuses fork, vfork, clone without CLONE_THREAD and clone3 (ENOSYS: glibc then makes its threads with
    clone): a Python thread and torch's own OpenMP threads still run, and compute the right thing."""
    script = r"""
import os, threading
import torch
got = []
t = threading.Thread(target=lambda: got.append(sum(range(10))))
t.start(); t.join()
torch.set_num_threads(4)
a = torch.arange(512 * 512, dtype=torch.float64).reshape(512, 512) / 512 ** 2
ok = torch.allclose((a @ a).sum(), (a.sum(0) * a.sum(1)).sum())
try:
    os.fork()
    fork = 'forked'
except OSError as e:
    fork = type(e).__name__
os.write(3, f'{got[0]} {bool(ok)} {torch.get_num_threads()} {fork}'.encode())
"""
    out = sandbox.run([sys.executable, "-I", "-c", script], {"OMP_NUM_THREADS": "4"}, {}, sandbox.Limits(wall_s=120),
                      LEVEL)
    assert out.why == "" and out.status == 0, f"the box failed: {out.why or out.log.decode(errors='replace')[-2000:]}"
    assert out.result.decode() == "45 True 4 PermissionError", out.result


# ---------------------------------------------------------------------- a grader stopped mid-box

def box_uids_under(pid: int) -> set[int]:
    """uids of the box processes descending from `pid` (the grade's launcher, the child)."""
    parents, uids = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(d)], uids[int(d)] = int(fields[1]), os.stat(f"/proc/{d}").st_uid
            except (OSError, IndexError, ValueError):
                pass
    found = set()
    for p, uid in uids.items():
        q, seen = p, 0
        while q in parents and seen < 64:
            q, seen = parents[q], seen + 1
            if q == pid:
                if uid >= sandbox.UID_BASE:
                    found.add(uid)
                break
    return found


def started(cmd: list, tmp: Path, grader_tmp: Path) -> subprocess.Popen:
    grader_tmp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(grader_tmp), "OMP_NUM_THREADS": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp / "torch-cache")}       # torch's own cache: not the grade's
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_a_box(proc: subprocess.Popen, within: float = 300) -> set[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        uids = box_uids_under(proc.pid)
        if uids:
            return uids
        assert proc.poll() is None, f"the grader ended before its box started:\n{proc.stderr.read()[-2000:]}"
        time.sleep(0.1)
    raise AssertionError("no box started within 300 s")


@pytest.mark.parametrize("how, signum", [("grade", signal.SIGTERM), ("grade", signal.SIGHUP), ("grade", signal.SIGINT),
                                         ("run_autograder", signal.SIGTERM)], ids=lambda v: getattr(v, "name", v))
def test_a_grader_stopped_mid_box_leaves_nothing(how, signum, student, tmp_path):
    """SIGTERM or SIGHUP mid-grade left the temporary folders (and at user+chroot the hard-link tree) on disk: Python's
    default for them ends the process without running a `finally`. Now `grade` refuses in one line and exits
    128 + the signal's number, `run_autograder` writes results.json with 0 points, and nothing is left."""
    sub = with_block(student, tmp_path, "attention.py", "attention", "while True:\n    pass")
    grader_tmp = tmp_path / "grader-tmp"
    if how == "grade":
        out = tmp_path / "results.json"
        cmd = [sys.executable, "-m", "minbert", "classroom", "grade", sub, "--assignments", "attention", "--json", out,
               "--salt", "1", "--timeout", "300"]
    else:
        root = tmp_path / "autograder"
        (root / "source").mkdir(parents=True)
        (root / "source" / "assignments.txt").write_text("attention\n")
        shutil.copytree(sub, root / "submission")
        out = root / "results" / "results.json"
        cmd = [sys.executable, "-m", "minbert.classroom.autograder", "run", "--root", root]
    proc = started([str(c) for c in cmd], tmp_path, grader_tmp)
    try:
        uids = wait_for_a_box(proc)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stderr, stderr[-3000:]
    if how == "grade":
        assert proc.returncode == 128 + signum and not out.exists(), (proc.returncode, stderr[-2000:])
        assert stderr.strip().splitlines()[-1] == (f"grade: stopped by {signum.name} before the grade was complete; "
                                                   "nothing was written (the boxes and the grade's temporary folder "
                                                   "are gone)"), stderr[-2000:]
    else:
        report = json.loads(out.read_text())
        assert report["score"] == 0 and f"stopped ({signum.name})" in report["output"], report
    assert list(grader_tmp.iterdir()) == [], f"left in the grader's temporary folder: {list(grader_tmp.iterdir())}"
    assert not [p for p in map(int, filter(str.isdigit, os.listdir("/proc"))) if _uid(p) in uids], \
        "a box process outlived its grader"


def _uid(pid: int):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


# ---------------------------------------------------------------------- two grades at once

def hunt(other: str, marker: str, solution_file) -> str:
    """An attack that looks, 4 s a case, for another grade's files (its temporary folder `other`, holding a template
    whose block says `marker`), the instructor's solution, and another box's tree through /proc; `done` if found."""
    return f"""
marker, found, end = ({marker[:4]!r} + {marker[4:]!r}).encode(), False, _imp('time').monotonic() + 4
solution = ('### BEGIN ' + 'SOLUTION attention').encode()
def look(path, want, depth=0):
    nonlocal found
    if found or depth > 8 or _imp('time').monotonic() > end:
        return
    try:
        if _os.path.isdir(path):
            for n in _os.listdir(path):
                look(path + '/' + n, want, depth + 1)
        else:
            found = want in _os.read(_open(path, _os.O_RDONLY | _os.O_NONBLOCK), 1 << 22)
    except OSError:
        pass
while not found and _imp('time').monotonic() < end:
    look({other!r}, marker)                            # the other grade's folder: its template, its box
    look({str(solution_file)!r}, solution)             # the instructor's solution
    try:
        pids = [p for p in _os.listdir('/proc') if p.isdigit()]
    except OSError:
        pids = []
    for p in pids:                                     # another box's tree, through a process of its
        look('/proc/' + p + '/root' + {other!r}, marker)
        look('/proc/' + p + '/cwd', marker)
    _imp('time').sleep(0.2)
done = found
"""


def test_two_grades_at_once_use_their_own_users_and_neither_box_reads_the_other_or_the_instructor(student, tmp_path):
    """Two grades at once on one machine: the first to finish restored the checkout's file modes while the other's
    box ran (10/10 from the grading checkout itself), and both boxes could use one uid. Each box here looks, 4 s a
    case (24 s in all, while the other grade's box runs), for the other grade's files (its temporary folder, which
    the test names to it), the instructor's solution, and another box's tree through /proc; it answers only if it
    found one. The uids are read from /proc while both boxes run."""
    folders = {k: tmp_path / f"grader-tmp-{k}" for k in "ab"}
    for f in folders.values():
        f.mkdir()
        f.chmod(0o755)                     # the test's own folders open: only the grader's protections count
    solution_file = ROOT / "minbert" / "bert" / "attention.py"
    procs, subs = {}, {}
    for me, other in (("a", "b"), ("b", "a")):
        hunt_ = hunt(str(folders[other]), f"MARKER-{other}", solution_file)
        subs[me] = with_block(student, tmp_path / me, "attention.py", "attention",
                              f"# MARKER-{me}\n" + wins_if(hunt_))
    for me in "ab":
        out = tmp_path / f"results-{me}.json"
        procs[me] = started([*GRADE_WITHOUT_GATE, str(subs[me]), "--assignments",
                             "attention", "--json", str(out), "--salt", "1", "--timeout", "120"], tmp_path, folders[me])
    uids, end = {me: set() for me in procs}, time.monotonic() + 900
    try:
        while any(p.poll() is None for p in procs.values()) and time.monotonic() < end:
            for me, p in procs.items():                # the boxes' users, read while they run
                uids[me] |= box_uids_under(p.pid)
            time.sleep(0.1)
        outs = {me: p.communicate(timeout=60) for me, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    for me, p in procs.items():
        assert p.returncode == 0, f"grade {me} failed:\n{outs[me][1][-3000:]}"
        report = json.loads((tmp_path / f"results-{me}.json").read_text())
        assert report["score"] == 0, f"box {me} read the other grade's files or the solution: {report['tests'][0]}"
        assert report["tests"][0]["output"].startswith("raised AssertionError"), report["tests"][0]["output"]
        assert list(folders[me].iterdir()) == [], f"grade {me} left {list(folders[me].iterdir())}"
    assert uids["a"] and uids["b"] and not uids["a"] & uids["b"], f"the two grades' boxes shared a uid: {uids}"


def cgroups_of(pid: int) -> list[str]:
    """The control groups a grade with process id `pid` made (their names carry it: cleanup.owner)."""
    return [f"{c}/{n}" for c in cleanup.CGROUPS if os.path.isdir(c) for n in os.listdir(c)
            if n.startswith(f"minbert-box-{pid}-")]


def test_what_a_grader_killed_mid_box_left_is_gone_after_the_next_grade(student, tmp_path):
    """SIGKILL cannot be caught: a grade killed mid-box left its temporary folder (at user+chroot the hard-link tree,
    34,173 entries) and its box's control groups, a few more each time. The next grade removes them, once their
    owner is gone; a grade still running keeps its own."""
    grader_tmp = tmp_path / "grader-tmp"
    busy = with_block(student, tmp_path / "busy", "attention.py", "attention", "while True:\n    pass")
    cmd = [sys.executable, "-m", "minbert", "classroom", "grade", str(busy), "--assignments", "attention", "--salt", "1",
           "--timeout", "3600"]   # longer than any load makes the second grade: the live one must stay live
    killed, alive = (started(cmd + ["--json", str(tmp_path / f"{n}.json")], tmp_path, grader_tmp) for n in "ka")
    try:
        uids = wait_for_a_box(killed)
        wait_for_a_box(alive)
        left = sorted(p.name for p in grader_tmp.iterdir() if p.name.startswith(f"minbert-grade-{killed.pid}-"))
        groups = cgroups_of(killed.pid)
        killed.kill()
        killed.communicate(timeout=60)
        end = time.monotonic() + 60
        while [p for p in map(int, filter(str.isdigit, os.listdir("/proc"))) if _uid(p) in uids]:
            assert time.monotonic() < end, "the killed grader's box outlived it by a minute"
            time.sleep(0.1)
        assert left and all((grader_tmp / n).exists() for n in left) and cgroups_of(killed.pid) == groups, \
            "the killed grader left nothing to clean: the test would show nothing"
        out = tmp_path / "second.json"
        second = started([sys.executable, "-m", "minbert", "classroom", "grade", str(student), "--assignments",
                          "attention", "--salt", "1", "--json", str(out)], tmp_path, grader_tmp)
        _, err = second.communicate(timeout=600)
        assert second.returncode == 0 and out.exists(), err[-2000:]
        assert not [n for n in left if (grader_tmp / n).exists()], f"the killed grade's folder is still there: {left}"
        assert not cgroups_of(killed.pid), f"the killed grade's control groups are still there: {cgroups_of(killed.pid)}"
        assert alive.poll() is None, "the live grade ended before the second grade did: the test shows nothing"
        assert [p for p in grader_tmp.iterdir() if p.name.startswith(f"minbert-grade-{alive.pid}-")], \
            "the second grade removed the folder of a grade still running"
    finally:                                              # the grades killed here by the test
        for p in (killed, alive):
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=60)
        cleanup.sweep()
