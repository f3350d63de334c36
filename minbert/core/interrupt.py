"""Ctrl-C and SIGTERM that lose no work and keep `--resume` exact (what a user sees: docs/training.md).

A resumable checkpoint must hold one consistent moment: weights, optimizer moments, LR schedule, batch positions
and RNG states all from the same step boundary, which a KeyboardInterrupt raised mid-step would break. So while a
run trains (`StopSignal.saving`) a signal only sets a flag; the loop's `check()` at the next step boundary raises
`Interrupted`, the script saves `interrupted.pt` and exits with status 130. Setup, evaluation and predictions
change no training state, so a signal stops them at once (`abortable`). Under torchrun a checkpoint is a
collective, so nothing is abortable and the ranks agree at every boundary (`agree`) to stop together.
"""

import signal
import sys
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_STATUS = 130   # what a shell reports for a process stopped by Ctrl-C


class Interrupted(Exception):
    """Raised at a safe point after SIGINT/SIGTERM; the script saves and exits."""


class StopSignal:
    """Context manager: while active, SIGINT/SIGTERM request a stop instead of raising mid-step."""

    def __init__(self, abortable: bool = True, agree=None):
        """abortable=False: no phase stops at once (under torchrun every rank must stop at the same step);
        agree(flag) -> bool combines the ranks' flags at each check (distributed.any_rank)."""
        self.signum = None
        self._can_abort = abortable
        self._abortable = abortable   # until defer(): nothing to save yet
        self._agree = agree
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():   # handlers can only be set there
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}
        return False

    def _handle(self, signum, frame):
        if self.signum is not None:          # the second signal: the user insists
            raise KeyboardInterrupt
        self.signum = signum
        if self._abortable:
            raise Interrupted(signal.Signals(signum).name)
        print(f"\n{signal.Signals(signum).name}: stopping after this step to save a resumable checkpoint "
              f"(again to quit now without saving)", file=sys.stderr, flush=True)

    def defer(self) -> None:
        """From now on a signal waits for the next check() (call it as training starts)."""
        self._abortable = False

    def check(self) -> None:
        """Call at a step boundary: raises Interrupted if a signal came during the last step (on any rank)."""
        requested = self.signum is not None
        if self._agree is not None:
            requested = self._agree(requested)
        if requested:
            raise Interrupted(signal.Signals(self.signum).name if self.signum else "a signal on another rank")

    @contextmanager
    def saving(self, path, save):
        """The training loop: from here a signal waits for the next step boundary (check()); there
        `save(path)` writes the resumable state, and the run exits with EXIT_STATUS."""
        self.defer()
        try:
            yield
        except Interrupted as e:
            save(path)
            print(f"\n{e}: saved {path}; continue with the same command plus --resume {path}")
            raise SystemExit(EXIT_STATUS) from None

    @contextmanager
    def abortable(self):
        """A phase that changes no training state: a signal stops it at once (where aborting is allowed)."""
        if not self._can_abort:
            yield
            return
        if self.signum is not None:
            raise Interrupted(signal.Signals(self.signum).name)
        before, self._abortable = self._abortable, True
        try:
            yield
        finally:
            self._abortable = before


def run(train, args, abortable: bool = True, agree=None):
    """Both scripts' main(): train(args, stop) under a StopSignal. A signal during setup (before
    stop.defer()) ends the run at once, with nothing to save."""
    with StopSignal(abortable, agree) as stop:
        try:
            return train(args, stop)
        except Interrupted as e:
            print(f"\n{e}: stopped before training started; nothing to save")
            raise SystemExit(EXIT_STATUS) from None
