"""The training log: what a run shows as it goes (a bar or progress lines) and what it leaves (steps.jsonl,
metrics.jsonl, TensorBoard), all from one set of numbers. docs/outputs.md describes every record field.

Anchors: Hugging Face Trainer's `logging_steps`, `report_to` and log records; PyTorch Lightning's
`log_every_n_steps` and its progress bar, which falls back to log lines off a terminal (tqdm hides itself when
stderr is not a terminal: a run logged to a file would look hung).

`Log(args, update, loop, steps_per_epoch)` is what the training loop calls: `for step in log.steps(epoch)`, then
`log.step(examples)` after each optimizer step, `log.epoch_record()` into the epoch's record and
`log.epoch_end(history)` after it. It reads the loss sums of `loop.running` ({name: [sum, count]}, kept by
`add_losses`), the update's `last_lr` and `grad_norm` (minbert/run/optimizer_step.py) and the loop's position. Its
one rate (`RecentRate`) is that of the last RATE_WINDOW steps, not the average since the epoch began (which a
changing machine load throws off): the bar, the lines, the ETA and the records use it.

`phase(iterable, desc, total)` shows work that is not a training epoch (evaluation, predictions): a tqdm bar, or
in a log a line every 30 s. Left out: other trackers (W&B, MLflow); records from ranks other than 0.
"""

import argparse
import importlib.util
import json
import math
import os
import sys
import time
from collections import deque

from minbert.core.flags import at_least, positive
from minbert.core.report import write_jsonl

LOG_EVERY = 50       # steps between records: Lightning's; a record every ~25 s of the README's CPU quick start
LOG_SECONDS = 30.0   # seconds between progress lines in a log
RATE_WINDOW = 50     # steps: the rate and the ETA are those of the last RATE_WINDOW steps
STEPS = "steps.jsonl"
TENSORBOARD = "tensorboard"
REPORT_TO = ("none", "tensorboard")
clock = time.monotonic   # every time the log reads; tests put a fake clock here


def add_args(parser) -> None:
    g = parser.add_argument_group("progress and logs (minbert/core/progress.py)")
    g.add_argument("--log_every", type=at_least(1), default=LOG_EVERY,
                   help="every N optimizer steps: a record in OUT_DIR/steps.jsonl (losses, lr, gradient norm, ex/s) "
                        "and a line on the terminal or in the log; lower it for short runs")
    g.add_argument("--log_seconds", type=positive, default=LOG_SECONDS,
                   help="when stdout is not a terminal, print a progress line at least every T seconds")
    g.add_argument("--report_to", type=report_to, choices=REPORT_TO, default="none",
                   help="tensorboard: also write the step records and dev scores to OUT_DIR/tensorboard "
                        "(needs pip install tensorboard); steps.jsonl is written either way")


def report_to(text: str) -> str:
    """type= of --report_to: refuses tensorboard, at parse time, where the package is not installed."""
    if text == "tensorboard" and importlib.util.find_spec("tensorboard") is None:
        raise argparse.ArgumentTypeError("the tensorboard package is not installed: pip install tensorboard "
                                         "(or leave the flag out: OUT_DIR/steps.jsonl has the same numbers)")
    return text


def on_terminal() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


