"""Files written whole or not at all.

`atomic_write` fills a temporary file beside the target, then renames it into place (os.replace is atomic on POSIX
and Windows): a crash or Ctrl-C mid-write leaves the previous file, never a truncated one. The finished file gets
the mode open() would have given it, not mkstemp's 0600, so a run is as readable as any file its user writes.
"""

import os
import tempfile
from pathlib import Path


def atomic_write(path, write) -> None:
    """Call write(tmp_path) on a temp file beside `path`, then rename it into place with open()'s mode."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        mask = os.umask(0o022)   # the umask can only be read by setting it: set it back at once
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)   # what open(path, "w") would give: 0644 under umask 022
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
