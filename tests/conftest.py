"""Shared test helpers: where the real data files are.

The real CS224N and GLUE files are read in place, never copied: from the project's ../shared/data when that
folder exists (a developer checkout), else from the repository's own data/ (what a fresh clone ships). A test
skips only when neither place holds the files it reads, so a clone's tests skip nothing its own files can check.
"""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
CS224N_PLACES = (SHARED_DATA / "cs224n", REPO / "data")
GLUE_PLACES = (SHARED_DATA / "glue", REPO / "data" / "glue_data")


def _first_with(places, names):
    for place in places:
        if all((place / name).exists() for name in names):
            return place
    return None


def real_cs224n_dir(*names: str) -> Path | None:
    """The first folder (../shared/data/cs224n, then data/) holding every named CS224N file; None if none does."""
    return _first_with(CS224N_PLACES, names)


def real_glue_dir(*tasks: str) -> Path | None:
    """The first glue_data-layout folder (../shared/data/glue, then data/glue_data) holding a folder for every
    named task (STS-B* reads STS-B/); None if none does."""
    return _first_with(GLUE_PLACES, [t.rstrip("*") for t in tasks])


def needs_cs224n(*names: str):
    """skipif marker: skip only when no known place holds the named CS224N files."""
    return pytest.mark.skipif(real_cs224n_dir(*names) is None,
                              reason=f"{', '.join(names)} found in none of {[str(p) for p in CS224N_PLACES]}")


def needs_glue(*tasks: str):
    """skipif marker: skip only when no known place holds the named GLUE tasks."""
    return pytest.mark.skipif(real_glue_dir(*tasks) is None,
                              reason=f"GLUE {', '.join(tasks)} found in none of {[str(p) for p in GLUE_PLACES]}")
