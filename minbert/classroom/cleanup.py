"""A grade's cleanup, whatever ends the grade: folders removed without recursion or following a link, what a grader
killed with SIGKILL left swept by the next, SIGTERM and SIGHUP taken as Ctrl-C so that every `finally` runs.
Why (shutil.rmtree recurses per level before Python 3.13; Python's SIGTERM skips every `finally`): docs/classroom.md.
"""

import errno
import os
import re
import signal
import stat
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class Stopped(KeyboardInterrupt):
    """A signal ended the grade: handled wherever Ctrl-C is, so the same cleanup runs."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class Guard:
    """What signals_as_interrupts yields: `shielded()` around cleanup steps, so that a signal arriving during
    them waits until the guard ends instead of cutting them short."""

    def __init__(self):
        self.fired, self.raised, self.depth = None, False, 0

    @contextmanager
    def shielded(self):
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


@contextmanager
def signals_as_interrupts():
    """Inside: the first of SIGTERM, SIGHUP and SIGINT raises Stopped in the main thread (or, arriving inside
    `guard.shielded()`, when the guard ends); later ones are ignored, so that a second Ctrl-C or a scheduler's repeated
    SIGTERM cannot cut the cleanup short. Outside a main thread nothing changes (Python runs handlers there only)."""
    guard = Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return

    def handler(signum, frame):
        if guard.fired is None:
            guard.fired = signum
            if not guard.depth:
                guard.raised = True
                raise Stopped(signum)
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        yield guard
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if guard.fired is not None and not guard.raised:
        raise Stopped(guard.fired)


class Tasks:
    """The work a grade hands to its worker threads: `run` starts nothing once `stop` was called, and `stop`
    returns only when no task runs (a worker whose start a signal interrupted included), so the grade's folder
    is removed after the last box is gone, never under one."""

    def __init__(self):
        self.cv, self.running, self.stopped = threading.Condition(), 0, False

    def run(self, fn, *args, **kwargs):
        with self.cv:
            if self.stopped:
                return []
            self.running += 1
        try:
            return fn(*args, **kwargs)
        finally:
            with self.cv:
                self.running -= 1
                self.cv.notify_all()

    def stop(self):
        with self.cv:
            self.stopped = True
            self.cv.wait_for(lambda: self.running == 0)


def _started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat), or '' when there is none."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner() -> str:
    """'<pid>-<start>' of this process: what the names of its folders and control groups carry."""
    return f"{os.getpid()}-{_started(os.getpid())}"


CGROUPS = ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu")
_OWNED = re.compile(r"minbert-(?:grade|box-root|box)-(\d+)-(\d+)-")


def sweep():
    """Remove the temporary folders and control groups whose owner (named in them) no longer runs."""
    for where, remove in [(tempfile.gettempdir(), remove_tree)] + [(c, lambda p: remove_cgroups([p])) for c in CGROUPS]:
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            m = _OWNED.match(name)
            if m and _started(int(m[1])) != m[2]:
                try:
                    remove(os.path.join(where, name))
                except OSError:
                    pass                            # another user's, or going: the next sweep looks again


def remove_cgroups(paths: list[str]):
    """Remove control groups, killing the processes still in them first."""
    for path in paths:
        for _ in range(100):
            try:
                procs = Path(path, "cgroup.procs").read_text().split()
            except OSError:
                break
            for pid in procs:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            try:
                os.rmdir(path)
                break
            except OSError:
                time.sleep(0.02)


def folder(kind: str) -> Path:
    """A new temporary folder `minbert-<kind>-<owner>-…`, made after a sweep."""
    sweep()
    return Path(tempfile.mkdtemp(prefix=f"minbert-{kind}-{owner()}-"))


def remove_tree(path) -> None:
    """Remove `path` (a folder and everything under it, or a single file or link); nothing if it is not there.
    Raises OSError when something cannot be removed (a folder moved during the walk, a file marked immutable)."""
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
    except FileNotFoundError:
        return
    base = os.open(parent, _FOLDER)
    fd = None
    try:
        fd = _enter(base, name)
        # per folder, top first: its name in its parent, inode, subfolders
        stack = [[name, os.fstat(fd).st_ino, None]]
        while stack:
            frame = stack[-1]
            if frame[2] is None:
                frame[2] = _clear(fd)             # its files and links removed; its subfolders to walk
            if frame[2]:
                sub = frame[2].pop()
                try:
                    child = _enter(fd, sub)
                except FileNotFoundError:
                    continue
                os.close(fd)
                fd = child
                stack.append([sub, os.fstat(fd).st_ino, None])
                continue
            frame[2] = _clear(fd)                 # empty? (a second look: entries a scan may have skipped)
            if frame[2]:
                continue
            stack.pop()
            if not stack:
                os.close(fd)
                fd = None
                os.rmdir(name, dir_fd=base)
                break
            up = os.open("..", _FOLDER, dir_fd=fd)
            if os.fstat(up).st_ino != stack[-1][1]:
                os.close(up)
                raise OSError(errno.ESTALE, "a folder was moved while it was being removed", frame[0])
            os.close(fd)
            fd = up
            os.rmdir(frame[0], dir_fd=fd)
    finally:
        if fd is not None:
            os.close(fd)
        os.close(base)


def _enter(parent_fd: int, name: str) -> int:
    """Open the folder `name` of `parent_fd` without following a link; a folder its owner closed to itself (a
    self-check, where the box is the grader's own user) is opened up first. Root needs no such step."""
    try:
        fd = os.open(name, _FOLDER | os.O_NOFOLLOW, dir_fd=parent_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent_fd)
        fd = os.open(name, _FOLDER | os.O_NOFOLLOW, dir_fd=parent_fd)
    mode = os.fstat(fd).st_mode
    if mode & 0o700 != 0o700:
        os.fchmod(fd, stat.S_IMODE(mode) | 0o700)  # to remove its entries, its owner needs write and search
    return fd


def _clear(fd: int) -> list[str]:
    """Unlink every entry of the open folder `fd` that is not a folder (files, links, fifos: never followed);
    return the names of its subfolders."""
    subfolders = []
    with os.scandir(fd) as entries:
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                subfolders.append(e.name)
            else:
                try:
                    os.unlink(e.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
    return subfolders
