"""Progress a user can see in any log.

On a terminal the training loop shows a tqdm bar. tqdm writes to stderr and (with `disable=None`) hides itself
when stderr is not a terminal, so a run logged to a file printed nothing for half an hour, and a slow run could
not be told from a hung one. Anchors: Hugging Face Trainer's `logging_steps` (periodic log lines) and PyTorch
Lightning's progress bar, which falls back to log lines off a terminal.

`bar(...)` returns tqdm when stdout and stderr are both terminals, else a `LogBar` with the same interface
(iterate, `set_postfix`, `write`) that prints one line to stdout, flushed, as the epoch starts (before its first
step, which pays one-off setup), after the first step, then every --log_seconds seconds, and at the end of the
epoch (the step records of minbert/run/step_log.py come every --log_every steps between them):

    epoch 1/6 step 120/500 (24%) | 2.1 steps/s, 67 ex/s | ETA epoch 3m01s, run 41m20s | sst 1.234 para 0.456

The rate and the ETA are those of the last RATE_WINDOW steps (`RecentRate`), not the average since the epoch
began: on a machine whose load changes, the average since the start was off by 1.7x. (tqdm's own bar smooths
its rate the same way, with an exponential moving average.) `phase(iterable, desc, total)` is the same for
work that is not a training epoch (dev evaluation, writing predictions): a line as it starts, then a tqdm bar,
or in a log a line every 30 s and at its end.

`show(bar, **numbers)` puts the running losses after the bar (floats to 3 places); `log_epoch(history, out_dir)`
prints an epoch's record above the bar and rewrites metrics.jsonl with every record so far. The per-step records
(steps.jsonl, TensorBoard) are minbert/run/step_log.py's.
"""

import os
import sys
import time
from collections import deque

from minbert.core.flags import at_least, positive
from minbert.core.report import write_jsonl

# Steps between steps.jsonl records (and their lines). 50 is Lightning's log_every_n_steps: on the README's CPU
# quick start (about 0.5 s a step) a record every ~25 s, near the 30 s time rule; on a GPU (bert-base, ~8 steps/s)
# every ~6 s, a few hundred records per run. Trainer's 500 would give the quick start one record in 4 minutes.
LOG_EVERY = 50
LOG_SECONDS = 30.0   # seconds between progress lines in a log
RATE_WINDOW = 50     # steps: the rate and the ETA are those of the last RATE_WINDOW steps


def add_args(parser):
    """--log_every and --log_seconds; returns their group (minbert/run/step_log.py adds --report_to to it)."""
    g = parser.add_argument_group("progress and logs (minbert/core/progress.py, minbert/run/step_log.py)")
    g.add_argument("--log_every", type=at_least(1), default=LOG_EVERY,
                   help="every N optimizer steps: a record in OUT_DIR/steps.jsonl (losses, lr, gradient norm, ex/s) "
                        "and a line on the terminal or in the log; lower it for short runs")
    g.add_argument("--log_seconds", type=positive, default=LOG_SECONDS,
                   help="when stdout is not a terminal, print a progress line at least every T seconds")
    return g


def on_terminal() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class RecentRate:
    """Steps and examples per second over the last `window` steps (fewer at the start). `add(now, examples)` after
    each step; a pause between calls (evaluation) is left out by `restart(now)`, so only training time counts."""

    def __init__(self, window: int = RATE_WINDOW):
        self.steps = deque(maxlen=window)   # (seconds, examples) of each recent step
        self.last = None

    def restart(self, now: float) -> None:
        self.last = now

    def add(self, now: float, examples: int = 0) -> None:
        self.steps.append((now - self.last, examples))
        self.last = now

    def steps_per_s(self) -> float:
        return len(self.steps) / max(sum(s for s, _ in self.steps), 1e-9)

    def examples_per_s(self) -> float:
        return sum(n for _, n in self.steps) / max(sum(s for s, _ in self.steps), 1e-9)


