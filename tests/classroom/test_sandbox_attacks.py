"""The red teams' attacks on the grader, one test per class of docs/classroom.md's threat model: each must score 0, change none of
the instructor's files, leave no process running, and stay within the limits.

Oracle (c), a property, built so that the attack WINS points exactly when its defence is missing: an
attacking block computes the right answer (the instructor's own solution lines) only when its escape
works (it read the instructor's file, allocated 5 GB, forked 200 processes, reached the network...), and
raises otherwise. Score 0 therefore means the defence held. Each was seen scoring points with the
sandbox off (`grade._ISOLATION = (False, ...)`, the self-check mode; see docs/classroom.md).
Needs root and Linux namespaces (CI has both); skips, saying so, where they are missing.
"""

import ast
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import zipfile

import pytest
import torch
from classroom_helpers import (LEVEL, ROOT, Boxes, fingerprint, first_failure, needs_isolation, scores, solution,
                               student, submission, with_block, without_gate)  # noqa: F401 (fixtures)

from minbert.classroom import assignments as classroom, autograder, grade as G, results, sandbox
from minbert.classroom.assignments import package_file
from minbert.classroom.grade import grade
from minbert.classroom.wire import Error
from minbert.core.errors import UserError

pytestmark = [needs_isolation, pytest.mark.slow,   # each grades in a sandbox: seconds a test; CI runs them
              pytest.mark.usefixtures("without_gate")]   # the box alone: the gate would refuse these blocks first

ANSWER = solution("attention.py", "attention")          # sets y from q, k, v, mask: right when it runs


def wins_if(escape: str) -> str:
    """An attention block that tries `escape` (code that raises when the defence holds), then answers right.
    Its names get past the AST ban list, as the red team's did: the sandbox, not the list, must stop it."""
    return f"_os = torch.__getattribute__('os')\n_open = _os.__getattribute__('op' + 'en')\n{escape}\n{ANSWER}"


@pytest.fixture
def boxes(monkeypatch):
    return Boxes(monkeypatch)


def attacked(student, tmp_path, boxes, escape, key="attention", timeout=60.0):
    """Grade the attacking submission; check the three promises every attack must keep."""
    before = fingerprint()
    sub = with_block(student, tmp_path, "attention.py", "attention", wins_if(escape))
    try:
        entries = grade(sub, {key}, timeout=timeout)
    finally:
        after = fingerprint()
    assert after == before, f"the submission changed the instructor's files: {sorted(set(after.items()) ^ set(before.items()))[:3]}"
    assert not boxes.left(), "processes of the box outlived grading"
    return entries


# ---------------------------------------------------------------------- reading the answers

def test_reading_the_instructors_solution_by_path_or_through_proc_scores_zero(student, tmp_path, boxes):
    """The red team exec'd the solution it read from minbert/bert/attention.py: by its absolute path, and
    through /proc/<parent>/cwd. Names hidden from the AST check: torch.__getattribute__, builtins by key."""
    escape = f"""
paths = [{str(ROOT / 'minbert' / 'attention.py')!r}, '/proc/%d/cwd/minbert/bert/attention.py' % _os.getppid()]
paths += ['/proc/%s/cwd/minbert/bert/attention.py' % p for p in _os.listdir('/proc') if p.isdigit()]
src = b''
for path in paths:
    try:
        src = _os.read(_open(path, _os.O_RDONLY), 1 << 20)
        break
    except Exception:
        pass
assert b'### BEGIN SOLUTION attention' in src      # read: the rest is the solution, ready to exec
"""
    entries = attacked(student, tmp_path, boxes, escape)
    assert scores(entries) == {"attention": 0}, f"the solution was read from disk: {first_failure(entries, 'attention')}"


def test_reading_gradescope_source_and_hidden_cases_scores_zero(student, tmp_path, boxes):
    """Everything the grader holds on disk is outside the box: the checkout, the grader's temporary folders."""
    escape = f"""
found = []
for folder, word in (({str(ROOT)!r}, 'minbert'), ({tempfile.gettempdir()!r}, 'minbert-grade-')):
    try:
        found += [n for n in _os.listdir(folder) if n.startswith(word)]
    except Exception:
        pass
assert found
"""
    entries = attacked(student, tmp_path, boxes, escape)
    assert scores(entries) == {"attention": 0}, first_failure(entries, "attention")


def test_a_banned_call_by_another_name_scores_zero(student, tmp_path):
    """torch._C._nn.__getattribute__("scaled_dot_" + "product_attention") passed the name-based ban."""
    sub = with_block(student, tmp_path, "attention.py", "attention",
                     "y = torch._C._nn.__getattribute__('scaled_dot_' + 'product_attention')(q, k, v, attn_mask=mask)")
    entries = grade(sub, {"attention"})
    assert scores(entries) == {"attention": 0}
    assert "scaled_dot_product_attention" in first_failure(entries, "attention"), first_failure(entries, "attention")
    sub2 = with_block(student, tmp_path / "2", "attention.py", "attention",
                      "y = torch.ops.aten.__getattr__('_scaled_dot_' + 'product_attention_math')(q, k, v, mask)[0]")
    assert scores(grade(sub2, {"attention"})) == {"attention": 0}


