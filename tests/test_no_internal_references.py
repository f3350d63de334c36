"""What a user reads cites what a user can open: the papers, the repository's own files and tests.

A reader of the code, the `--help` texts, the docs, the tests, the recipes or the benchmarks has no access to this
project's issue tracker, to notes kept outside the repository, or to the folders of the machine it was written on.
So none of those files may say "issue 21", "REFERENCE-NOTES §7", "../shared" or "/work/...", nor name a NOTES-*.md
file. Oracle (c), a property of the files, checked line by line; the message gives file:line and what to cite instead.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("minbert", "tests", "docs", "recipes", "bench")        # and the files at the top of the repository
TEXT = {".py", ".md", ".sh", ".args", ".txt", ".ini", ".toml", ".cfg", ".yml", ".yaml", ".json"}
UNFOLLOWABLE = re.compile(
    r"\bissues? #?\d+"                  # this project's tracker: "issue 21", "issues 18/20"
    r"|REFERENCE-NOTES"                 # a notes file that is not in the repository
    r"|\.\./shared\b|/work/"            # folders of the machine the code was written on
    r"|\bNOTES-[\w-]+\.md",             # working notes, left out of the repository
    re.IGNORECASE)
# Files still being rewritten elsewhere; each leaves this list once it is clean.
PENDING = ("README.md", "docs/studies.md", "bench/results/study", "bench/results/mml_study/", "tests/classroom/",
           "minbert/classroom/")
# Data is data: its text is the datasets', not ours. This file names the patterns it looks for.
SKIP = ("data/", "tests/fixtures/", "tests/test_no_internal_references.py")


def user_facing_files():
    files = [p for p in ROOT.iterdir() if p.is_file() and p.suffix in TEXT]
    for folder in ROOTS:
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and p.suffix in TEXT
                  and "__pycache__" not in p.parts]
    return sorted(files)


def unfollowable_references(files) -> list[str]:
    found = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(PENDING + SKIP):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for match in UNFOLLOWABLE.finditer(line):
                found.append(f"{rel}:{number}: {match.group(0)!r} in: {line.strip()[:140]}")
    return found


def test_user_facing_files_cite_only_what_a_reader_can_open():
    found = unfollowable_references(user_facing_files())
    assert not found, ("a reader cannot follow these references: cite the paper (section, equation) or the file or "
                       "test meant, or delete them:\n" + "\n".join(found))


def test_the_check_finds_a_planted_reference(tmp_path, monkeypatch):
    """The scan itself: a planted "issue 19" in a --help title and a "../shared" path are both reported."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "minbert").mkdir()
    (tmp_path / "minbert" / "study.py").write_text('g = p.add_argument_group("The study (issue 19)")\n'
                                                   'DATA = "../shared/data"\nOK = "Yu et al. 2020, Eq. 1"\n')
    found = unfollowable_references(user_facing_files())
    assert [f.split(": ")[0] for f in found] == ["minbert/study.py:1", "minbert/study.py:2"], found
