"""Progress a user can see in any log.

On a terminal the training loop shows a tqdm bar. tqdm writes to stderr and (with `disable=None`) hides itself
when stderr is not a terminal, so a run logged to a file printed nothing for half an hour, and a slow run could
not be told from a hung one. Anchors: Hugging Face Trainer's `logging_steps` (periodic log lines) and PyTorch
Lightning's progress bar, which falls back to log lines off a terminal.

`bar(...)` returns tqdm when stdout and stderr are both terminals, else a `LogBar` with the same interface
(iterate, `set_postfix`) that prints one line to stdout, flushed, as the epoch starts (before its first step,
which pays one-off setup), after the first step, then every --log_every steps and every --log_seconds
seconds, and at the end of the epoch:

    epoch 1/6 step 120/500 (24%) | 2.1 steps/s, 67 ex/s | ETA epoch 3m01s, run 41m20s | sst 1.234 para 0.456

`show(bar, **numbers)` puts the running losses after the bar (floats to 3 places); `log_epoch(history, out_dir)`
prints an epoch's record above the bar and rewrites metrics.jsonl with every record so far.

Deliberately left out: a logging-framework integration (TensorBoard, W&B); metrics.jsonl has the epoch records.
"""

import os
import sys
import time

from minbert.core.flags import at_least, positive
from minbert.core.report import write_jsonl

LOG_EVERY = 0        # steps between log lines (0: by time only)
LOG_SECONDS = 30.0   # seconds between log lines


def add_args(parser) -> None:
    g = parser.add_argument_group("progress in logs (minbert/core/progress.py)")
    g.add_argument("--log_every", type=at_least(0), default=LOG_EVERY,
                   help="when stdout is not a terminal, print a progress line every N steps (0: by time only)")
    g.add_argument("--log_seconds", type=positive, default=LOG_SECONDS,
                   help="when stdout is not a terminal, print a progress line at least every T seconds")


def on_terminal() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class LogBar:
    """tqdm's loop interface (iterate, set_postfix), printing a log line now and then instead of a bar."""

    def __init__(self, iterable, epoch: int, epochs: int, total: int, initial: int = 0, every: int = LOG_EVERY,
                 seconds: float = LOG_SECONDS, examples_per_step: int | None = None, stream=None, clock=time.monotonic):
        self.iterable, self.epoch, self.epochs, self.total, self.initial = iterable, epoch, epochs, total, initial
        self.every, self.seconds, self.examples_per_step = every, seconds, examples_per_step
        self.stream, self.clock = stream, clock
        self.postfix, self.lines = {}, 0

    def set_postfix(self, postfix: dict | None = None, **kwargs) -> None:
        self.postfix = dict(postfix or {}, **kwargs)

    def __iter__(self):
        if self.initial < self.total:   # at once, so a log shows the loop has begun before the slow first step
            self.print(f"{self.position(self.initial)} | starting; a line after the first step, then every "
                       + (f"{self.every} steps or " if self.every else "") + f"{self.seconds:.0f} s")
        start = last = self.clock()
        done = 0
        for step in self.iterable:
            yield step
            done += 1
            now = self.clock()
            position = self.initial + done
            if (done == 1 or (self.every and position % self.every == 0) or now - last >= self.seconds
                    or position == self.total):
                self.line(position, done / max(now - start, 1e-9))
                last = now

    def line(self, position: int, steps_per_s: float) -> None:
        left = self.total - position
        eta_epoch = left / steps_per_s
        eta_run = eta_epoch + (self.epochs - self.epoch) * self.total / steps_per_s
        post = dict(self.postfix)
        rate = f"{steps_per_s:.2f} steps/s"
        if "ex/s" in post:
            rate += f", {post.pop('ex/s')} ex/s"
        elif self.examples_per_step:
            rate += f", {steps_per_s * self.examples_per_step:.0f} ex/s"
        losses = " ".join(f"{k} {v}" for k, v in post.items())
        self.print(f"{self.position(position)} | {rate} | ETA epoch {_duration(eta_epoch)}, run {_duration(eta_run)}"
                   + (f" | {losses}" if losses else ""))

    def position(self, position: int) -> str:
        percent = 100 * position / max(self.total, 1)
        return f"epoch {self.epoch}/{self.epochs} step {position}/{self.total} ({percent:.0f}%)"

    def print(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)
        self.lines += 1


def bar(iterable, epoch: int, epochs: int, total: int, initial: int = 0, disable: bool = False, args=None,
        examples_per_step: int | None = None):
    """A tqdm bar on a terminal, else a LogBar (--log_every / --log_seconds from `args`); `disable`: no output
    at all (ranks other than 0)."""
    if disable or on_terminal():
        from tqdm import tqdm
        return tqdm(iterable, desc=f"epoch {epoch}/{epochs}", initial=initial, total=total, disable=disable or None)
    return LogBar(iterable, epoch, epochs, total, initial, every=getattr(args, "log_every", LOG_EVERY),
                  seconds=getattr(args, "log_seconds", LOG_SECONDS), examples_per_step=examples_per_step)


def show(bar, **numbers) -> None:
    """The numbers after the bar (or in the next log line); floats to 3 places."""
    bar.set_postfix({k: f"{v:.3f}" if isinstance(v, float) else v for k, v in numbers.items()})


def log_epoch(history: list, out_dir, write: bool = True) -> None:
    """Print the last epoch's record above the bar; rewrite OUT_DIR/metrics.jsonl with every record so far
    (with write=False, on ranks other than 0, no file)."""
    if write:
        write_jsonl(os.path.join(out_dir, "metrics.jsonl"), history)
    from tqdm import tqdm
    tqdm.write(str(history[-1]))
