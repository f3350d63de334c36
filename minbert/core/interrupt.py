"""Ctrl-C and SIGTERM that lose no work and keep `--resume` exact (what a user sees: docs/training.md).

A checkpoint must hold one step boundary, so while a run trains a signal only sets `stop.signal`; the loop reads it
at the next boundary and raises `Interrupted`, which `stop.saving` turns into interrupted.pt and exit status 130.
Setup, evaluation and predictions change no training state: there a signal stops at once (`abortable`; never
under torchrun, where the loop asks every rank). A second signal raises KeyboardInterrupt: no save.
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
    """Context manager: while active, SIGINT/SIGTERM set `signal` (its name) instead of raising mid-step."""

    def __init__(self, abortable: bool = True):
        """abortable=False: no phase stops at once (under torchrun every rank must stop at the same step)."""
        self.signal = None            # the first signal's name, read by the loop at each step boundary
        self._can_abort = abortable
        self._abortable = abortable   # until saving(): nothing to save yet
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
        if self.signal is not None:          # the second signal: the user insists
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name
        if self._abortable:
            raise Interrupted(self.signal)
        print(f"\n{self.signal}: stopping after this step to save a resumable checkpoint "
              f"(again to quit now without saving)", file=sys.stderr, flush=True)

    @contextmanager
    def saving(self, path, save):
        """The training loop: from here a signal waits for the loop to raise Interrupted at a step boundary;
        then `save(path)` writes the resumable state, and the run exits with EXIT_STATUS."""
        self._abortable = False
        try:
            yield
        except Interrupted as e:
            save(path)
            print(f"\n{e}: saved {path}; continue with the same command plus --resume {path}", flush=True)
            raise SystemExit(EXIT_STATUS) from None

    @contextmanager
    def abortable(self):
        """A phase that changes no training state: a signal stops it at once (where aborting is allowed)."""
        if not self._can_abort:
            yield
            return
        if self.signal is not None:
            raise Interrupted(self.signal)
        before, self._abortable = self._abortable, True
        try:
            yield
        finally:
            self._abortable = before


@contextmanager
def model_kept(source, doing: str, then: str):
    """After training (predictions, scores): a signal ends the run with a line saying the model is safe in the run
    folder `source`, and that the same command plus --predict_only --resume `source` `then`."""
    try:
        yield
    except Interrupted:
        print(f"\ninterrupted while {doing}; the model is in {source}: the same command plus --predict_only "
              f"--resume {source} {then}")
        raise SystemExit(EXIT_STATUS) from None