# ---------------------------------------------------------------------- links

@pytest.mark.parametrize("kind", ["file symlinks", "folder symlink", "hard link"])
def test_links_in_a_submission_are_refused_with_a_message(kind, student, tmp_path):
    """Graded files as links to the instructor's passed 'unchanged outside the blocks': 110/110, no code."""
    sub = tmp_path / "sub"
    (sub / "minbert").mkdir(parents=True)
    if kind == "file symlinks":
        for f in ("attention.py", "meanshift.py"):
            (sub / package_file(f)).parent.mkdir(parents=True, exist_ok=True)
            (sub / package_file(f)).symlink_to(ROOT / package_file(f))
    elif kind == "folder symlink":
        (sub / "minbert").rmdir()
        (sub / "minbert").symlink_to(ROOT / "minbert")
    else:
        for f in ("attention.py", "meanshift.py"):
            shutil.copyfile(ROOT / package_file(f), tmp_path / f)
            (sub / package_file(f)).parent.mkdir(parents=True, exist_ok=True)
            os.link(tmp_path / f, sub / package_file(f))
    entries = grade(sub, {"attention", "meanshift"})
    assert scores(entries) == {"attention": 0, "meanshift": 0}, scores(entries)
    msg = first_failure(entries, "attention")
    word = {"file symlinks": "symbolic link", "folder symlink": "symbolic link", "hard link": "hard link"}[kind]
    assert word in msg or "not in the submission" in msg, msg


def test_special_files_are_refused(student, tmp_path):
    sub = submission(student, tmp_path, restore=["meanshift.py"])
    (sub / package_file("meanshift.py")).unlink()
    os.mkfifo(sub / package_file("meanshift.py"))           # reading a fifo would block the grader forever
    entries = grade(sub, {"meanshift"})
    assert scores(entries) == {"meanshift": 0} and "special file" in first_failure(entries, "meanshift")


# ---------------------------------------------------------------------- writing the instructor's files

def test_writing_the_instructors_files_changes_nothing_and_the_next_blank_copy_still_scores_zero(student, tmp_path, boxes):
    """One submission appended to the grader's source, another rewrote a reference module not yet imported,
    another renamed a test file; the next, untouched copy then scored 110/110."""
    targets = [ROOT / "minbert" / "classroom" / "grade.py", ROOT / "minbert" / "classroom" / "references.py",
               ROOT / package_file("meanshift.py")]
    escape = f"""
done = 0
for path in {[str(t) for t in targets]!r}:
    try:
        fd = _open(path, _os.O_WRONLY | _os.O_APPEND)
        _os.write(fd, b'\\n# pwned\\n')
        done += 1
    except Exception:
        pass
try:
    _os.rename({str(ROOT / 'tests' / 'test_attention.py')!r}, {str(ROOT / 'tests' / 'gone.py')!r})
    done += 1
except Exception:
    pass
assert done
"""
    saved = {t: t.read_bytes() for t in targets}
    try:
        entries = attacked(student, tmp_path, boxes, escape)
    finally:                                               # should the defence fail, leave the checkout whole
        for t, data in saved.items():
            t.write_bytes(data)
        if (ROOT / "tests" / "gone.py").exists():
            (ROOT / "tests" / "gone.py").rename(ROOT / "tests" / "test_attention.py")
    assert scores(entries) == {"attention": 0}, first_failure(entries, "attention")
    assert scores(grade(student, {"meanshift", "attention"})) == {"meanshift": 0, "attention": 0}


# ---------------------------------------------------------------------- processes that outlive their case

def test_a_setsid_daemon_cannot_outlive_grading_or_forge_results_json(student, tmp_path, boxes):
    """A fork() + setsid() grandchild rewrote results.json after the grader exited (printed 0, file said 110)."""
    root = tmp_path / "autograder"
    shutil.copytree(ROOT / "minbert", root / "source" / "minbert", ignore=shutil.ignore_patterns("__pycache__"))
    results = root / "results" / "results.json"
    escape = f"""
if _os.fork() == 0:
    _os.setsid()
    while True:
        try:
            fd = _open({str(results)!r}, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC)
            _os.write(fd, b'{{"score": 110, "tests": []}}')
        except Exception:
            pass
        _os.sched_yield()
raise RuntimeError('the daemon does the work')
"""
    sub = with_block(student, tmp_path, "attention.py", "attention", wins_if(escape))
    shutil.copytree(sub, root / "submission")
    (root / "source" / "assignments.txt").write_text("attention\n")
    assert autograder.run(root) == 0
    assert not boxes.left(), f"a daemon outlived grading: {boxes.left()}"
    report = json.loads(results.read_text())
    assert report["score"] == 0 and report["tests"], report