class LogBar:
    """tqdm's loop interface (iterate, set_postfix, write), printing a log line now and then instead of a bar.
    `desc` names a phase (evaluation, predictions) in place of "epoch i/n"; a phase prints no first-step line."""

    def __init__(self, iterable, epoch: int, epochs: int, total: int, initial: int = 0, seconds: float = LOG_SECONDS,
                 stream=None, clock=time.monotonic, desc: str | None = None):
        self.iterable, self.epoch, self.epochs, self.total, self.initial = iterable, epoch, epochs, total, initial
        self.seconds, self.desc = seconds, desc
        self.stream, self.clock = stream, clock
        self.postfix, self.lines, self.rate = {}, 0, RecentRate()

    def set_postfix(self, postfix: dict | None = None, **kwargs) -> None:
        self.postfix = dict(postfix or {}, **kwargs)

    def __iter__(self):
        if self.initial < self.total:   # at once, so a log shows the loop has begun before the slow first step
            first = "" if self.desc else "a line after the first step, then "
            self.print(f"{self.position(self.initial)} | starting; {first}every {self.seconds:.0f} s")
        last = self.clock()
        self.rate.restart(last)
        done = 0
        for step in self.iterable:
            yield step
            done += 1
            now = self.clock()
            self.rate.add(now)
            position = self.initial + done
            if (done == 1 and not self.desc) or now - last >= self.seconds or position == self.total:
                self.line(position, self.rate.steps_per_s())
                last = now

    def line(self, position: int, steps_per_s: float) -> None:
        left = self.total - position
        eta_epoch = left / steps_per_s
        eta_run = eta_epoch + (self.epochs - self.epoch) * self.total / steps_per_s
        post = dict(self.postfix)
        rate = f"{steps_per_s:.2f} {'batches' if self.desc else 'steps'}/s"
        if "ex/s" in post:   # the training loop's recent rate (minbert/run/step_log.py)
            rate += f", {post.pop('ex/s')} ex/s"
        losses = " ".join(f"{k} {v}" for k, v in post.items())
        eta = (f"ETA {_duration(eta_epoch)}" if self.desc
               else f"ETA epoch {_duration(eta_epoch)}, run {_duration(eta_run)}")
        self.print(f"{self.position(position)} | {rate} | {eta}" + (f" | {losses}" if losses else ""))

    def position(self, position: int) -> str:
        percent = 100 * position / max(self.total, 1)
        if self.desc:
            return f"{self.desc} {position}/{self.total} ({percent:.0f}%)"
        return f"epoch {self.epoch}/{self.epochs} step {position}/{self.total} ({percent:.0f}%)"

    def write(self, text: str) -> None:   # tqdm.write's place: a line of its own
        self.print(text)

    def print(self, text: str) -> None:
        print(text, file=self.stream or sys.stdout, flush=True)
        self.lines += 1


def bar(iterable, epoch: int, epochs: int, total: int, initial: int = 0, disable: bool = False, args=None):
    """A tqdm bar on a terminal, else a LogBar (--log_seconds from `args`); `disable`: no output at all (ranks
    other than 0)."""
    if disable or on_terminal():
        from tqdm import tqdm
        return tqdm(iterable, desc=f"epoch {epoch}/{epochs}", initial=initial, total=total, disable=disable or None)
    return LogBar(iterable, epoch, epochs, total, initial, seconds=getattr(args, "log_seconds", LOG_SECONDS))


def phase(iterable, desc: str, total: int, seconds: float = LOG_SECONDS):
    """Progress of work that is not an epoch (evaluation, predictions): on a terminal a line, then a tqdm bar that
    disappears when done; in a log lines as it starts, every `seconds` and at its end ("predict dev sst, para, sts
    12/35 (34%) | ...")."""
    if on_terminal():
        from tqdm import tqdm
        print(f"{desc}: {total} batches", flush=True)
        return tqdm(iterable, desc=desc, total=total, leave=False)
    return LogBar(iterable, 1, 1, total, seconds=seconds, desc=desc)


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
