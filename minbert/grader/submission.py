"""Only the graded files count: find them in a submission, check them against the template, lay them over it.

The template is the student copy of the `minbert/` package that the grader builds itself from the
instructor's repository (every selected block replaced by its stub, between its two markers).
From a submission the grader takes only the files that hold solution blocks, and from those only
the text between `### BEGIN SOLUTION <key>` and `### END SOLUTION`: every other line must equal
the template's (trailing spaces aside), else the assignments of that file score 0 and the
message lists the changed lines. Each block is then parsed and searched for the calls its
assignment bans (the library function it asks to write, and the ways out of the sandbox of a
Python function: imports of os/sys/importlib, open, exec, eval, reading files).

A submission may be the repository (SUB/minbert/x.py), the package folder (SUB/x.py) or loose
files anywhere below SUB (one x.py, not under tests/).
"""

import ast
import difflib
import textwrap
from pathlib import Path

from .. import classroom as C

# The sandbox escapes no assignment needs. Names (calls or references), modules, attributes.
BANNED_NAMES = {"__import__", "exec", "eval", "compile", "open", "globals", "locals", "vars", "breakpoint",
                "input", "getattr", "setattr", "delattr", "__builtins__"}
BANNED_MODULES = {"os", "sys", "subprocess", "importlib", "builtins", "pytest", "socket", "shutil", "pathlib",
                  "pickle", "ctypes", "inspect", "io", "gc", "signal", "threading", "multiprocessing", "sklearn",
                  "scipy", "transformers", "urllib", "http", "requests", "tempfile", "glob", "zipfile", "marshal"}
BANNED_ATTRS = {"load", "loadtxt", "fromfile", "genfromtxt", "fromregex", "memmap", "from_file", "read_text",
                "read_bytes", "__dict__", "__globals__", "__code__", "__subclasses__", "__builtins__", "_getframe",
                "modules", "system", "popen"}


def graded_files(selected, handout=None) -> dict[str, str]:
    """{"minbert/x.py": template text} for every package file holding a selected block; the template
    is stripped as the hand-out was (`handout`: the assignments removed from it, default all)."""
    out, handout = {}, set(C.BY_KEY if handout is None else handout)
    for rel in C.tracked_files(C.ROOT):
        if rel.startswith("minbert/") and rel.endswith(".py") and C.instructor_only(rel) is False:
            text = (C.ROOT / rel).read_text(encoding="utf-8")
            if C.BEGIN in text and any(f"{C.BEGIN} {k}" in text for k in selected):
                out[rel] = C.strip(text, rel, handout)[0]
    return out


def write_template(dst: Path, selected) -> None:
    """The student copy of the package alone, into dst/minbert."""
    for rel in C.tracked_files(C.ROOT):
        if rel.startswith("minbert/") and not C.instructor_only(rel):
            text = (C.ROOT / rel).read_text(encoding="utf-8") if rel.endswith(".py") else None
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            if text is not None and C.BEGIN in text:
                text = C.strip(text, rel, set(selected))[0]
            if text is None:
                (dst / rel).write_bytes((C.ROOT / rel).read_bytes())
            else:
                (dst / rel).write_text(text, encoding="utf-8")


def find(submission: Path, rel: str) -> Path | None:
    name = Path(rel).name
    if submission.is_file():
        return submission if submission.name == name else None
    for candidate in (submission / rel, submission / name):
        if candidate.is_file():
            return candidate
    found = [p for p in submission.rglob(name) if p.is_file() and "tests" not in p.relative_to(submission).parts
             and "__MACOSX" not in p.parts]
    found.sort(key=lambda p: (p.parent.name != "minbert", len(p.parts)))
    return found[0] if found else None


def split(text: str):
    """(outside lines with one '<block>' placeholder per block body, [(key, body text, first line)])."""
    outside, blocks, body, key = [], [], None, None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith(C.BEGIN) and body is None:
            key, body = s[len(C.BEGIN):].strip(), []
            outside.append((n, line.rstrip()))
            start = n + 1
        elif s.startswith(C.END) and body is not None:
            blocks.append((key, "\n".join(body) + "\n", start))
            outside.append((0, "<block>"))
            outside.append((n, line.rstrip()))
            body = None
        elif body is not None:
            body.append(line)
        else:
            outside.append((n, line.rstrip()))
    if body is not None:
        raise ValueError(f"the block '{C.BEGIN} {key}' is never closed by '{C.END}'")
    return outside, blocks


