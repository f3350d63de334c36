"""A grade's cleanup (minbert/classroom/cleanup.py): folders removed without recursion or links followed, signals
taken as Ctrl-C, worker threads stopped before their folder goes.

Oracles: (c) properties checked on the file system itself: after remove_tree the folder is absent and everything
a link in it pointed to is byte-for-byte unchanged; a 1,500-deep chain is removed by a process allowed 16 open
files (shutil.rmtree, the reference that failed, raised RecursionError on it in Python 3.11); a signal raises
Stopped once, a second is ignored, one inside a shielded step is raised when the guard ends, and the previous
handlers are back afterwards.
"""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from minbert.classroom import cleanup
from minbert.classroom.cleanup import Stopped, remove_tree

ROOT = Path(__file__).resolve().parents[2]


def chain(top: Path, depth: int) -> None:
    """`depth` nested folders under `top`, made through folder descriptors (the path would pass PATH_MAX)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = sub
    with open(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
        f.write("the bottom")
    os.close(fd)


def test_a_1500_deep_chain_is_removed_with_16_open_files_allowed(tmp_path):
    """The box's 1,500-deep chain made the cleanup's shutil.rmtree raise RecursionError: traceback, no results.json,
    the box's files on disk. remove_tree walks with a stack of names and holds one or two folders open at a time."""
    top = tmp_path / "box"
    top.mkdir()
    chain(top, 1500)
    script = ("import resource, sys; sys.path.insert(0, sys.argv[2])\n"
              "from minbert.classroom.cleanup import remove_tree\n"
              "resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))\n"
              "remove_tree(sys.argv[1])\n")
    r = subprocess.run([sys.executable, "-c", script, str(top), str(ROOT)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"remove_tree failed on a 1,500-deep chain with 16 files allowed:\n{r.stderr[-1500:]}"
    assert not top.exists() and list(tmp_path.iterdir()) == [], "the chain was not removed"


def test_links_are_removed_as_names_and_never_followed(tmp_path):
    """A box's folder holding links to the instructor's files: removing the box must not remove what they name."""
    outside = tmp_path / "instructor"
    (outside / "folder").mkdir(parents=True)
    (outside / "folder" / "solution.py").write_text("SOLUTION = 42\n")
    (outside / "grade.py").write_text("GRADER = 1\n")
    box = tmp_path / "box"
    (box / "sub").mkdir(parents=True)
    (box / "to_folder").symlink_to(outside / "folder")
    (box / "sub" / "to_file").symlink_to(outside / "grade.py")
    (box / "sub" / "dangling").symlink_to(tmp_path / "nowhere")
    (box / "sub" / "loop").symlink_to(box / "sub")
    os.link(outside / "grade.py", box / "hard_link.py")
    os.mkfifo(box / "sub" / "fifo")
    chain(box / "sub", 40)
    remove_tree(box)
    assert not box.exists()
    assert (outside / "folder" / "solution.py").read_text() == "SOLUTION = 42\n"
    assert (outside / "grade.py").read_text() == "GRADER = 1\n" and (outside / "grade.py").stat().st_nlink == 1
    remove_tree(box)                                      # already gone: nothing to do, no error
    (tmp_path / "link").symlink_to(outside)
    remove_tree(tmp_path / "link")                        # a link given as the top is removed, not entered
    assert not (tmp_path / "link").is_symlink() and (outside / "grade.py").exists()


@pytest.mark.slow
def test_100000_files_and_a_deep_chain_are_removed(tmp_path):
    top = tmp_path / "flood"
    (top / "wide").mkdir(parents=True)
    for i in range(100_000):
        os.close(os.open(top / "wide" / str(i), os.O_WRONLY | os.O_CREAT, 0o644))
    chain(top, 1500)
    remove_tree(top)
    assert not top.exists()


def test_folders_their_owner_closed_are_removed_by_that_owner(tmp_path):
    """In a self-check the box is the grader's own user: it can chmod its folders 000 or 500 before it ends."""
    top = Path(tempfile.mkdtemp(prefix="minbert-test-"))
    try:
        (top / "closed" / "deeper").mkdir(parents=True)
        (top / "closed" / "deeper" / "f").write_text("x")
        (top / "read_only").mkdir()
        (top / "read_only" / "g").write_text("y")
        (top / "read_only").chmod(0o500)
        (top / "closed" / "deeper").chmod(0o000)
        (top / "closed").chmod(0o000)
        if os.geteuid() == 0:                              # root passes every mode check: be an ordinary user
            nobody = 65534
            for p in (top, *[Path(d) / n for d, ds, fs in os.walk(top) for n in ds + fs]):
                os.chown(p, nobody, nobody)
            top.chmod(0o755)
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    os.setgroups([])
                    os.setgid(nobody)
                    os.setuid(nobody)
                    remove_tree(top)
                    status = 0
                finally:
                    os._exit(status)
            assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "remove_tree failed as the folders' owner"
        else:
            remove_tree(top)
        assert not top.exists()
    finally:
        if top.exists():
            subprocess.run(["chmod", "-R", "u+rwx", str(top)])
            remove_tree(top)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_raises_stopped_once_and_a_second_cannot_cut_the_cleanup_short(signum):
    before = signal.getsignal(signum)
    done = []
    with pytest.raises(Stopped) as e:
        with cleanup.signals_as_interrupts():
            try:
                os.kill(os.getpid(), signum)
                time.sleep(30)                            # interrupted at once
                done.append("not stopped")
            finally:
                os.kill(os.getpid(), signum)              # the second: ignored, the cleanup goes on
                done.append("cleaned up")
    assert e.value.signum == signum and isinstance(e.value, KeyboardInterrupt) and done == ["cleaned up"]
    assert signal.getsignal(signum) == before, "the previous handler must be put back"


def test_a_signal_during_a_shielded_step_is_raised_when_the_guard_ends():
    steps = []
    with pytest.raises(Stopped) as e:
        with cleanup.signals_as_interrupts() as guard:
            with guard.shielded():
                os.kill(os.getpid(), signal.SIGTERM)
                steps.append("removed the folder")
            steps.append("after the step")
    assert e.value.signum == signal.SIGTERM and steps == ["removed the folder", "after the step"]


def test_stopping_the_tasks_waits_for_the_running_one_and_starts_no_other():
    tasks, started, release = cleanup.Tasks(), threading.Event(), threading.Event()
    ran = []

    def box(name):
        started.set()
        release.wait(30)
        ran.append(name)
        return [name]
    worker = threading.Thread(target=tasks.run, args=(box, "running"))
    worker.start()
    assert started.wait(30)
    stopper = threading.Thread(target=tasks.stop)
    stopper.start()
    time.sleep(0.2)
    assert stopper.is_alive(), "stop() returned while a task was still running"
    release.set()
    stopper.join(30)
    worker.join(30)
    assert not stopper.is_alive() and ran == ["running"]
    assert tasks.run(box, "late") == [] and ran == ["running"], "a task started after stop()"


def test_a_sweep_removes_what_an_owner_no_longer_running_left_and_keeps_a_running_ones(tmp_path, monkeypatch):
    """Names carry their owner's pid and start time: a folder of a process that ended goes, one naming this process
    stays, and one naming this pid with another start time (the pid reused since) goes."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.run([sys.executable, "-c", "from minbert.classroom import cleanup; print(cleanup.owner())"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    mine = cleanup.owner()
    names = {"ended": f"minbert-grade-{ended}-x", "reused": f"minbert-box-root-{os.getpid()}-1-x",
             "mine": f"minbert-grade-{mine}-x", "other": "unrelated-123-456-x"}
    for name in names.values():
        (tmp_path / name).mkdir()
        chain(tmp_path / name, 3)
    made = cleanup.folder("grade")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names["mine"], names["other"], made.name]), \
        "the sweep removed a running owner's folder, or kept one whose owner ended"
    assert made.name.startswith(f"minbert-grade-{mine}-")
