"""What a user reads cites what a user can open: the papers, the repository's own files and tests.

A reader of the code, the `--help` texts, the docs, the tests, the recipes or the benchmarks has no access to this
project's issue tracker, to notes kept outside the repository, or to the folders of the machine it was written on.
So none of those files may cite a tracker number, a notes file or a folder outside the repository (the patterns are
UNFOLLOWABLE in tests/conftest.py). Oracle (c), a property of the files, checked line by line; the message gives
file:line and what to cite instead.
"""

import sys
from pathlib import Path

from conftest import UNFOLLOWABLE

ROOT = Path(__file__).resolve().parents[1]
ROOTS = ("minbert", "tests", "docs", "recipes", "bench")        # and the files at the top of the repository
TEXT = {".py", ".md", ".sh", ".args", ".txt", ".ini", ".toml", ".cfg", ".yml", ".yaml", ".json"}
# Records kept as the machine wrote them (a run's command lines and skipped paths) or as committed before their
# results (a pre-registered plan): rewriting them would falsify the record.
RECORDS = ("bench/results/mml_study/runs/", "bench/results/study/commands.txt", "bench/results/study_controls/commands.txt",
           "bench/results/study_controls/PLAN.md", "bench/results/study_confirmation/commands.txt")
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
        if rel.startswith(RECORDS + SKIP):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if line.startswith("UNFOLLOWABLE = "):     # the patterns themselves (tests/conftest.py)
                continue
            for match in UNFOLLOWABLE.finditer(line):
                found.append(f"{rel}:{number}: {match.group(0)!r} in: {line.strip()[:140]}")
    return found


def test_user_facing_files_cite_only_what_a_reader_can_open():
    found = unfollowable_references(user_facing_files())
    assert not found, ("a reader cannot follow these references: cite the paper (section, equation) or the file or "
                       "test meant, or delete them:\n" + "\n".join(found))


def test_the_check_finds_a_planted_reference(tmp_path, monkeypatch):
    """The scan itself: a tracker number planted in a --help title and a path outside the repository are both
    reported, and a paper citation is not."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "minbert").mkdir()
    tracker, outside = "issue " + "19", "../" + "shared/data"
    (tmp_path / "minbert" / "study.py").write_text(f'g = p.add_argument_group("The study ({tracker})")\n'
                                                   f'DATA = "{outside}"\nOK = "Yu et al. 2020, Eq. 1"\n')
    found = unfollowable_references(user_facing_files())
    assert [f.split(": ")[0] for f in found] == ["minbert/study.py:1", "minbert/study.py:2"], found
