"""Files written whole or not at all.

`atomic_write(path, write)` lets `write` fill a temporary file beside `path`, then renames it into
place (os.replace is atomic on POSIX and Windows): a crash or Ctrl-C mid-write leaves the previous
file, never a truncated one. Checkpoints, model folders, metrics and reports all go through it.

mkstemp makes its file 0600 whatever the umask (a temp file must not be readable by others while it is
a temp file); the finished file gets the mode open() would have given it (0666 less the umask: 0644 under
the usual 022), set before the rename, so a run is as readable as any other file its user writes.
"""

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    """The process umask (os.umask can only be read by setting it, so set it back at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path, write) -> None:
    """Call write(tmp_path) on a temp file beside `path`, then rename it into place with open()'s mode."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())   # what open(path, "w") would give: 0644 under umask 022
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
