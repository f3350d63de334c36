"""One exception type for mistakes a user can fix, and the one place that prints them.

A `UserError` is raised where user input is first found wrong (a flag, a data file, a checkpoint, an output path);
its message names the flag, the file (with its line) or the checkpoint key, and what was expected. The entry
points wrap `main` in `cli`, which prints `error: <message>` and exits with status 2: no traceback, because the
fix is in the message. Every other exception is a bug in minbert and keeps its traceback. (The readers'
`DataError`, the loader's `CheckpointError` and the hub's `CheckpointNotFoundError` are UserErrors.)
"""

import os
import sys


MAX_BAD_STEPS = 10   # non-finite optimizer steps in a row that stop a training run: a diverged run, not a bad batch
DIVERGED = ("{n} optimizer steps in a row had a non-finite loss: lower --lr or use --amp off; {out_dir}/last.pt "
            "holds the last finished epoch")


class UserError(Exception):
    """Bad input from the user: the message says what was given, where, and what was expected."""


def cli(main, argv=None):
    """Run `main(argv)`; a UserError becomes one line on stderr and exit status 2. A second Ctrl-C
    (minbert.core.interrupt: the first one saves and stops at the next step) quits with status 130."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        print("\ninterrupted: quit without saving; the last checkpoint (last.pt) still resumes exactly",
              file=sys.stderr)
        sys.exit(130)
    except (UserError, NotImplementedError) as e:
        # A classroom stub (minbert/classroom/assignments.py) names the assignment and the function to write,
        # so its traceback adds nothing. Other NotImplementedErrors (e.g. torch lacking a kernel)
        # are not ours to explain and keep their traceback.
        if not isinstance(e, UserError) and not str(e).startswith("assignment "):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:   # the reader of a pipe left first (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # so the flush at exit cannot fail again
        sys.exit(1)
