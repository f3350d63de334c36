"""What a box can see: the Python runtime and the few packages the assignments need (BOX_PACKAGES), nothing else:
bind-mounted by sandbox.py where namespaces are allowed, else laid out once per grade from hard links (`link_tree`)
for a chroot. The instructor's checkout, the grader's folders and every other library are not there.
"""

import os
import shutil
import sys
import sysconfig

# What the child imports: torch and what `import torch` pulls in, numpy, and minbert's own runtime packages
# (the template imports them). tests/classroom/test_classroom.py grades the reference solutions in the box:
# a missing package costs points there.
BOX_PACKAGES = ("torch", "torchgen", "functorch", "numpy", "numpy.libs", "typing_extensions", "sympy", "mpmath",
                "filelock", "jinja2", "markupsafe", "networkx", "fsspec", "tqdm", "tokenizers", "safetensors")
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")


def site_dirs() -> list[str]:
    """Every site-packages or dist-packages folder of this interpreter, its base and the system's."""
    version = f"python3.{sys.version_info.minor}"
    found = {p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/usr/local"}:
        for lib in ("lib", "lib64"):
            for name in ("site-packages", "dist-packages"):
                found |= {f"{prefix}/{lib}/{version}/{name}", f"{prefix}/{lib}/python3/{name}"}
    return sorted(os.path.realpath(p) for p in found if os.path.isdir(p))


def _dist(name: str) -> str:
    return name.split("-")[0].lower().replace(".", "_")


def allowed(site: str) -> list[str]:
    """The entries of one site folder that a box sees: BOX_PACKAGES, their single-file modules and metadata."""
    if site not in {os.path.realpath(p) for p in sys.path}:
        return []                                   # a site folder this interpreter does not use: shown empty
    wanted = {p.lower().replace(".", "_") for p in BOX_PACKAGES}
    return sorted(e for e in os.listdir(site) if e in BOX_PACKAGES or e.removesuffix(".py") in BOX_PACKAGES
                  or (e.endswith(".dist-info") and _dist(e) in wanted))


def sites() -> dict[str, list[str]]:
    return {s: allowed(s) for s in site_dirs()}


def runtime_paths() -> list[str]:
    """What the child's Python needs read-only, for the mounted box: the files of ETC, the interpreter's prefixes
    (their site folders are then filtered by `sites`). The checkout itself is never mounted; a venv inside it is."""
    keep = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    keep |= set(site_dirs())
    out = [f for f in ETC if os.path.isfile(f)]
    for p in sorted(os.path.realpath(k) for k in keep):
        if not any(p == o or p.startswith(o + "/") for o in out):
            out.append(p)
    return out


def link_paths() -> list[str]:
    """What the linked (mountless) box holds besides the site packages: the interpreter, its libpython, the
    standard library, the C libraries (the multiarch folder and the loader), a few /etc files."""
    paths = {*_chain(sys.executable), sysconfig.get_paths()["stdlib"],
             sysconfig.get_paths()["platstdlib"], os.path.join(sys.prefix, "pyvenv.cfg"), *ETC}
    libdir, library = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LDLIBRARY")
    if libdir and library and os.path.exists(os.path.join(libdir, library)):
        paths |= {os.path.join(libdir, f) for f in os.listdir(libdir) if f.startswith(library.split(".so")[0])}
    arch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    paths |= {f"/lib/{arch}", f"/usr/lib/{arch}", "/lib64", "/usr/lib64"}
    paths |= {top for top in ("/lib", "/lib64") if os.path.islink(top)}   # merged /usr: the links themselves
    return sorted(p for p in paths if os.path.lexists(p) and not _under_link(p))


def _chain(path: str) -> list[str]:
    """Every link on the way from `path` to the file it names (venv/bin/python -> python3 -> .../python3.11)."""
    found = [path]
    while os.path.islink(path) and len(found) < 40:
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        found.append(path)
    return found + [os.path.realpath(path)]


def _under_link(path: str) -> bool:
    """/lib/x86_64-linux-gnu when /lib is a link to usr/lib: it is laid through /usr/lib's entry instead."""
    parent = os.path.dirname(path)
    return parent != "/" and (os.path.islink(parent) or _under_link(parent))


def _put(root: str, path: str, skip=frozenset()):
    """Lay `path` into the tree at the same place, its parent folders made as plain 0755 folders: a link stays a
    link, a folder is walked (but its entries in `skip`), a file becomes a hard link (a copy across filesystems,
    or of a file others may write, without that write bit)."""
    dst = root + path
    os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
    if os.path.islink(path):
        if not os.path.lexists(dst):
            os.symlink(os.readlink(path), dst)
    elif os.path.isdir(path):
        os.makedirs(dst, exist_ok=True)
        for entry in os.scandir(path):
            if entry.path not in skip:
                _put(root, entry.path, skip)
    elif os.path.exists(dst):
        return
    elif os.stat(path).st_mode & 0o022:         # writable by others: a link would let the box write the original
        shutil.copy2(path, dst)
        os.chmod(dst, os.stat(dst).st_mode & ~0o022)
    else:
        try:
            os.link(path, dst)
        except OSError:
            shutil.copy2(path, dst)


def link_tree(root) -> str:
    """Lay the mountless box root out in the new folder `root` (about 30,000 hard links; a grade makes it inside
    its own temporary folder and removes it with that folder, whatever ends the grade)."""
    root = str(root)
    os.mkdir(root, 0o755)
    os.chmod(root, 0o755)
    site = sites()
    for path in link_paths():
        _put(root, path, set(site))
    for folder, entries in site.items():
        os.makedirs(root + folder, mode=0o755, exist_ok=True)
        for e in entries:
            _put(root, os.path.join(folder, e))
    for dev in ("null", "zero", "urandom", "random"):     # mknod is in a container's capabilities
        try:
            os.makedirs(root + "/dev", mode=0o755, exist_ok=True)
            st = os.stat("/dev/" + dev)
            os.mknod(f"{root}/dev/{dev}", 0o666 | (st.st_mode & 0o170000), st.st_rdev)
            os.chmod(f"{root}/dev/{dev}", 0o666)
        except OSError:
            pass                                   # Python reads randomness through getrandom() anyway
    for dirpath, dirnames, _ in os.walk(root):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, 0o755)
    return root