def test_a_grandchild_holding_the_output_pipe_cannot_hang_the_grader(student, tmp_path, boxes):
    """communicate() waited for a grandchild that kept stdout open: a 60 s limit became 305 s, no results."""
    escape = """
if _os.fork() == 0:
    _os.setsid()
    while True:
        _os.sched_yield()
"""
    sub = with_block(student, tmp_path, "attention.py", "attention", escape + "\nraise RuntimeError('no answer')")
    done = {}
    worker = threading.Thread(target=lambda: done.setdefault("entries", grade(sub, {"attention"}, timeout=20)))
    worker.start()
    worker.join(300)                                       # 15x the limit: a hang, not a slow machine
    assert not worker.is_alive(), "grading hung on a grandchild holding the output pipe"
    assert scores(done["entries"]) == {"attention": 0} and not boxes.left()


def test_an_infinite_loop_is_stopped_at_the_wall_clock_limit(student, tmp_path, boxes):
    entries = attacked(student, tmp_path, boxes, "while True:\n    pass", timeout=8)
    assert "timed out after 8 s" in first_failure(entries, "attention")


# ---------------------------------------------------------------------- resources

@pytest.mark.parametrize("name, escape", [
    ("memory", "big = torch.ones(5 << 30, dtype=torch.uint8)\nassert int(big[-1]) == 1"),
    ("processes", "kids = []\nfor _ in range(200):\n    pid = _os.fork()\n    if pid == 0:\n"
                  "        _os.sched_yield()\n        _os._exit(0)\n    kids.append(pid)"),
    ("file size", "fd = _open('/tmp/big', _os.O_WRONLY | _os.O_CREAT)\n"
                  "for _ in range(100):\n    _os.write(fd, b'0' * (1 << 20))"),
    ("open files", "fds = [_open('/dev/null', _os.O_RDONLY) for _ in range(2000)]"),
    ("network", "import_ = torch.__getattribute__('__buil' + 'tins__')['__imp' + 'ort__']\n"
                "s = import_('socket').create_connection(('127.0.0.1', PORT), timeout=2)\ns.close()"),
])
def test_resource_limits_hold(name, escape, student, tmp_path, boxes):
    """The child allocated 3 GB freely (only RLIMIT_CPU was set); nothing capped processes, files or network."""
    server = None
    if name == "network":
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        escape = escape.replace("PORT", str(server.getsockname()[1]))
    try:
        entries = attacked(student, tmp_path, boxes, escape)
    finally:
        if server:
            server.close()
    assert scores(entries) == {"attention": 0}, f"the {name} limit did not hold: {first_failure(entries, 'attention')}"


def test_a_flood_of_output_is_capped_in_the_grader(student, tmp_path, boxes):
    """1.5 GB of printed output made the grader itself reach 6.1 GB (it buffered the child's output)."""
    entries = attacked(student, tmp_path, boxes, "while True:\n    print('x' * 65536)")
    assert "printed more than" in first_failure(entries, "attention"), first_failure(entries, "attention")


def make_zip(path, entries):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


@pytest.mark.parametrize("name, entries, why", [
    ("bomb", [("minbert/methods/meanshift.py", b"\0" * (100 << 20), 0o100644)], "MiB"),
    ("many files", [(f"f{i}.txt", b"", 0o100644) for i in range(2500)], "entries"),
    ("link", [("minbert/methods/meanshift.py", str(ROOT / "minbert/methods/meanshift.py").encode(), 0o120777)], "link"),
    ("escape", [("../outside.py", b"x = 1", 0o100644)], "outside"),
])
def test_a_hostile_zip_is_refused_with_its_reason(name, entries, why, tmp_path):
    """An 8 MB zip unpacked to 2 GB; links and '..' entries in zips."""
    archive = tmp_path / "submission.zip"
    make_zip(archive, entries)
    got = grade(archive, {"meanshift"})
    assert scores(got) == {"meanshift": 0} and why in first_failure(got, "meanshift"), first_failure(got, "meanshift")