def _duration(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, m, s = seconds // 3600, seconds % 3600 // 60, seconds % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def _finite(x):
    return x if x is None or math.isfinite(x) else None


def add_losses(sums: dict, losses: dict) -> bool:
    """Add each loss (a 0-d tensor) to the running sums {name: [sum, count]} (`loop.running`, both scripts) if every
    one is finite; returns whether they were (a non-finite step's loss is left out: one NaN would stick in the mean)."""
    values = {name: loss.item() for name, loss in losses.items()}
    if not all(math.isfinite(v) for v in values.values()):
        return False
    for name, value in values.items():
        sums[name] = [sums[name][0] + value, sums[name][1] + 1]
    return True


def means(sums: dict) -> dict:
    """The mean of each name's running sum {name: [sum, count]} (0 before its first)."""
    return {name: s / max(n, 1) for name, (s, n) in sums.items()}


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


class Log:
    """The training loop's log; see the module docstring. Rank 0 alone prints and writes files."""

    def __init__(self, args, update, loop, steps_per_epoch: int):
        self.args, self.update, self.loop, self.total = args, update, loop, steps_per_epoch
        self.main = int(os.environ.get("RANK", "0")) == 0   # torchrun's rank; a single process is rank 0
        self.terminal = on_terminal()
        self.path = os.path.join(args.out_dir, STEPS)
        self.start, self.before = clock(), 0.0       # this session's start; seconds of earlier sessions
        self.epoch_s, self.epoch_examples = 0.0, 0   # this epoch's training seconds and examples, every session
        self.last = {}                               # the loss sums at the previous record
        self.rate, self.bar, self.writer, self.purge = RecentRate(), None, None, None
        self.epoch, self.session_steps, self.mark, self.shown = 1, 0, self.start, self.start   # set by steps()

    # ------------------------------------------------------------------ the loop's calls
    def steps(self, epoch: int):
        """The epoch's step indices from the loop's position (a resume starts mid-epoch), under a tqdm bar on a
        terminal; in a log, a line now, before the slow first step."""
        self.epoch, self.session_steps = epoch, 0
        self.mark = self.shown = clock()
        self.rate.restart(self.mark)
        steps = range(self.loop.step, self.total)
        if self.main and self.terminal:
            from tqdm import tqdm
            self.bar = tqdm(steps, desc=f"epoch {epoch}/{self.args.epochs}", initial=self.loop.step, total=self.total,
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
            return self.bar
        if self.main and self.loop.step < self.total:
            self.print(f"{self.position(self.loop.step)} | starting; a line after the first step, "
                       f"then every {self.args.log_seconds:.0f} s")
        return steps

    def step(self, examples: int, **numbers) -> None:
        """After an optimizer step of `examples` examples: the rate, the bar's numbers or a progress line now and
        then, and every --log_every steps a record. `numbers`: more to show after the losses."""
        now = clock()
        took, self.mark = now - self.mark, now
        self.epoch_s, self.epoch_examples = self.epoch_s + took, self.epoch_examples + examples
        self.rate.add(now, examples)
        self.session_steps += 1
        position = self.loop.step + 1   # loop.step is this step's index until the loop moves on
        if not self.main:
            return
        shown = {name: f"{mean:.3f}" for name, mean in means(self.loop.running).items()} | numbers
        if self.terminal:
            self.bar.set_postfix({"ex/s": f"{self.rate.examples_per_s():.0f}", "ETA": self.eta(position)} | shown)
        elif self.session_steps == 1 or now - self.shown >= self.args.log_seconds or position == self.total:
            losses = " | " + " ".join(f"{k} {v}" for k, v in shown.items()) if shown else ""
            self.print(f"{self.position(position)} | {self.rate.steps_per_s():.2f} steps/s, "
                       f"{self.rate.examples_per_s():.0f} ex/s | ETA {self.eta(position)}{losses}")
            self.shown = now
        step = self.completed() + 1
        if step % self.args.log_every == 0:
            self.write(self.record(step))

    def epoch_record(self) -> dict:
        """The epoch record's mean losses (loss_<name>), speed (examples over training seconds, every session of the
        epoch) and elapsed time."""
        return {**{f"loss_{name}": round(mean, 4) for name, mean in means(self.loop.running).items()},
                "train_examples_per_s": round(self.epoch_examples / max(self.epoch_s, 1e-9), 1),
                "elapsed_s": round(self.elapsed(), 1)}

    def epoch_end(self, history: list) -> None:
        """Print the epoch's record, rewrite metrics.jsonl, add its dev scores to TensorBoard; next epoch's clock."""
        if self.main:
            write_jsonl(os.path.join(self.args.out_dir, "metrics.jsonl"), history)
            self.print(str(history[-1]))
        if self.tensorboard():
            record = history[-1]
            for key, value in record.items():
                if key != "epoch" and not key.startswith(("loss_", "train_", "elapsed")) and _finite(value) is not None:
                    self.writer.add_scalar(f"dev/{key}", value, record["epoch"] * self.total)
            self.writer.flush()
        self.epoch_s, self.epoch_examples, self.last = 0.0, 0, {}   # the loop's loss sums restart with the epoch

    # ------------------------------------------------------------------ lines
    def position(self, position: int) -> str:
        return (f"epoch {self.epoch}/{self.args.epochs} step {position}/{self.total} "
                f"({100 * position / max(self.total, 1):.0f}%)")

    def eta(self, position: int) -> str:
        """The time left of the epoch and of the run, at the recent rate."""
        per_step = 1 / self.rate.steps_per_s()
        epoch = (self.total - position) * per_step
        run = epoch + (self.args.epochs - self.epoch) * self.total * per_step
        return f"epoch {_duration(epoch)}, run {_duration(run)}"

    def print(self, text: str) -> None:
        """A line of its own: above tqdm's bar on a terminal, else printed and flushed."""
        if self.bar is not None and self.terminal:
            self.bar.write(text)
        else:
            print(text, flush=True)

    # ------------------------------------------------------------------ a record
    def completed(self) -> int:
        """Optimizer steps finished since the run began (at a step boundary)."""
        return (self.loop.epoch - 1) * self.total + self.loop.step

    def elapsed(self) -> float:
        return self.before + clock() - self.start

    def record(self, step: int) -> dict:
        lrs = self.update.last_lr
        record = {"step": step, "epoch": self.loop.epoch, "lr": lrs[0]}
        if lrs[-1] != lrs[0]:
            record["head_lr"] = lrs[-1]
        for name, (s, n) in self.loop.running.items():
            s0, n0 = self.last.get(name, (0.0, 0))
            if n > n0:
                record[f"loss_{name}"] = _finite(round((s - s0) / (n - n0), 4))
        self.last = {name: tuple(sums) for name, sums in self.loop.running.items()}
        record["examples_per_s"] = round(self.rate.examples_per_s(), 1)
        record["grad_norm"] = _finite(float(self.update.grad_norm))
        record["elapsed_s"] = round(self.elapsed(), 1)
        return record

    def write(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tensorboard():
            for key, value in record.items():
                if key not in ("step", "epoch") and value is not None:
                    self.writer.add_scalar(f"train/{key}", value, record["step"])
        self.print(line(record))

    def tensorboard(self):
        """The SummaryWriter of --report_to tensorboard (made on first use, rank 0 only), else None."""
        if self.writer is None and self.main and self.args.report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(os.path.join(self.args.out_dir, TENSORBOARD), purge_step=self.purge)
        return self.writer

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict:
        return {"elapsed_s": self.elapsed(), "epoch_s": self.epoch_s, "epoch_examples": self.epoch_examples,
                "last": {k: list(v) for k, v in self.last.items()}, "step": self.completed()}

    def load_state_dict(self, state: dict) -> None:
        self.before, self.start = state["elapsed_s"], clock()
        self.epoch_s, self.epoch_examples = state["epoch_s"], state["epoch_examples"]
        self.last = {k: tuple(v) for k, v in state["last"].items()}
        self.purge = state["step"] + 1   # the first step this session redoes
        if self.main and os.path.isfile(self.path):   # drop the records of the steps the resume redoes
            with open(self.path) as f:
                kept = [x for x in f if (_step(x) or math.inf) <= state["step"]]
            with open(self.path, "w") as f:
                f.writelines(kept)


def _step(text: str):
    """A steps.jsonl line's step; None for a line cut short by a crash."""
    try:
        return json.loads(text)["step"]
    except (ValueError, KeyError, TypeError):
        return None


def line(record: dict) -> str:
    """The printed line of a step record."""
    def number(value, digits):
        return "nan" if value is None else f"{value:.{digits}f}"

    losses = " ".join(f"{k[5:]} {number(v, 3)}" for k, v in record.items() if k.startswith("loss_"))
    lr = f"lr {record['lr']:.1e}" + (f", heads {record['head_lr']:.1e}" if "head_lr" in record else "")
    return (f"step {record['step']} (epoch {record['epoch']}) | loss {losses} | {lr} | "
            f"grad norm {number(record['grad_norm'], 2)} | {record['examples_per_s']:.0f} ex/s")


def log_lines(iterable, desc: str, total: int):
    """`iterable`, with a phase's progress in a log: a line as it starts, then every LOG_SECONDS and at its end
    ("predict dev sst, para, sts 12/35 (34%) | 3.10 batches/s | ETA 0m07s")."""
    def where(done: int) -> str:
        return f"{desc} {done}/{total} ({100 * done / max(total, 1):.0f}%)"

    print(f"{where(0)} | starting; every {LOG_SECONDS:.0f} s", flush=True)
    rate = RecentRate()
    last = clock()
    rate.restart(last)
    for done, item in enumerate(iterable, 1):
        yield item
        now = clock()
        rate.add(now)
        if now - last >= LOG_SECONDS or done == total:
            left = (total - done) / rate.steps_per_s()
            print(f"{where(done)} | {rate.steps_per_s():.2f} batches/s | ETA {_duration(left)}", flush=True)
            last = now


def phase(iterable, desc: str, total: int):
    """Progress of work that is not an epoch (evaluation, predictions): on a terminal a line, then a tqdm bar that
    disappears when done; in a log `log_lines`."""
    if on_terminal():
        from tqdm import tqdm
        print(f"{desc}: {total} batches", flush=True)
        return tqdm(iterable, desc=desc, total=total, leave=False)
    return log_lines(iterable, desc, total)
