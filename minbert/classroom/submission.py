"""Only the graded files count: find them in a submission, check them against the template, lay them over it.

The template is the student copy of the `minbert/` package, built by the grader itself. Only the text between a
graded file's markers is taken (every other line must equal the template's, else that file's assignments score 0),
and the gate reads each block first. A submission may be the repository, its package folder or loose files.
"""

import ast
import os
import stat
import struct
import zipfile
import zlib
from pathlib import Path

from minbert.classroom import allowlists, assignments as C, gate

def graded_files(selected, handout=None) -> dict[str, str]:
    """{"minbert/x.py": template text} for every package file holding a selected block; the template
    is stripped as the hand-out was (`handout`: the assignments removed from it, default all)."""
    handout = set(C.BY_KEY if handout is None else handout)
    return {rel: C.strip(text, rel, handout)[0] for rel, text in C.solution_files()
            if any(f"{C.BEGIN} {k}" in text for k in selected)}


def write_template(dst: Path, selected, left_out=None) -> Path:
    """The student copy of the package alone, into dst/minbert: the blocks of `selected` stubbed, the left-out
    regions of `left_out` (default `selected`) removed; readable by every user, writable by none."""
    for rel in C.tracked_files(C.ROOT):
        if rel.startswith("minbert/") and not C.instructor_only(rel):
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            text = (C.ROOT / rel).read_text(encoding="utf-8") if rel.endswith(".py") else None
            if text is None:
                (dst / rel).write_bytes((C.ROOT / rel).read_bytes())
            else:
                (dst / rel).write_text(C.strip(text, rel, set(selected), left_out)[0] if C.BEGIN in text else text,
                                       encoding="utf-8")
    for path in (dst, *dst.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return dst


# ---------------------------------------------------------------------- intake: a submission is hostile

MAX_ENTRIES = 20_000                 # files and folders walked in a submission
MAX_DEPTH = 32                       # folders inside folders (a deeper tree would exhaust the recursion)
MAX_FILE_BYTES = 1 << 20             # a graded file is source code: 1 MiB is plenty
ZIP_MAX_FILES, ZIP_MAX_BYTES, ZIP_MAX_FILE = 2_000, 64 << 20, 8 << 20


class Refused(Exception):
    """The submission as a whole cannot be taken (the message says why, for the student)."""


def extract_zip(archive: Path, dst: Path) -> None:
    """Unpack a zip without trusting it: no absolute or '..' path, no link or special file, and caps on the
    number of files, each file's size and the total, counted on the bytes actually written."""
    total = 0
    if archive.stat().st_size > ZIP_MAX_BYTES:
        raise Refused(f"the zip is larger than {ZIP_MAX_BYTES >> 20} MiB")
    with open(archive, "rb") as f:               # the entry count, read from the end record before anything else
        f.seek(max(0, archive.stat().st_size - (1 << 16) - 22))
        tail = f.read()
    end = tail.rfind(b"PK\x05\x06")
    count, directory = struct.unpack("<HI", tail[end + 10:end + 16]) if end >= 0 and len(tail) >= end + 16 else (0, 0)
    if count > ZIP_MAX_FILES:                    # 0xFFFF: a zip64 count, which no course upload needs
        raise Refused(f"the zip holds {count if count < 0xFFFF else 'too many'} entries; at most "
                      f"{ZIP_MAX_FILES} are taken")
    if directory > ZIP_MAX_FILES * 400:          # the central directory's own size: a false count cannot hide it
        raise Refused(f"the zip's directory is {directory >> 10} KiB: more entries than the {ZIP_MAX_FILES} taken")
    try:
        with zipfile.ZipFile(archive) as z:
            infos = z.infolist()
            if len(infos) > ZIP_MAX_FILES:
                raise Refused(f"the zip holds {len(infos)} entries; at most {ZIP_MAX_FILES} are taken")
            for info in infos:
                name = info.filename
                parts = Path(name).parts
                if len(parts) > MAX_DEPTH:
                    raise Refused(f"the zip entry {name[:100]!r}... is more than {MAX_DEPTH} folders deep")
                if name.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
                    raise Refused(f"the zip entry {name[:100]!r} points outside the submission folder")
                kind = stat.S_IFMT(info.external_attr >> 16)
                if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
                    raise Refused(f"the zip entry {name[:100]!r} is a link or special file; zip the files themselves")
                target = dst / name
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                written = 0
                with z.open(info) as src, open(target, "xb") as out:
                    while chunk := src.read(1 << 16):
                        written += len(chunk)
                        total += len(chunk)
                        if written > ZIP_MAX_FILE:
                            raise Refused(f"{name[:100]} unpacks to more than {ZIP_MAX_FILE >> 20} MiB")
                        if total > ZIP_MAX_BYTES:
                            raise Refused(f"the zip unpacks to more than {ZIP_MAX_BYTES >> 20} MiB")
                        out.write(chunk)
    except Refused:
        raise
    except Exception as e:      # noqa: BLE001 - whatever the reader trips on, the student gets one line
        raise Refused(f"the zip cannot be read: {_why_unreadable(e)}") from None


def _why_unreadable(e: Exception) -> str:
    """A zip reader's failure in the student's words (the grader's own wording: no library text is quoted)."""
    if isinstance(e, RuntimeError) and "encrypted" in str(e):
        return "an entry is encrypted (zip the files without a password)"
    if isinstance(e, zlib.error):
        return "an entry's compressed data is corrupt (zip the files again)"
    if isinstance(e, (zipfile.BadZipFile, EOFError)):
        return "it is not a whole zip file (cut short, or not a zip; zip the files again)"
    if isinstance(e, NotImplementedError):
        return "an entry uses a compression method the grader does not read (use plain zip, deflate)"
    return f"the reader failed ({type(e).__name__}; zip the files again)"


def not_source(folder: Path) -> bool:
    """A folder no graded file is taken from, so it is not walked: hidden ones (.git, .venv), __pycache__,
    __MACOSX, and any virtual environment (it holds pyvenv.cfg). An instructor's checkout with its venv
    inside would otherwise pass MAX_ENTRIES; a student gains nothing by hiding files there."""
    name = folder.name
    return (name.startswith(".") or name in ("__pycache__", "__MACOSX")
            or (not folder.is_symlink() and (folder / "pyvenv.cfg").is_file()))


def files_of(submission: Path) -> tuple[dict[str, Path], list[str]]:
    """({relative path: path} of the submission's regular files, [refused entries and why]). Links are not
    followed, folders behind a link are not entered: a symbolic link, a hard link or a special file (fifo,
    device, socket) is refused with a message, whatever it points to."""
    if submission.is_symlink():
        return {}, [f"{submission.name} is a symbolic link; submit the files themselves"]
    if submission.is_file():
        return {submission.name: submission}, []
    files, refused, seen = {}, [], 0
    for folder, dirs, names in os.walk(submission, followlinks=False):
        dirs[:] = [d for d in dirs if not not_source(Path(folder) / d)]
        if len(Path(folder).relative_to(submission).parts) >= MAX_DEPTH and dirs:
            raise Refused(f"the submission's folders are more than {MAX_DEPTH} deep")
        for name in dirs + names:
            seen += 1
            if seen > MAX_ENTRIES:
                raise Refused(f"the submission holds more than {MAX_ENTRIES} files and folders")
            path = Path(folder) / name
            rel = str(path.relative_to(submission))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                refused.append(f"{rel} is a symbolic link (submit the file itself, not a link)")
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:
                    refused.append(f"{rel} is a hard link (submit a copy of the file)")
                elif name in names:
                    files[rel] = path
            elif not stat.S_ISDIR(st.st_mode):
                refused.append(f"{rel} is a special file (fifo, device or socket)")
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
    return files, refused


def read_source(path: Path) -> str:
    """A graded file's text, opened without following a link, checked to be one plain file of sane size."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise OSError("not a plain file")
        if st.st_size > MAX_FILE_BYTES:
            raise OSError(f"larger than {MAX_FILE_BYTES >> 20} MiB")
        with os.fdopen(fd, "rb") as f:
            fd = None
            return f.read(MAX_FILE_BYTES + 1).decode("utf-8")
    finally:
        if fd is not None:
            os.close(fd)


def find(files: dict[str, Path], rel: str) -> Path | None:
    """The submission's copy of the package file `rel`, among its regular files (from files_of)."""
    name = Path(rel).name
    for candidate in (rel, name):
        if candidate in files:
            return files[candidate]
    found = [(r, p) for r, p in files.items() if Path(r).name == name and "tests" not in Path(r).parts]
    layer = Path(rel).parent.name            # 'bert' for minbert/bert/attention.py; older copies had it flat
    found.sort(key=lambda rp: (Path(rp[0]).parent.name not in (layer, "minbert"), len(Path(rp[0]).parts)))
    return found[0][1] if found else None


def lay_over(submission: Path, template_dir: Path, selected, handout=None) -> tuple[dict, dict]:
    """Write the submission's blocks into the template (stripped as `handout`); returns ({assignment: [problems]}
    (empty: fine), {assignment: {"minbert/x.py:N": the gate's refusal}}: N the line of the stub a refused block keeps).
    Blocks of assignments not graded keep the template's stub."""
    problems, gated_out = {k: [] for k in selected}, {k: {} for k in selected}
    data = allowlists.gate_lists(C.ASSIGNMENTS)
    lists, common = gate.lists_of(data, selected), gate.Lists(data, None)
    try:
        files, refused = files_of(submission)
    except Refused as e:
        return {k: [str(e)] for k in selected}, gated_out
    for rel, template in graded_files(selected, handout).items():
        keys = [k for k in selected if f"{C.BEGIN} {k}" in template]
        blocks, message, outside = _taken(files, refused, rel, template, common, selected, handout)
        if message:
            for k in keys:
                problems[k].append(message)
            continue
        t_blocks = gate.split(template)[1]
        bodies = [body if key in problems else t_body for (key, body, _), (_, t_body, _) in zip(blocks, t_blocks)]
        text = gate.merge(outside, bodies)
        gated, before = gate.check_text(text, rel, lists), gate.blocks(text)
        out = [i for i, (key, first, _) in enumerate(before) if (key, first) in gated]
        text = gate.merge(outside, [t_blocks[i][1] if i in out else b for i, b in enumerate(bodies)])  # the stub
        for i in out:                                    # whose line the cases that reach it get: the gate's
            stub = gate.blocks(text)[i][1] + t_blocks[i][1].count("\n") - 1
            gated_out[blocks[i][0]][f"{rel}:{stub}"] = gated[before[i][0], before[i][1]]
        (template_dir / rel).write_text(text, encoding="utf-8")
    return problems, gated_out


def _taken(files: dict, refused: list, rel: str, template: str, common, selected, handout) -> tuple:
    """(the blocks of the submission's copy of the graded file `rel`, '' or why none is taken, its outside lines)."""
    path = find(files, rel)
    if path is None:
        mine = [r for r in refused if Path(r.split(" is a ")[0]).name == Path(rel).name]
        names = ", ".join(sorted(Path(f).name for f in graded_files(selected)))
        return [], ("refused: " + "; ".join(mine) if mine else f"{rel} is not in the submission (upload the "
                    f"repository, its minbert/ folder or the graded files: {names})"), []
    try:       # the instructor's own files still hold the left-out regions: compared as the copy has them
        submitted = C.omit(read_source(path), rel, set(C.BY_KEY if handout is None else handout))
    except (UnicodeDecodeError, OSError) as e:
        return [], (f"{rel}: cannot read it as one plain UTF-8 text file "
                    f"({(e.strerror or e.args[0]) if isinstance(e, OSError) else type(e).__name__})"), []
    except C.UserError as e:
        return [], str(e), []
    return gate.changed_lines(template, submitted, rel, common)


# ---------------------------------------------------------------------- which files an assignment runs

def _module_files(dotted: str) -> set[str]:
    """The files importing `dotted` (a minbert module or package) runs: it and every package __init__ above it."""
    parts = dotted.split(".")
    found = {"/".join(parts[:n]) + "/__init__.py" for n in range(1, len(parts))}
    return found | {"/".join(parts) + ".py", "/".join(parts) + "/__init__.py"}


def _imports(tree: ast.AST) -> set[str]:
    """'minbert/.../x.py' of each package module a module's source imports (at any depth of its body), with the
    package __init__.py files on the way; names that are not files are dropped by the caller."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "minbert" and not node.level:
            found |= _module_files(node.module)
            found |= {f for a in node.names for f in _module_files(f"{node.module}.{a.name}")}
        elif isinstance(node, ast.Import):
            found |= {f for a in node.names if a.name.startswith("minbert.") for f in _module_files(a.name)}
    return found


def files_used(key: str) -> list[str]:
    """The package files a grading run of `key` imports: its scenario's imports and theirs, transitively
    (from the instructor's source; a submission may change only the blocks, never an import)."""
    scenarios = ast.parse((Path(__file__).parent / "scenarios.py").read_text(encoding="utf-8"))
    functions = {f.name: f for f in scenarios.body if isinstance(f, ast.FunctionDef)}
    called = {n.func.id for n in ast.walk(functions[key]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    todo, seen = [m for f in {key} | (called & set(functions)) for m in _imports(functions[f])], set()
    while todo:
        rel = todo.pop()
        if rel in seen or not (C.ROOT / rel).is_file():
            continue
        seen.add(rel)
        todo += _imports(ast.parse((C.ROOT / rel).read_text(encoding="utf-8")))
    return sorted(seen | {"minbert/__init__.py"})


def syntax_errors(template_dir: Path, selected) -> dict[str, list[str]]:
    """{assignment: ["could not run: your minbert/x.py has a syntax error at line N"]} for every graded
    assignment whose imports reach a submitted file that does not parse (checked here, nothing is run)."""
    broken = {}
    for rel in graded_files(selected):
        try:
            ast.parse((template_dir / rel).read_text(encoding="utf-8"), filename=rel)
        except SyntaxError as e:
            broken[rel] = f"could not run: your {rel} has a syntax error at line {e.lineno} ({e.msg})"
        except (RecursionError, MemoryError):
            broken[rel] = f"could not run: your {rel} is nested too deeply for Python to parse"
    return {k: [broken[f] for f in files_used(k) if f in broken] for k in selected}
