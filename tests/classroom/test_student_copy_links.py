"""The student copy's Markdown: every link resolves inside the copy, and no page sends a student to a file the
copy does not ship (minbert.classroom.assignments.student_markdown).

Oracle: the copy's own files, and GitHub's heading anchors. GitHub makes a heading's anchor by lower-casing its
text, dropping every character that is not a letter, a digit, a space, `-` or `_`, and turning spaces into `-`;
the second heading with the same anchor gets `-1`, the third `-2`
(https://docs.github.com/en/get-started/writing-on-github/getting-started-with-writing-and-formatting-on-github/basic-writing-and-formatting-syntax#section-links).
"""

import re
import unicodedata
from pathlib import Path

from classroom_helpers import ROOT, student  # noqa: F401  (student: the session's copy, a fixture)
from minbert.classroom.assignments import instructor_only, tracked_files

FENCE = re.compile(r"^\s*(```|~~~)")
CODE = re.compile(r"(`+).+?\1")                                                # an inline code span
LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)")            # [name]: target
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose(text):
    """(line number, line) of every line outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
        elif fence is None:
            yield n, line


def github_anchor(heading):
    """The anchor GitHub gives a heading's text (the module docstring's rule); a link's text counts, not its URL."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor a Markdown file has: its headings' (numbered when repeated) and explicit <a name/id>."""
    seen, found = {}, set()
    for _, line in prose(text):
        m = HEADING.match(line)
        if m:
            anchor = github_anchor(m.group(2))
            found.add(f"{anchor}-{seen[anchor]}" if anchor in seen else anchor)
            seen[anchor] = seen.get(anchor, 0) + 1
        found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line))
    return found


def links(text):
    """(line number, target) of every link and image outside code."""
    for n, line in prose(text):
        line = CODE.sub(lambda m: " " * len(m.group(0)), line)
        yield from ((n, m.group(2)) for m in LINK.finditer(line))
        yield from ((n, m.group(1)) for m in IMAGE.finditer(line))
        m = REFERENCE.match(line)
        if m:
            yield n, m.group(1)


def dead_links(root):
    """'file:line: target (why)' for each relative link under root whose file or heading is not there."""
    root, dead = Path(root).resolve(), []
    for page in sorted(p for p in root.rglob("*.md") if ".git" not in p.relative_to(root).parts):
        where = page.relative_to(root)
        for n, target in links(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):                 # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if dest != root and root not in dest.parents:
                dead.append(f"{where}:{n}: {target} (outside the copy)")
            elif not dest.exists():
                dead.append(f"{where}:{n}: {target} (no such file in the copy)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
                dead.append(f"{where}:{n}: {target} (no heading with anchor #{anchor} in {dest.relative_to(root)})")
    return dead


def test_github_anchor_follows_githubs_rule():
    """Property: the worked cases of GitHub's rule, repeats numbered, so the link check below checks what GitHub does."""
    page = "# Tests\n## Quick start\n## `--amp auto`, devices\n## What's new? (v2)\n## Quick start\n```\n# not a heading\n```\n"
    assert anchors(page) == {"tests", "quick-start", "--amp-auto-devices", "whats-new-v2", "quick-start-1"}, \
        "tests/classroom/test_student_copy_links.py `anchors`: the anchors GitHub gives these headings differ"


def test_the_link_check_finds_a_dead_file_and_a_dead_anchor(tmp_path):
    """Property: the checker itself reports both kinds of dead link and passes a live one."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# minbert\n## Quick start\n")
    (tmp_path / "docs" / "a.md").write_text("[ok](../README.md#quick-start) [gone](../bench/results/x.md) "
                                            "[no heading](../README.md#install) `[in code](nowhere.md)`\n")
    assert dead_links(tmp_path) == ["docs/a.md:1: ../bench/results/x.md (no such file in the copy)",
                                    "docs/a.md:1: ../README.md#install (no heading with anchor #install in README.md)"]


def test_every_markdown_link_in_the_student_copy_resolves_inside_it(student):
    """Oracle: the copy's files and GitHub's anchors. A link to bench/results/ (not shipped) or to a heading
    only the instructor's README has is dead for a student."""
    dead = dead_links(student)
    assert not dead, ("the student copy has dead links; fix the page, or how "
                      "minbert.classroom.assignments.student_markdown / student_readme rewrite it for the copy:\n  "
                      + "\n  ".join(dead))


def test_no_page_of_the_student_copy_names_an_instructor_only_file(student):
    """Oracle: the instructor-only files (minbert.classroom.assignments.INSTRUCTOR_ONLY), which the copy lacks:
    a page may not send a student to them, nor to the README's classroom section. Mark such a line in the
    instructor's docs with a closing "(instructor-only)" and the copy leaves it out."""
    files = tracked_files(ROOT)
    hidden = [f for f in files if instructor_only(f)]
    folders = {str(Path(f).parent) + "/" for f in hidden} - {str(Path(f).parent) + "/" for f in files
                                                              if not instructor_only(f)}   # minbert/classroom/ ...
    names = sorted(set(hidden) | folders | {"classroom section"})
    found = [f"{page.relative_to(student)}:{n}: {name}"
             for page in sorted(student.rglob("*.md")) if ".git" not in page.relative_to(student).parts
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for name in names if name in line]
    assert not found, ("the student copy's docs name files it does not ship (end such a line with "
                       "'(instructor-only)' in the instructor's docs):\n  " + "\n  ".join(found))
