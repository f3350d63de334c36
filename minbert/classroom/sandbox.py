"""The box a submission runs in: a separate user, fresh namespaces, a whitelist root, limits, a deadline, at the
strongest of LEVELS the machine grants (docs/classroom.md, The sandbox). Also the launcher: `python -I sandbox.py
SPEC_JSON` runs as root, sets the box up and execs the child (the standard library only).
"""

import ctypes
import importlib
import json
import os
import random
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2
CLONE_THREAD = 0x00010000
SYSCALLS = {                                      # (AUDIT_ARCH_*, the numbers the seccomp filter names)
    "x86_64": (0xC000003E, {"socket": 41, "clone": 56, "fork": 57, "vfork": 58, "clone3": 435, "io_uring_setup": 425,
                            "shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240, "add_key": 248,
                            "request_key": 249, "keyctl": 250}),
    "aarch64": (0xC00000B7, {"socket": 198, "clone": 220, "clone3": 435, "io_uring_setup": 425, "shmget": 194,
                             "semget": 190, "msgget": 186, "mq_open": 180, "add_key": 217, "request_key": 218,
                             "keyctl": 219}),
}
UID_BASE, UID_SPAN = 1_500_000_000, 1 << 24      # box users: far above any real account
NO_NAMESPACES = 97                                # the launcher's exit status when unshare is refused
EXPOSED = 96                                      # ... when the box's user could open an instructor's file
LEVELS = ("self-check", "user+chroot", "namespaces")     # weakest first


@dataclass
class Limits:
    wall_s: float = 60.0                 # the parent's deadline, whatever the child does with its pipes
    memory_mb: int = 4096                # RLIMIT_AS, and the memory control group where there is one: the box is
                                         # one process (seccomp refuses fork), so this is the box's whole budget
    threads: int = 64                    # RLIMIT_NPROC (it counts threads) and the pids control group
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
    layers: list = field(default_factory=list)


def _classroom(name: str):
    """box_root or cleanup, imported when used (by name: this file is also run as a script)."""
    return importlib.import_module(f"minbert.classroom.{name}")


# ---------------------------------------------------------------------- what the parent can have

def isolation_available() -> tuple[str, str]:
    """(the strongest level in LEVELS this process can build, why not a stronger one)."""
    if not sys.platform.startswith("linux"):
        return "self-check", f"namespaces and other users are Linux's; this is {sys.platform}"
    if os.geteuid() != 0:
        return "self-check", "the grader runs as an ordinary user (root is needed to start a box as another user)"
    def refused(*args) -> str:
        r = subprocess.run([sys.executable, "-I", __file__, *args], capture_output=True, text=True, timeout=60)
        lines = (r.stdout + r.stderr).strip().splitlines()
        return "" if r.returncode == 0 else lines[-1] if lines else f"the probe exited {r.returncode}"
    why = refused("--probe")
    if not why:
        return "namespaces", ""
    uid = free_uid()
    try:
        why_not = refused("--probe-chroot", str(uid))
    finally:
        release_uid(uid)
    return ("self-check", why + "; no separate user in a chroot: " + why_not) if why_not else ("user+chroot", why)


