"""The box a submission runs in: a separate user, fresh namespaces, a whitelist root, limits, a deadline.

A submission is arbitrary Python, run at grading time. Names can be hidden from an AST check
(`torch.__getattribute__("os")`), so the security lives here, in the operating system, as in IOI's
`isolate` (CMS, Judge0) and PrairieLearn's external grader. Per child process, as root:

    1. namespaces   unshare(PID | mount | network | IPC | UTS): the child is PID 1 of its own PID
                    namespace, so when it ends the kernel kills every process it started (a forked,
                    setsid() daemon included); the network namespace has no interface but a down loopback.
    2. a new root   a small tmpfs holding read-only bind mounts of what Python and torch need (the
                    interpreter's prefixes, the virtual environment, /usr, a few /etc files, /dev/null,
                    /dev/urandom), the box's own read-only job folder (/box: the template with the
                    submission laid over, the glue, the inputs), a fresh /proc and a size-capped /tmp;
                    then chroot. The instructor's checkout, Gradescope's source/ and results/, other
                    submissions and the grader's temporary folders are not in that tree at all.
    3. a user       a random unused uid/gid (no passwd entry needed), no supplementary groups,
                    no_new_privs: nothing in the tree is writable by it but /tmp.
    4. limits       a control group (memory, pids) where the kernel offers one (v2 or v1), and always
                    rlimits: address space, processes, file size, open files, CPU seconds, no core files.
    5. a deadline   the parent reads the child's output and its results pipe with a wall-clock deadline
                    and byte caps, kills the box when either is passed, and checks that no process of
                    the box's uid is left before it reads the results.

Where namespaces or root are missing, `run` still runs the child (same user, rlimits, process group,
deadline, caps) and says `isolated=False`: the grade is then a self-check, not authoritative.

This file is also the launcher: `python -I sandbox.py SPEC_JSON` runs as root, sets the box up and
execs the child. That part uses the standard library only.
"""

import ctypes
import json
import os
import random
import resource
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
UID_BASE, UID_SPAN = 1_500_000_000, 1 << 24      # box users: far above any real account
NO_NAMESPACES = 97                                # the launcher's exit status when unshare is refused


@dataclass
class Limits:
    wall_s: float = 60.0                 # the parent's deadline, whatever the child does with its pipes
    memory_mb: int = 4096                # cgroup memory (and the rlimit on address space, per process)
    processes: int = 64                  # cgroup pids and RLIMIT_NPROC (threads count)
    file_mb: int = 64                    # RLIMIT_FSIZE: the largest file it may write (in its /tmp)
    tmp_mb: int = 64                     # the size of its /tmp
    open_files: int = 256
    log_bytes: int = 1 << 20             # printed output past this kills the box
    result_bytes: int = 4 << 20          # the results pipe past this kills the box (real outputs: < 20 KiB)
    cpus: float = 1.0                    # cgroup CPU quota: a box cannot starve the one graded beside it


@dataclass
class Outcome:
    status: int | None                   # the child's exit status, None when killed by the parent
    log: bytes                           # stdout and stderr together, at most Limits.log_bytes
    result: bytes                        # what the child wrote to fd 3
    why: str = ""                        # '' or why the box was stopped (deadline, output cap)
    isolated: bool = False
    layers: list = field(default_factory=list)


# ---------------------------------------------------------------------- what the parent can have

def isolation_available() -> tuple[bool, str]:
    """(True, '') when this process can build boxes, else (False, why)."""
    if not sys.platform.startswith("linux"):
        return False, f"namespaces are Linux's; this is {sys.platform}"
    if os.geteuid() != 0:
        return False, "the grader runs as an ordinary user (root is needed to start a box as another user)"
    r = subprocess.run([sys.executable, "-I", __file__, "--probe"], capture_output=True, text=True, timeout=60)
    if r.returncode:
        return False, (r.stdout + r.stderr).strip().splitlines()[-1] if (r.stdout + r.stderr).strip() else \
            f"the namespace probe exited {r.returncode}"
    return True, ""


def _cgroups() -> list[tuple[str, dict]]:
    """[(a new control group's folder, {file: value})], v2 where it is mounted with memory and pids, else v1."""
    base, name = Path("/sys/fs/cgroup"), f"minbert-box-{os.getpid()}-{random.getrandbits(32):08x}"
    groups = []
    try:
        if (base / "cgroup.controllers").exists():
            wanted = set((base / "cgroup.subtree_control").read_text().split()) & {"memory", "pids"}
            if wanted:
                groups.append((str(base / name), {"memory.max": "MEM", "memory.swap.max": "0", "pids.max": "PIDS",
                                                  "cpu.max": "CPU 100000"}))
        else:
            if os.access(base / "memory", os.W_OK):
                groups.append((str(base / "memory" / name), {"memory.limit_in_bytes": "MEM"}))
            if os.access(base / "pids", os.W_OK):
                groups.append((str(base / "pids" / name), {"pids.max": "PIDS"}))
            if os.access(base / "cpu", os.W_OK):
                groups.append((str(base / "cpu" / name), {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "CPU"}))
    except OSError:
        return []
    return groups


