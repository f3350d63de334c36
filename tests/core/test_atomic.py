"""minbert.core.atomic.atomic_write: a file is written whole or not at all, with the mode open() would give it.

Oracle: (c) properties, with open() itself as the live reference for the mode: under the same umask, a file
that atomic_write made has the permission bits of one that open(path, "w") made (0644 under umask 022, 0600
under 077), so a course's shared folder or a second user can read a run as they can read any other file.
"""

import os
import stat

import pytest

from minbert.core.atomic import atomic_write


@pytest.fixture
def umask():
    """Set the process umask for one test, then put the old one back."""
    old = os.umask(0o022)
    os.umask(old)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)],
                         ids=["umask022", "umask077", "umask002"])
def test_atomic_write_follows_the_umask_as_open_does(tmp_path, umask, mask, expected):
    umask(mask)
    with open(tmp_path / "by_open.txt", "w") as f:
        f.write("x")
    atomic_write(tmp_path / "by_atomic.txt", lambda tmp: open(tmp, "w").write("x"))
    assert mode(tmp_path / "by_open.txt") == expected, "test setup: open() did not follow the umask"
    assert mode(tmp_path / "by_atomic.txt") == expected, \
        (f"minbert.core.atomic.atomic_write under umask {mask:03o}: file mode {mode(tmp_path / 'by_atomic.txt'):03o}, "
         f"expected {expected:03o} as open() gives (mkstemp's temp file is 0600: set the mode before the rename)")


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text("old\n")

    def half_then_crash(tmp):
        open(tmp, "w").write("new, half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, half_then_crash)
    assert path.read_text() == "old\n", "minbert.core.atomic.atomic_write: a failed write replaced the old file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"], \
        f"minbert.core.atomic.atomic_write: a failed write left {sorted(p.name for p in tmp_path.iterdir())}"


def test_atomic_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "best.pt"
    path.write_text("old")
    atomic_write(path, lambda tmp: open(tmp, "w").write("new"))
    assert path.read_text() == "new" and [p.name for p in tmp_path.iterdir()] == ["best.pt"]