def make_cgroups(limits: Limits) -> list[str]:
    """The box's new control groups: v2 where it is mounted with memory and pids, else v1's writable hierarchies."""
    base, name = Path("/sys/fs/cgroup"), f"minbert-box-{_classroom('cleanup').owner()}-{random.getrandbits(32):08x}"
    mem, pids, cpu, groups = str(limits.memory_mb << 20), str(limits.threads), str(int(limits.cpus * 100000)), []
    try:
        if (base / "cgroup.controllers").exists():
            wanted = set((base / "cgroup.subtree_control").read_text().split()) & {"memory", "pids"}
            if wanted:
                groups.append((str(base / name), {"memory.max": mem, "memory.swap.max": "0", "pids.max": pids,
                                                  "cpu.max": f"{cpu} 100000"}))
        else:
            v1 = {"memory": {"memory.limit_in_bytes": mem}, "pids": {"pids.max": pids},
                  "cpu": {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": cpu}}
            groups += [(str(base / c / name), v) for c, v in v1.items() if os.access(base / c, os.W_OK)]
    except OSError:
        groups = []
    made = []
    for path, settings in groups:
        try:
            os.mkdir(path)
            made.append(path)
            for f, v in settings.items():
                try:
                    Path(path, f).write_text(v)
                except OSError:
                    if f not in ("memory.swap.max", "cpu.max"):      # not offered: nothing to cap there
                        raise
        except OSError:
            continue
    return made


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


def kill_user(uid: int) -> bool:
    """kill(-1, SIGKILL) as the box's user (every process it may signal: its own, a fork racing the scan
    included), then SIGKILL by pid from /proc, until none is left; True when none is."""
    for _ in range(200):
        pids = processes_of(uid)
        if not pids:
            return True
        subprocess.run([sys.executable, "-I", __file__, "--kill-as", str(uid)], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30, env={})
        for pid in processes_of(uid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    return not processes_of(uid)


_RESERVED, _RESERVING = {}, threading.Lock()


def free_uid() -> int:
    """A random uid in the box range that no process uses and no other box holds. Reserved by binding an abstract
    unix socket named after it (one name per uid on the machine, freed by the kernel when the holder ends, so a
    killed grader reserves nothing): two grades at once, or two workers of one, never share a uid. Give it back
    with `release_uid` once none of its processes is left."""
    while True:
        uid = UID_BASE + random.randrange(UID_SPAN)
        hold = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            hold.bind(f"\0minbert-box-uid-{uid}")
        except OSError:                               # another box holds it
            hold.close()
            continue
        if processes_of(uid):                         # a process runs as it (not ours): another uid
            hold.close()
            continue
        with _RESERVING:
            _RESERVED[uid] = hold
        return uid


def release_uid(uid: int):
    with _RESERVING:
        hold = _RESERVED.pop(uid, None)
    if hold is not None:
        hold.close()


BOX = "/box/"           # argv and env name the box's folders under this prefix; `run` maps it for each level


def run(argv: list[str], env: dict, box: dict, limits: Limits, level: str, secrets=(), chroot_root=None,
        stop=None) -> Outcome:
    """Run argv in a box of `level` (LEVELS). `box` maps names to the parent's folders, which the child sees
    read-only as /box/<name> (a copy inside the chroot at user+chroot); `secrets` are instructor files the box's
    user must not be able to open (checked by the launcher before the child starts). The child gets fd 3 for
    results. `chroot_root`: the grade's hard-link tree (box_root.link_tree) for user+chroot; without one, a tree
    is laid out for this box alone. `stop`: a threading.Event; once set (the grader was interrupted) the box is
    killed within half a second. Whatever ends this call, an exception or a signal included, the box's processes,
    control groups, pipes and folders are gone when it returns or raises."""
    isolate = level != "self-check"
    made, fds, proc, cgroups, uid, outside = [], [], None, [], None, None
    chunks, why, status, left_over = {}, "", None, False
    try:
        uid = free_uid() if isolate else None
        cgroups = make_cgroups(limits) if isolate else []
        root, inside = None, "/box"
        if level == "user+chroot":
            if chroot_root is None:
                made.append(str(_classroom("cleanup").folder("box-root")))
                chroot_root = _classroom("box_root").link_tree(made[0] + "/root")
            root, inside = str(chroot_root), f"/box-{uid}"
            outside = root + inside
            _lay_out(outside, box, uid)
        home = box.get("job", "/tmp") if level == "self-check" else inside    # read-only: nothing is writable
        argv = [_mapped(a, level, box, inside) for a in argv]
        # HOME, TMPDIR and torch's cache folder name an existing read-only folder: torch.optim imports torch._dynamo,
        # which asks tempfile for a writable folder (none here: FileNotFoundError) unless its cache folder is given
        env = {**{k: _mapped(v, level, box, inside) for k, v in env.items()}, "HOME": home, "TMPDIR": home,
               "TORCHINDUCTOR_CACHE_DIR": home}
        log_r, log_w = os.pipe()
        fds += [log_r, log_w]
        res_r, res_w = os.pipe()
        fds += [res_r, res_w]
        mounted = level == "namespaces"           # what the launcher bind-mounts into the box's new root
        spec = {"argv": argv, "env": env, "box": box, "level": level, "uid": uid, "chroot": root,
                "runtime": _classroom("box_root").runtime_paths() if mounted else [],
                "sites": _classroom("box_root").sites() if mounted else {},
                "cgroups": cgroups, "limits": limits.__dict__, "results_fd": res_w,
                "cwd": home, "secrets": [str(p) for p in secrets]}
        proc = subprocess.Popen([sys.executable, "-I", __file__, json.dumps(spec)], stdin=subprocess.DEVNULL,
                                stdout=log_w, stderr=log_w, pass_fds=(res_w,), start_new_session=True, env={})
        for fd in (log_w, res_w):
            fds.remove(fd)
            os.close(fd)
        chunks = {log_r: [], res_r: []}
        why = _read(proc, {log_r: limits.log_bytes, res_r: limits.result_bytes}, chunks, limits.wall_s,
                    level != "namespaces", stop)
    finally:
        def killed():
            nonlocal status, left_over
            if proc is not None:
                _stop(proc)
                status = proc.wait()
            left_over = isolate and uid is not None and not kill_user(uid)
            if uid is not None and not left_over:
                release_uid(uid)                      # (a uid with a process left stays reserved)
        _all(killed, lambda: _classroom("cleanup").remove_cgroups(cgroups), *[lambda fd=fd: os.close(fd) for fd in fds],
             lambda: outside and _classroom("cleanup").remove_tree(outside),
             *[lambda m=m: _classroom("cleanup").remove_tree(m) for m in made])
    log_r, res_r = list(chunks)
    if left_over:
        why = why or "processes of the box were still running after it ended"
    log = b"".join(chunks[log_r]).decode(errors="replace").strip()
    if status == NO_NAMESPACES and isolate and not why:
        why = "the sandbox could not be built: " + log[-300:]
    if status == EXPOSED and isolate and not why:
        why = "the box's user could open an instructor's file; nothing was run: " + log[-300:]
    return Outcome(None if why else status, b"".join(chunks[log_r]), b"".join(chunks[res_r]), why,
                   layers(level, cgroups))


def _read(proc, caps: dict, chunks: dict, wall_s: float, grace: bool, stop) -> str:
    """Read the box's output and results pipes into `chunks` until both close; '' or why the box was stopped
    (the deadline, a byte cap, the grader interrupted). `grace`: once the child exits, 2 s more for its pipes
    (a grandchild may hold them; in a PID namespace none can)."""
    log_r = next(iter(caps))
    sizes = dict.fromkeys(caps, 0)
    deadline = time.monotonic() + wall_s
    sel = selectors.DefaultSelector()
    try:
        for fd in caps:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            if stop is not None and stop.is_set():
                return "stopped: the grader was interrupted before this assignment finished"
            left = deadline - time.monotonic()
            if left <= 0:
                return (f"timed out after {wall_s:g} s (an infinite loop, or far too slow?); this assignment "
                        "scores 0, the others are graded as usual")
            for key, _ in sel.select(timeout=min(left, 0.5)):
                data = os.read(key.fd, 1 << 16)
                if not data:
                    sel.unregister(key.fd)
                    continue
                sizes[key.fd] += len(data)
                if sizes[key.fd] > caps[key.fd]:
                    what = "printed" if key.fd == log_r else "wrote as results"
                    return f"stopped: the code {what} more than {caps[key.fd] >> 10} KiB"
                chunks[key.fd].append(data)
            if grace and proc.poll() is not None:
                deadline = min(deadline, time.monotonic() + 2.0)
        return ""
    finally:
        sel.close()


def _all(*steps):
    """Run every step, even when one raises (a signal during cleanup included); then raise the first error."""
    first = None
    for step in steps:
        try:
            step()
        except BaseException as e:    # noqa: BLE001 - the next step must run; the first error is raised below
            first = first or e
    if first is not None:
        raise first


def _mapped(text: str, level: str, box: dict, inside: str) -> str:
    """/box/<name> as the child sees it: mounted there (namespaces), its copy (user+chroot), the folder itself."""
    if level == "namespaces":
        return text
    for name, folder in box.items():
        text = text.replace(f"{BOX}{name}", folder if level == "self-check" else f"{inside}/{name}")
    return text


def layers(level: str, cgroups: list) -> list[str]:
    """The isolation layers of one box, as grade prints them."""
    if level == "self-check":
        return []
    kinds = ("v2" if Path(c).parent.name == "cgroup" else Path(c).parent.name for c in cgroups)   # v1: its controller
    groups = ["control groups (" + ", ".join(kinds) + ")"] if cgroups else ["no control group"]
    one = ["one process (seccomp: no fork; threads allowed), no writable folder, no file it can grow (RLIMIT_FSIZE 0)"]
    fence = "only torch, numpy and minbert's runtime packages in its tree"
    if level == "namespaces":
        return ["a separate user", "PID, mount, network, IPC and UTS namespaces", "a whitelist root (chroot)", fence,
                *one, "rlimits"] + groups
    return ["a separate user (no namespaces: the machine refuses them)", "a whitelist root (chroot into hard links)",
            fence, *one, "no network sockets (seccomp: only local AF_UNIX ones)", "rlimits", *groups,
            "kill(-1) as its user, then a check that none of its processes is left"]


def _lay_out(outside: str, box: dict, uid: int):
    """The box's own folder: a read-only copy of each `box` folder (the child writes nothing: no folder of its
    tree is writable by its user)."""
    os.makedirs(outside, mode=0o750)
    os.chown(outside, 0, uid)                     # root's, readable by the box's group alone
    for name, folder in box.items():
        shutil.copytree(folder, f"{outside}/{name}", symlinks=True)


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
    # a fresh /proc; no /tmp (nothing in the box is writable)
    os.makedirs(root + "/proc", exist_ok=True)
    _mount(libc, check, "proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for top in ("/bin", "/lib", "/lib32", "/lib64", "/sbin"):         # merged-/usr links, or folders to bind
        if os.path.islink(top):
            os.symlink(os.readlink(top), root + top)
        elif os.path.isdir(top):
            _bind(libc, check, top, root + top)
    _bind(libc, check, "/usr", root + "/usr")
    for d in spec["runtime"]:                                     # a few /etc files, the interpreter's prefixes
        if not os.path.exists(root + d):
            _bind(libc, check, d, root + d)
    for site, entries in spec["sites"].items():   # each site folder shows only the packages the assignments need
        if not os.path.isdir(root + site):
            continue
        _mount(libc, check, "tmpfs", root + site, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        for e in entries:
            _bind(libc, check, os.path.join(site, e), os.path.join(root + site, e))
        _mount(libc, check, None, root + site, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for dev in ("null", "zero", "urandom", "random"):
        _bind(libc, check, "/dev/" + dev, f"{root}/dev/{dev}", writable=dev == "null")
    os.makedirs(root + "/box", exist_ok=True)                   # the child's working folder, read-only
    for inside, outside in spec["box"].items():
        _bind(libc, check, outside, root + "/box/" + inside)
    _mount(libc, check, None, root, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    return root


def _limit(limits, isolate):
    """rlimits: address space, no file growth at all (a file it could open for writing, a memfd, cannot grow; the
    child writes to pipes only), open files, no core files, CPU seconds; threads per uid where the uid is its own."""
    for what, value in ((resource.RLIMIT_AS, limits["memory_mb"] << 20), (resource.RLIMIT_FSIZE, 0),
                        (resource.RLIMIT_NOFILE, limits["open_files"]), (resource.RLIMIT_CORE, 0),
                        (resource.RLIMIT_CPU, int(limits["wall_s"]) + 5)):
        resource.setrlimit(what, (value, value))
    if isolate:                                   # per uid: a box's own user counts only its own threads
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["threads"], limits["threads"]))


def launch(spec: dict):
    libc, check = _libc()
    check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")   # the grader dies: so does the box
    fd, level = spec["results_fd"], spec["level"]
    if level == "namespaces":
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
    if level != "self-check":
        for group in spec["cgroups"]:
            Path(group, "cgroup.procs").write_text(str(os.getpid()))
        root = _new_root(libc, check, spec) if level == "namespaces" else spec["chroot"]
        os.chroot(root)                             # both isolated levels have a root: no path skips the chroot
        os.chdir(spec["cwd"])
        _limit(spec["limits"], True)
        _become(spec["uid"])
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
        check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")   # cleared by setuid: again
        try:                                        # one process, no network socket, nothing that outlives it
            _seccomp(libc, check)
        except OSError as e:
            print(f"seccomp refused: {e}", flush=True)
            os._exit(NO_NAMESPACES)
        _check_secrets(spec["secrets"])
    else:
        _limit(spec["limits"], False)
        os.chdir(spec["cwd"])
    if fd != 3:
        os.dup2(fd, 3)
        os.close(fd)
    os.set_inheritable(3, True)
    os.execve(spec["argv"][0], spec["argv"], spec["env"])


def _seccomp(libc, check):
    """The box's seccomp filter (classic BPF, assembled by `seccomp_program`), installed after no_new_privs."""
    program = seccomp_program(*SYSCALLS[os.uname().machine])

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]
    filters = (Filter * len(program))(*[Filter(*f) for f in program])
    prog = Program(len(program), filters)
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def seccomp_program(arch: int, nr: dict) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; what it refuses, and why: docs/classroom.md (The sandbox, 4)."""
    LD, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, KILL = 0x7FFF0000, 0x80000000
    refused = [nr[n] for n in ("fork", "vfork", "io_uring_setup", "shmget", "semget", "msgget", "mq_open", "add_key",
                               "request_key", "keyctl") if n in nr]
    code = [(LD, 0, 0, 4), (JEQ, 0, "kill", arch), (LD, 0, 0, 0), (JGE, "kill", 0, 0x40000000)]
    code += [(JEQ, "eperm", 0, n) for n in refused]
    code += [(JEQ, "enosys", 0, nr["clone3"]), (JEQ, "socket", 0, nr["socket"]), (JEQ, "clone", 0, nr["clone"]),
             (RET, 0, 0, ALLOW),
             "socket", (LD, 0, 0, 16), (JEQ, "allow", 0, 1), (RET, 0, 0, 0x00050000 | 13),       # AF_UNIX; EACCES
             "clone", (LD, 0, 0, 16), (JSET, "allow", 0, CLONE_THREAD),
             "eperm", (RET, 0, 0, 0x00050000 | 1), "enosys", (RET, 0, 0, 0x00050000 | 38),
             "allow", (RET, 0, 0, ALLOW), "kill", (RET, 0, 0, KILL)]
    at, program = {}, []
    for item in code:                                 # labels name the index of the next instruction
        if isinstance(item, str):
            at[item] = len(program)
        else:
            program.append(item)
    return [(op, *[at[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)], k)
            for i, (op, jt, jf, k) in enumerate(program)]


def _check_secrets(secrets: list[str]):
    """As the box's user, before its code runs: none of the instructor's files may open (else no box)."""
    for path in secrets:
        try:
            os.close(os.open(path, os.O_RDONLY))
        except OSError:
            continue
        print(f"the box's user can open {path}", flush=True)
        os._exit(EXPOSED)


def _become(uid: int):
    """This process becomes the box's user: uid and gid `uid`, no supplementary group."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def kill_as(uid: int):
    """kill(-1, SIGKILL) as `uid`: every process that user may signal (its own), all at once."""
    _become(uid)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


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


def probe_chroot(uid: int):
    """Exit 0 when a user+chroot box can be built here: chroot into an empty folder, become `uid` with no groups,
    no_new_privs, the seccomp filter. Nothing of the hard-link tree is made for it."""
    libc, check = _libc()
    empty = tempfile.mkdtemp(prefix="minbert-probe-")
    try:
        pid = os.fork()
        if pid == 0:
            try:
                os.chroot(empty)
                os.chdir("/")
                _become(uid)
                check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
                _seccomp(libc, check)
                os._exit(0 if os.getuid() == uid else 1)
            except OSError as e:
                print(e, flush=True)
                os._exit(1)
        _, status = os.waitpid(pid, 0)
    finally:
        os.rmdir(empty)
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--kill-as"]:
        kill_as(int(sys.argv[2]))
        sys.exit(0)
    if sys.argv[1:2] == ["--probe-chroot"]:
        probe_chroot(int(sys.argv[2]))
    if sys.argv[1:] == ["--probe"]:
        try:
            probe()
        except OSError as e:
            print(f"namespaces refused: {e}")
            sys.exit(1)
    launch(json.loads(sys.argv[1]))