def unreadable_zip(kind: str, path):
    """A zip the reader cannot read: an entry flagged as encrypted (zipfile raises RuntimeError), a corrupt
    deflate stream (zlib.error), or an archive cut short (BadZipFile)."""
    source = (ROOT / package_file("meanshift.py")).read_bytes()
    make_zip(path, [("minbert/methods/meanshift.py", source, 0o100644)])
    data = bytearray(path.read_bytes())
    if kind == "encrypted":
        central = data.find(b"PK\x01\x02")
        data[central + 8] |= 1                                   # general purpose flag, bit 0: encrypted
    elif kind == "corrupt deflate":
        start = 30 + len("minbert/methods/meanshift.py")          # the local header, then the compressed data
        data[start:start + 64] = b"\xff" * 64
    else:
        data = data[:len(data) // 2]
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("kind", ["encrypted", "corrupt deflate", "truncated"])
def test_a_zip_that_cannot_be_read_is_refused_in_one_line_and_results_json_says_so(kind, tmp_path):
    """An encrypted entry (RuntimeError) and a corrupt deflate stream (zlib.error) crashed `grade` with a
    traceback and no results.json."""
    archive = unreadable_zip(kind, tmp_path / "submission.zip")
    got = grade(archive, {"meanshift"})
    msg = first_failure(got, "meanshift")
    assert scores(got) == {"meanshift": 0} and msg.startswith("refused: the zip cannot be read: ") and "\n" not in msg, msg
    r = subprocess.run([sys.executable, "-m", "minbert", "classroom", "grade", archive, "--assignments", "meanshift",
                        "--json", tmp_path / "results.json", "--salt", "1"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    report = json.loads((tmp_path / "results.json").read_text())
    assert report["score"] == 0 and "the zip cannot be read" in report["tests"][0]["output"], report


# ---------------------------------------------------------------------- messages

def test_messages_never_carry_text_the_submission_controls(student, tmp_path, boxes):
    """Visible cases carried a line of the solution, the case generator's text, the parent's command line and
    its environment variable names, through exception messages and prints."""
    escape = """
secret = 'LEAK-' + ' '.join(sorted(torch.__getattribute__('os').environ)) + str(_os.getpid())
print(secret)
raise ValueError(secret)
"""
    entries = attacked(student, tmp_path, boxes, escape)
    outputs = " ".join(e["output"] for e in entries)
    assert "LEAK-" not in outputs and "PATH" not in outputs, outputs[:300]
    assert "raised ValueError at minbert/bert/attention.py:" in first_failure(entries, "attention")
    custom = "class Sneaky(Exception):\n    pass\nraise Sneaky('LEAK-' + 'x')"
    entries = attacked(student, tmp_path / "2", boxes, custom)
    assert "class your code defines" in first_failure(entries, "attention") and "LEAK" not in first_failure(entries, "attention")


# ---------------------------------------------------------------------- the instructor's files, checked per box

def test_the_launcher_refuses_a_box_whose_user_can_open_a_secret():
    """Before the child runs, the launcher tries to open every secret as the box's user: a secret in the box's tree
    (here the standard library's os.py, which every box holds) stops the box; the instructor's grader, which no
    box's tree holds, does not."""
    probe = [sys.executable, "-I", "-c", "import os; os.write(3, b'ran')"]
    exposed = sandbox.run(probe, {}, {}, sandbox.Limits(wall_s=20), LEVEL, secrets=[os.__file__])
    assert exposed.result == b"" and "could open an instructor's file" in exposed.why and os.__file__ in exposed.why, \
        exposed.why
    held = sandbox.run(probe, {}, {}, sandbox.Limits(wall_s=20), LEVEL, secrets=[ROOT / "minbert/classroom/grade.py"])
    assert held.result == b"ran" and held.why == "", held.why


def test_the_box_holds_none_of_the_graders_groups():
    """The child drops the grader's supplementary groups before it drops its user: a grader started with a group
    (here 4242, from a launcher that gives it one) must not hand it to the box, whose user could then open every file
    that group may read (a 0640 answer key, say)."""
    probe = [sys.executable, "-I", "-c", "import os; os.write(3, repr((os.getgid(), os.getgroups())).encode())"]
    grader = ("import sys; from minbert.classroom import sandbox; "
              f"r = sandbox.run({probe!r}, {{}}, {{}}, sandbox.Limits(wall_s=20), {LEVEL!r}); "
              "sys.stdout.write(r.result.decode() or r.why)")
    out = subprocess.run([sys.executable, "-c", grader], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         extra_groups=[4242])
    gid, groups = ast.literal_eval(out.stdout)
    assert 4242 not in groups and 0 not in groups and set(groups) <= {gid}, \
        f"minbert/classroom/sandbox.py, _become: the box runs with groups {groups} (gid {gid}); it must hold " \
        f"only its own group (os.setgroups([]) before os.setgid)"


def test_every_box_checks_that_its_user_cannot_open_the_instructors_files(student, tmp_path, monkeypatch):
    """The launcher refuses a box whose user could open a secret (test above); the grade must hand every box the
    grader, its references and every solution file, or the check guards nothing."""
    given, run = [], sandbox.run

    def recording_run(argv, env, box, limits, level, **kwargs):
        given.append({str(p) for p in kwargs.get("secrets", ())})
        return run(argv, env, box, limits, level, **kwargs)
    monkeypatch.setattr(sandbox, "run", recording_run)
    grade(submission(student, tmp_path, restore=["meanshift.py"]), {"meanshift", "adamw"})
    must = {str(ROOT / "minbert" / "classroom" / f) for f in ("references.py", "grade.py")}
    must |= {str(ROOT / package_file(f)) for f in ("meanshift.py", "adamw.py", "attention.py", "pcgrad.py")}
    assert len(given) == 2 and all(must <= g for g in given), \
        f"a box was not given the instructor's files to check: missing {sorted(must - set().union(*given))[:3]}"


# ---------------------------------------------------------------------- isolation missing

def test_without_isolation_every_output_says_self_check_and_require_isolation_refuses(student, tmp_path, monkeypatch):
    monkeypatch.setattr(G, "_ISOLATION", ("self-check", "namespaces refused (a test)"))
    sub = submission(student, tmp_path, restore=["meanshift.py"])
    entries = grade(sub, {"meanshift"}, require_isolation=False)
    assert scores(entries) == {"meanshift": 10}
    assert all("self-check, not authoritative" in e["output"] for e in entries), entries[0]["output"]
    assert "self-check" in results.table(entries) and "self-check" in results.results_json(entries)["output"]
    with pytest.raises(UserError, match="isolation 'user\\+chroot' is required"):
        grade(sub, {"meanshift"}, require_isolation="user+chroot")
    with pytest.raises(UserError, match="isolation 'user\\+chroot' is required"):
        grade(sub, {"meanshift"})                          # as root, another user is required by default


def test_gradescope_layout_grades_isolated_and_source_is_unreadable(student, tmp_path):
    """Gradescope's layout (source/, submission/, results/ under one root), run through run_autograder."""
    r = subprocess.run([sys.executable, "-m", "minbert", "classroom", "autograder", tmp_path / "out", "--assignments",
                        "attention,meanshift"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "out" / "autograder.zip") as z:
        z.extractall(root / "unzipped")
    shutil.copytree(root / "unzipped" / "source", root / "source")
    escape = f"""
fd = _open({str(root / 'source' / 'minbert' / 'attention.py')!r}, _os.O_RDONLY)
assert b'BEGIN SOLUTION' in _os.read(fd, 1 << 20)
"""
    sub = with_block(student, tmp_path, "attention.py", "attention", wins_if(escape))
    (root / "submission").mkdir()
    for f in ("attention.py", "meanshift.py"):
        shutil.copyfile(sub / package_file(f) if f == "attention.py" else ROOT / package_file(f), root / "submission" / f)
    env = {**os.environ, "MINBERT_AUTOGRADER_ROOT": str(root), "PYTHON": sys.executable}
    p = subprocess.run(["bash", str(root / "unzipped" / "run_autograder")], env=env, capture_output=True, text=True,
                       timeout=600)
    report = json.loads((root / "results" / "results.json").read_text())
    assert p.returncode == 0, p.stderr
    got = scores([{**t, "assignment": t["name"].split(": ")[0].split(". ")[1]} for t in report["tests"]
                  if t["visibility"] != "hidden"])
    assert got == {"attention": 0, "meanshift": 10}, got
    named = {"namespaces": "PID, mount, network", "user+chroot": "chroot into hard links"}[LEVEL]
    assert named in report["output"], report["output"]


# ---------------------------------------------------------------------- the second red team (a fresh one, on the sandbox)

FORGE = """
_os = torch.__getattribute__('o' + 's')
_imp = print.__self__.__getattribute__('__imp' + 'ort__')
_n = len(torch.__getattribute__('lo' + 'ad')(_imp('sys').argv[3], weights_only=True))
_buf = _imp('io').BytesIO()
torch.save(RESULT, _buf)
_os.write(3, _buf.getvalue())
_os._exit(0)
"""


@pytest.mark.parametrize("result", ["[''] * _n", "[None] * _n", "[{'y': 'passed'}] * _n", "[{}] * _n",
                                    "[{'y': torch.zeros(2, device='meta')}] * _n", "[{'error': ''}] * _n"])
def test_forged_results_that_are_not_tensors_score_zero(result, student, tmp_path, boxes):
    """Five lines wrote [''] * n to the results pipe and exited: '' was read as 'no difference', 110/110."""
    entries = attacked(student, tmp_path, boxes, FORGE.replace("RESULT", result))
    assert scores(entries) == {"attention": 0}, f"forged results {result!r} scored: {first_failure(entries, 'attention')}"


PARAMETER_FORGERY = """
_imp = print.__self__.__getattribute__('__imp' + 'ort__')
torch, _os = _imp('torch'), _imp('os')
_n = len(torch.__getattribute__('lo' + 'ad')(_imp('sys').argv[3], weights_only=True))
_p = torch.nn.Parameter(torch.zeros(()), requires_grad=False)
_p.double = torch.DoubleTensor
_buf = _imp('io').BytesIO()
torch.save([{'bandwidth': _p, 'centers': _p, 'labels': _p}] * _n, _buf)
_os.write(3, _buf.getvalue())
_os._exit(0)
"""


def test_child_built_objects_cannot_forge_a_pass(student, tmp_path):
    """The third red team: a Parameter whose instance attribute `double` is the class torch.DoubleTensor, sent
    through torch.load(weights_only=True) for every scalar output: `g.double()` gave an empty tensor, and
    isfinite(empty).all() and allclose(empty, w) are both True, so every scalar case passed with nothing
    computed (12.6 points over four assignments; 3.3 of meanshift's 10 here). Two defences, each checked alone:
    the fence refuses torch.save in the box (its storage calls are on no list), and the parent parses bytes, so the
    same torch.save bytes, built here and only written by the block, are refused as a frame."""
    sub = with_block(student, tmp_path / "built", "meanshift.py", "meanshift", PARAMETER_FORGERY)
    entries = grade(sub, {"meanshift"})
    assert scores(entries) == {"meanshift": 0}, f"a child-built object scored: {first_failure(entries, 'meanshift')}"
    assert "which assignment meanshift does not allow" in first_failure(entries, "meanshift"), \
        f"the fence should refuse torch.save in the box: {first_failure(entries, 'meanshift')}"

    p = torch.nn.Parameter(torch.zeros(()), requires_grad=False)
    p.double = torch.DoubleTensor
    forged = io.BytesIO()
    torch.save([{"bandwidth": p, "centers": p, "labels": p}] * 8, forged)
    written = (f"_os = print.__self__.__getattribute__('__imp' + 'ort__')('os')\n"
               f"_os.write(3, {forged.getvalue()!r})\n_os._exit(0)")
    sub = with_block(student, tmp_path / "written", "meanshift.py", "meanshift", written)
    entries = grade(sub, {"meanshift"})
    assert scores(entries) == {"meanshift": 0}, f"forged bytes scored: {first_failure(entries, 'meanshift')}"
    assert "could not be read: the results do not start with the grader's header" in first_failure(entries, "meanshift")


@pytest.mark.parametrize("key, file, block, word", [
    ("adamw", "adamw.py",
     "_opt = torch.__getattribute__('op' + 'tim').__getattribute__('Ada' + 'mW')(params, lr=lr, betas=(beta1, beta2), "
     "eps=eps, weight_decay=wd)\nfor _p, _m, _v, _t in zip(params, exp_avgs, exp_avg_sqs, steps):\n"
     "    _opt.state[_p] = {'step': torch.tensor(_t - 1.0), 'exp_avg': _m, 'exp_avg_sq': _v}\n_opt.step()", "step"),
    ("attention", "attention.py",
     "B, H, T, D = q.shape\nE = H * D\nseq = lambda t: t.transpose(1, 2).reshape(B, T, E).transpose(0, 1)\n"
     "eye, zero = torch.eye(E, dtype=q.dtype), torch.zeros(E, dtype=q.dtype)\n"
     "am = mask.to(q.dtype).expand(B, H, T, T).reshape(B * H, T, T)\n"
     "out, _ = F.__getattribute__('multi_head_' + 'attention_forward')(seq(q), seq(k), seq(v), E, H, None, "
     "torch.zeros(3 * E, dtype=q.dtype), None, None, False, 0.0, eye, zero, training=False, need_weights=True, "
     "attn_mask=am, use_separate_proj_weight=True, q_proj_weight=eye, k_proj_weight=eye, v_proj_weight=eye, "
     "average_attn_weights=False)\ny = out.transpose(0, 1).reshape(B, T, H, D).transpose(1, 2)", "multi_head_attention_forward"),
    ("attention", "attention.py",
     "_fa = torch.nn.attention.__getattribute__('flex_' + 'attention').__getattribute__('flex_' + 'attention')\n"
     "_m = mask.to(q.dtype).expand(q.shape[0], 1, 1, q.shape[2]).reshape(q.shape[0], q.shape[2])\n"
     "y = _fa(q, k, v, score_mod=lambda s, b, h, qi, ki: s + _m[b, ki])", "flex_attention"),
    ("attention", "attention.py",
     "_Q = torch.ao.nn.quantizable.__getattribute__('Multihead' + 'Attention')\nH, D = self.num_heads, self.head_dim\n"
     "B, T = q.shape[0], q.shape[2]\n_mha = _Q(D, 1, batch_first=True, dtype=q.dtype)\n"
     "for _l in (_mha.linear_Q, _mha.linear_K, _mha.linear_V, _mha.out_proj):\n"
     "    _l.weight.data.copy_(torch.eye(D, dtype=q.dtype))\n    _l.bias.data.zero_()\n"
     "_am = mask.to(q.dtype).expand(B, 1, T, T).reshape(B, T, T)\n"
     "y = torch.stack([_mha(q[:, h], k[:, h], v[:, h], attn_mask=_am, need_weights=False)[0] for h in range(H)], 1)",
     "torch.Tensor.uniform_"),     # building it draws its weights: off attention's allow-list, before forward's refusal
    ("attention", "attention.py",
     "_m = print.__self__.__getattribute__('__imp' + 'ort__')('torch._higher_order_ops.flex_attention', None, None, ['x'])\n"
     "_am = mask.to(q.dtype).expand(q.shape[0], 1, 1, q.shape[2]).reshape(q.shape[0], q.shape[2])\n"
     "y = _m.math_attention(q, k, v, lambda s, b, h, qi, ki: s + _am[b, ki], (lambda b, h, qi, ki: qi >= 0,), "
     "q.shape[-1] ** -0.5, {})[0]", "math_attention"),
    ("adamw", "adamw.py",
     "_o = torch.__getattribute__('op' + 'tim')._functional\n"
     "for p, g, m, v, s in zip(params, grads, exp_avgs, exp_avg_sqs, steps):\n    p.mul_(1 - lr * wd)\n"
     "    _o.sparse_adam([p], [g.to_sparse()], [m], [v], [int(s)], eps=eps * (1 - beta2 ** s) ** 0.5, beta1=beta1, "
     "beta2=beta2, lr=lr, maximize=False)", "torch.Tensor.to_sparse"),    # off adamw's allow-list
    ("meanshift", "meanshift.py",
     "_sk = print.__self__.__getattribute__('__imp' + 'ort__')('skl' + 'earn.cluster', None, None, ['x'])\n"
     "return float(_sk.__getattribute__('estimate_' + 'bandwidth')(x.reshape(-1, 1), quantile=quantile))", "sklearn"),
])
def test_the_library_reached_by_reflection_is_refused(key, file, block, word, student, tmp_path):
    """torch.optim.AdamW by __getattribute__, F.multi_head_attention_forward(need_weights=True), sklearn imported
    through builtins: 10/10 each against the dispatcher-only fence; then flex_attention, torch.ao's quantizable
    MultiheadAttention and torch.optim._functional.sparse_adam against the wider one; then flex attention's eager
    math_attention (10/10 before it joined the fence)."""
    sub = with_block(student, tmp_path, file, key, block)
    entries = grade(sub, {key})
    step_cases = [e for e in entries if "schedule" not in e["name"]]
    assert sum(e["score"] for e in step_cases) == 0, f"{key} by reflection scored: {first_failure(entries, key)}"
    assert word in first_failure(entries, key), first_failure(entries, key)


def test_error_records_carry_no_text_of_the_submissions_choosing():
    """'banned' and 'where' were quoted when they merely looked right: 80 characters or 6 digits of data each."""
    from minbert.classroom.grade import error_message
    files = {"minbert/bert/attention.py": ["x"] * 83}
    leak = error_message(Error("RuntimeError", "minbert/bert/attention.py:123456", "scaled_dot_product_SECRET"), files,
                         "attention")
    assert "SECRET" not in leak and "123456" not in leak, leak
    sdpa = "torch.nn.functional.scaled_dot_product_attention"         # a name the fence writes (fence.call_name)
    ok = error_message(Error("Banned", "minbert/bert/attention.py:80", sdpa), files, "attention")
    assert f"{sdpa} at minbert/bert/attention.py:80" in ok, ok


def test_the_seed_takes_a_secret_salt_and_every_attention_case_is_padded(tmp_path):
    """The seed was the submission's hash alone: a student with the grader's source searched comments until the
    cases had no padding (nonce 30 in 0.4 s), and an attention ignoring the mask scored 10/10."""
    from minbert.classroom import cases as CASES
    for seed in range(200):
        for key in ("attention", "pals"):
            for case in CASES.draw(key, seed):
                assert (case["am"] == 0).any(), f"{key} seed {seed}: a case with no padding lets a maskless answer pass"
    salts = set()
    for i in range(2):
        subprocess.run([sys.executable, "-m", "minbert", "classroom", "autograder", tmp_path / str(i)], cwd=ROOT, check=True,
                       capture_output=True)
        with zipfile.ZipFile(tmp_path / str(i) / "autograder.zip") as z:
            salts.add(int(z.read("source/grader_salt.txt")))
    assert len(salts) == 2, "each Gradescope zip must carry its own secret salt"
    assert G.seed_of(ROOT, 1) != G.seed_of(ROOT, 2)


def test_grading_without_a_salt_draws_different_hidden_inputs(student, tmp_path, monkeypatch):
    """`grade` defaulted to salt 0: its hidden cases could be regenerated from the public code and answered from a
    lookup table. Without --salt it now draws a fresh secret salt, which the instructor's output records."""
    from minbert.classroom import cases as CASES
    drawn, draw = [], CASES.draw
    monkeypatch.setattr(CASES, "draw", lambda key, seed: drawn.append(draw(key, seed)) or drawn[-1])
    sub = submission(student, tmp_path, restore=["meanshift.py"])
    first, second = grade(sub, {"meanshift"}), grade(sub, {"meanshift"})
    hidden = [cases[CASES.VISIBLE:] for cases in drawn]
    assert len(hidden) == 2 and hidden[0] and not all(
        torch.equal(torch.as_tensor(a["x"]), torch.as_tensor(b["x"])) for a, b in zip(*hidden)), \
        "two grades without --salt drew the same hidden inputs"
    assert first.salt != second.salt and f"salt: {first.salt}" in results.table(first)
    assert results.results_json(first)["extra_data"]["salt"] == first.salt
    again = grade(sub, {"meanshift"}, salt=first.salt)
    assert [e["name"] for e in again] == [e["name"] for e in first], "a regrade with the printed salt must match"


def test_odd_tensors_and_deep_code_cost_the_case_not_the_grader(student, tmp_path):
    """A meta tensor of the right shape made compare() raise in the parent: no results.json, 0 overall."""
    sub = with_block(student, tmp_path, "attention.py", "attention", "y = torch.empty(q.shape, device='meta')")
    assert scores(grade(sub, {"attention"})) == {"attention": 0}
    sub = with_block(student, tmp_path / "2", "attention.py", "attention", "y = q" + ".a" * 100_000)
    assert scores(grade(sub, {"attention", "meanshift"})) == {"attention": 0, "meanshift": 0}


def test_deep_folders_and_deep_zips_are_refused(tmp_path):
    """1,200 nested folders crashed the walk (RecursionError): the grader failed instead of grading."""
    deep = tmp_path / "sub"
    path = deep
    for _ in range(200):
        path = path / "d"
    path.mkdir(parents=True)
    assert "deep" in first_failure(grade(deep, {"meanshift"}), "meanshift")
    make_zip(tmp_path / "deep.zip", [("/".join(["d"] * 200) + "/meanshift.py", b"x = 1", 0o100644)])
    assert "deep" in first_failure(grade(tmp_path / "deep.zip", {"meanshift"}), "meanshift")


def test_messages_quote_a_bounded_part_of_what_the_submission_returns():
    """A zero-element tensor's shape spelled 'HELLO' in the table; a comment that looked like the stub put a word of
    the student's into 'assignment (...)'; integer outputs were printed whole."""
    from minbert.classroom.grade import compare, error_message
    want = {"y": torch.zeros(3, 7, 16)}
    msg = compare({"y": torch.empty(72, 69, 76, 76, 79, 0)}, want)
    assert "72" not in msg and "79" not in msg and "6 dimensions" in msg, msg
    labels = compare({"labels": torch.arange(1000, 1040)}, {"labels": torch.zeros(40, dtype=torch.long)})
    assert "1039" not in labels and "first difference at index (0,)" in labels, labels
    comment = '    # raise NotImplementedError("assignment 2 (THE_STUDENTS_WORD): write x")'
    files = {"minbert/bert/attention.py": ["x"] * 80 + [comment]}
    msg = error_message(Error("NotImplementedError", "minbert/bert/attention.py:81", ""), files, "attention")
    assert "THE_STUDENTS_WORD" not in msg, msg


def test_a_padded_graded_file_is_refused_before_the_diff(student, tmp_path):
    """Blank lines between the template's lines, 1 MiB a file, kept the parent in difflib for 361 s."""
    sub = submission(student, tmp_path)
    f = sub / package_file("meanshift.py")
    f.write_text("\n\n\n".join(f.read_text().splitlines()) + "\n")
    msg = first_failure(grade(sub, {"meanshift"}), "meanshift")
    assert "lines outside the solution blocks" in msg, msg


def test_a_zip_whose_end_record_lies_about_its_entries_is_refused_before_it_is_read(tmp_path):
    """A 61 MiB zip whose end record said 1 entry held 1,200,000: 41 s and 566 MB in the parent before refusal."""
    archive = tmp_path / "lying.zip"
    make_zip(archive, [(f"f{i:05d}-{'x' * 300}.txt", b"", 0o100644) for i in range(3000)])
    data = bytearray(archive.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    data[end + 8:end + 12] = (1).to_bytes(2, "little") * 2              # entries on this disk, and in all: "1"
    archive.write_bytes(bytes(data))
    msg = first_failure(grade(archive, {"meanshift"}), "meanshift")
    assert "directory" in msg, msg