def changed_lines(template: str, submitted: str, rel: str) -> tuple[list, str]:
    """(the submission's blocks, '' when only the blocks changed, else a message naming the changed lines)."""
    try:
        t_out, t_blocks = split(template)
        s_out, s_blocks = split(submitted)
    except ValueError as e:
        return [], f"{rel}: {e}; keep both marker lines of every block"
    if [k for k, *_ in t_blocks] != [k for k, *_ in s_blocks]:
        return [], (f"{rel}: the solution markers changed: expected blocks {[k for k, *_ in t_blocks]}, found "
                    f"{[k for k, *_ in s_blocks]}; keep '{C.BEGIN} <key>' and '{C.END}' as handed out")
    a, b = [line for _, line in t_out], [line for _, line in s_out]
    if a == b:
        return s_blocks, ""
    changes = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        at = s_out[j1][0] if j1 < len(s_out) else (s_out[-1][0] if s_out else 0)
        got = "; ".join(line.strip() for _, line in s_out[j1:j2])[:120]
        want = "; ".join(line.strip() for line in a[i1:i2])[:120]
        changes.append(f"line {at}: {'expected ' + repr(want) if want else 'added'}"
                       f"{', found ' + repr(got) if got else ' is missing'}")
    return s_blocks, (f"{rel} differs from the handed-out file outside the solution blocks (only the code between "
                      f"the markers is graded; put everything back): " + " | ".join(changes[:5])
                      + (f" | and {len(changes) - 5} more" if len(changes) > 5 else ""))


def banned_calls(key: str, body: str, rel: str, first_line: int) -> list[str]:
    """'file:line: name' for each banned name, module or attribute in one block."""
    try:
        tree = ast.parse(textwrap.dedent(body))
    except SyntaxError:
        return []          # the child reports the syntax error with its line
    banned = C.BY_KEY[key].banned
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names]
            mods += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            names = [part for m in mods for part in m.split(".")]
        for name in names:
            if name in banned or name in BANNED_NAMES or name in BANNED_MODULES or name in BANNED_ATTRS:
                found.append(f"{rel}:{first_line + node.lineno - 1}: {name}")
    return found


def lay_over(submission: Path, template_dir: Path, selected, handout=None) -> dict[str, list[str]]:
    """Write the submission's blocks into the template (stripped as `handout`); returns {assignment:
    [problems]} (empty: fine). Blocks of assignments not graded keep the template's stub."""
    problems = {k: [] for k in selected}
    for rel, template in graded_files(selected, handout).items():
        keys = [k for k in selected if f"{C.BEGIN} {k}" in template]
        path = find(submission, rel)
        if path is None:
            for k in keys:
                names = ", ".join(sorted(Path(f).name for f in graded_files(selected)))
                problems[k].append(f"{rel} is not in the submission (upload the repository, its minbert/ folder "
                                   f"or the graded files: {names})")
            continue
        try:
            submitted = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as e:
            for k in keys:
                problems[k].append(f"{rel}: cannot read it as UTF-8 text ({e})")
            continue
        blocks, message = changed_lines(template, submitted, rel)
        if message:
            for k in keys:
                problems[k].append(message)
            continue
        for key, body, first in blocks:
            if key not in problems:
                continue                                 # not graded this time: its stub stays
            hits = banned_calls(key, body, rel, first)
            if hits:
                problems[key].append(f"banned in assignment {key}: " + ", ".join(hits[:5])
                                     + f" (allowed: torch tensor maths; {C.BY_KEY[key].banned_note})")
        t_blocks = split(template)[1]
        bodies = iter(body if key in problems else t_body for (key, body, _), (_, t_body, _) in zip(blocks, t_blocks))
        merged = []
        for line in split(template)[0]:
            merged.append(next(bodies).rstrip("\n") if line[1] == "<block>" else line[1])
        (template_dir / rel).write_text("\n".join(merged) + "\n", encoding="utf-8")
    return problems