def make_cgroups(limits: Limits) -> list[str]:
    made = []
    for path, settings in _cgroups():
        try:
            os.mkdir(path)
            made.append(path)
            for f, v in settings.items():
                v = v.replace("MEM", str(limits.memory_mb << 20)).replace("PIDS", str(limits.processes)) \
                    .replace("CPU", str(int(limits.cpus * 100000)))
                try:
                    Path(path, f).write_text(v)
                except OSError:
                    if f not in ("memory.swap.max", "cpu.max"):      # not offered: nothing to cap there
                        raise
        except OSError:
            continue
    return made


def controller(group: str) -> str:
    """'memory', 'pids' or 'cpu' for a v1 group's folder; 'v2' for a unified one."""
    parent = Path(group).parent.name
    return "v2" if parent == "cgroup" else parent


def remove_cgroups(paths: list[str]):
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


def runtime_paths() -> list[str]:
    """What the child's Python needs read-only: the interpreter's prefixes and the folders on sys.path
    that are not the instructor's (the checkout itself is never mounted; a venv inside it is)."""
    keep = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    keep |= {p for p in sys.path if p and os.path.isdir(p) and ("site-packages" in p or "dist-packages" in p)}
    out = []
    for p in sorted(os.path.realpath(k) for k in keep):
        if not any(p == o or p.startswith(o + "/") for o in out):
            out.append(p)
    return out


def processes_of(uid: int) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    found.append(int(d))
            except OSError:
                pass
    return found


def kill_user(uid: int, rounds: int = 200) -> bool:
    """SIGKILL every process of the box's uid until none is left; True when none is."""
    for _ in range(rounds):
        pids = processes_of(uid)
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    return not processes_of(uid)


def free_uid() -> int:
    while True:
        uid = UID_BASE + random.randrange(UID_SPAN)
        if not processes_of(uid):
            return uid


def run(argv: list[str], env: dict, box: dict, limits: Limits, isolate: bool) -> Outcome:
    """Run argv in a box. `box` maps the paths the child sees under /box to folders of the parent's
    (mounted read-only). The child gets fd 3 for its results. With isolate=False: same user, no namespaces."""
    uid = free_uid() if isolate else None
    cgroups = make_cgroups(limits) if isolate else []
    if not {"memory", "v2"} & {controller(c) for c in cgroups}:
        # no memory control group: the address-space rlimit is per process, so allow fewer, smaller ones
        limits = Limits(**{**limits.__dict__, "processes": min(limits.processes, 16),
                           "memory_mb": min(limits.memory_mb, 2048)})
    log_r, log_w = os.pipe()
    res_r, res_w = os.pipe()
    spec = {"argv": argv, "env": env, "box": box, "isolate": isolate, "uid": uid, "runtime": runtime_paths(),
            "cgroups": cgroups, "limits": limits.__dict__, "results_fd": res_w}
    proc = subprocess.Popen([sys.executable, "-I", __file__, json.dumps(spec)], stdin=subprocess.DEVNULL,
                            stdout=log_w, stderr=log_w, pass_fds=(res_w,), start_new_session=True, env={})
    os.close(log_w)
    os.close(res_w)
    chunks, why = {log_r: [], res_r: []}, ""
    caps = {log_r: limits.log_bytes, res_r: limits.result_bytes}
    sizes = {log_r: 0, res_r: 0}
    deadline = time.monotonic() + limits.wall_s
    sel = selectors.DefaultSelector()
    for fd in (log_r, res_r):
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                why = (f"timed out after {limits.wall_s:g} s (an infinite loop, or far too slow?); this assignment "
                       "scores 0, the others are graded as usual")
                break
            for key, _ in sel.select(timeout=min(left, 0.5)):
                data = os.read(key.fd, 1 << 16)
                if not data:
                    sel.unregister(key.fd)
                    continue
                sizes[key.fd] += len(data)
                if sizes[key.fd] > caps[key.fd]:
                    what = "printed" if key.fd == log_r else "wrote as results"
                    why = f"stopped: the code {what} more than {caps[key.fd] >> 10} KiB"
                    break
                chunks[key.fd].append(data)
            if why:
                break
            if proc.poll() is not None and not isolate:
                deadline = min(deadline, time.monotonic() + 2.0)   # a grandchild may hold the pipes: 2 s more
    finally:
        sel.close()
        _stop(proc)
        status = proc.wait()
        left_over = (not kill_user(uid)) if isolate else False
        remove_cgroups(cgroups)
        os.close(log_r)
        os.close(res_r)
    if left_over:
        why = why or "processes of the box were still running after it ended"
    if status == NO_NAMESPACES and isolate and not why:
        why = "the sandbox could not be built: " + b"".join(chunks[log_r]).decode(errors="replace").strip()[-300:]
    layers = []
    if isolate:
        layers = ["a separate user", "PID, mount, network, IPC and UTS namespaces", "a whitelist root (chroot)",
                  "rlimits"] + (["control groups (" + ", ".join(controller(c) for c in cgroups) + ")"] if cgroups else
                                ["no control group (memory capped per process: 16 processes of 2 GiB)"])
    return Outcome(None if why else status, b"".join(chunks[log_r]), b"".join(chunks[res_r]), why, isolate, layers)


