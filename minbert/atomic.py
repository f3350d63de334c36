"""Files written whole or not at all.

`atomic_write(path, write)` lets `write` fill a temporary file beside `path`, then renames it into
place (os.replace is atomic on POSIX and Windows): a crash or Ctrl-C mid-write leaves the previous
file, never a truncated one. Checkpoints, model folders, metrics and reports all go through it.
"""

import os
import tempfile
from pathlib import Path


def atomic_write(path, write) -> None:
    """Call write(tmp_path) on a temp file beside `path`, then rename it into place."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