def _stop(proc):
    """Kill the launcher (its box dies with it: parent-death signal, then the PID namespace) and its group."""
    for target in (lambda: os.killpg(proc.pid, signal.SIGKILL), lambda: proc.kill()):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


# ---------------------------------------------------------------------- the launcher (runs as root)

def _libc():
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result, what):
        if result != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")
    return libc, check


def _mount(libc, check, src, dst, fstype, flags, data=None):
    check(libc.mount(src and src.encode(), dst.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                     data and data.encode()), f"mount {src} on {dst}")


def _bind(libc, check, src, dst, writable=False):
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        open(dst, "a").close()
    _mount(libc, check, src, dst, None, MS_BIND | MS_REC)
    flags = MS_BIND | MS_REMOUNT | MS_NOSUID | (0 if writable else MS_RDONLY)
    flags |= 0 if src.startswith("/dev/") else MS_NODEV
    _mount(libc, check, None, dst, None, flags)


def _new_root(libc, check, spec) -> str:
    """Build the whitelist tree on a tmpfs and return its path (in the launcher's private mount namespace)."""
    _mount(libc, check, None, "/", None, MS_REC | MS_PRIVATE)     # nothing below propagates to the host
    root = "/run/minbert-box" if os.path.isdir("/run") else "/tmp/minbert-box"
    os.makedirs(root, exist_ok=True)
    _mount(libc, check, "tmpfs", root, "tmpfs", MS_NOSUID, "size=1m,mode=755")
    # /tmp and /proc first: a runtime folder that lives under /tmp (a venv in a clone there) is bound after, inside
    os.makedirs(root + "/tmp", exist_ok=True)
    _mount(libc, check, "tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={spec['limits']['tmp_mb']}m,mode=1777")
    os.makedirs(root + "/proc", exist_ok=True)
    _mount(libc, check, "proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for top in ("/bin", "/lib", "/lib32", "/lib64", "/sbin"):         # merged-/usr links, or folders to bind
        if os.path.islink(top):
            os.symlink(os.readlink(top), root + top)
        elif os.path.isdir(top):
            _bind(libc, check, top, root + top)
    _bind(libc, check, "/usr", root + "/usr")
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd", "/etc/group",
              "/etc/nsswitch.conf"):
        if os.path.isfile(f):
            _bind(libc, check, f, root + f)
    for d in spec["runtime"]:
        if not os.path.exists(root + d):
            _bind(libc, check, d, root + d)
    for dev in ("null", "zero", "urandom", "random"):
        _bind(libc, check, "/dev/" + dev, f"{root}/dev/{dev}", writable=dev == "null")
    for inside, outside in spec["box"].items():
        _bind(libc, check, outside, root + "/box/" + inside)
    _mount(libc, check, None, root, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    return root


def _limit(limits, isolate):
    mb = 1 << 20
    for what, value in ((resource.RLIMIT_AS, limits["memory_mb"] * mb), (resource.RLIMIT_FSIZE, limits["file_mb"] * mb),
                        (resource.RLIMIT_NOFILE, limits["open_files"]), (resource.RLIMIT_CORE, 0),
                        (resource.RLIMIT_CPU, int(limits["wall_s"]) + 5)):
        resource.setrlimit(what, (value, value))
    if isolate:                                   # per uid: a box's own user counts only its own processes
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))


def launch(spec: dict):
    libc, check = _libc()
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")   # the grader dies: so does the box
    fd = spec["results_fd"]
    if spec["isolate"]:
        try:
            check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        except OSError as e:
            print(f"namespaces refused: {e}", flush=True)
            os._exit(NO_NAMESPACES)
        pid = os.fork()
        if pid:                                   # the launcher: wait for the box's PID 1, pass on its status
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")
        for group in spec["cgroups"]:
            Path(group, "cgroup.procs").write_text(str(os.getpid()))
        root = _new_root(libc, check, spec)
        os.chroot(root)
        os.chdir("/tmp")
        uid = spec["uid"]
        _limit(spec["limits"], True)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")   # cleared by setuid: again
    else:
        _limit(spec["limits"], False)
        os.chdir(spec["box"]["job"])
    if fd != 3:
        os.dup2(fd, 3)
        os.close(fd)
    os.set_inheritable(3, True)
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


def probe():
    """Exit 0 when a box can be built here: unshare, fork, mount and chroot in a throwaway namespace."""
    libc, check = _libc()
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    pid = os.fork()
    if pid == 0:
        try:
            _mount(libc, check, None, "/", None, MS_REC | MS_PRIVATE)
            _mount(libc, check, "tmpfs", "/tmp", "tmpfs", MS_NOSUID, "size=1m")
            os._exit(0)
        except OSError as e:
            print(e, flush=True)
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        try:
            probe()
        except OSError as e:
            print(f"namespaces refused: {e}")
            sys.exit(1)
    launch(json.loads(sys.argv[1]))
