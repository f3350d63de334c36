"""The training log: a record every --log_every steps (steps.jsonl, a line, TensorBoard), and a clock a resume
continues.

Anchors: Hugging Face Trainer's `logging_steps`, `report_to` and its log records (loss, learning_rate, grad_norm,
epoch); PyTorch Lightning's `log_every_n_steps`, whose 50 is our default (minbert/core/progress.py says why).

Every --log_every optimizer steps, rank 0 appends one JSON line to OUT_DIR/steps.jsonl (docs/outputs.md):

    {"step": 150, "epoch": 1, "lr": 9.5e-05, "head_lr": 0.00095, "loss_sst": 1.52, "loss_para": 0.61,
     "loss_sts": 2.9, "examples_per_s": 63.1, "grad_norm": 4.2, "elapsed_s": 80.2}

- step: optimizer updates since the run began (over epochs and resumes); epoch: 1, 2, ... as in metrics.jsonl.
- lr: the learning rate the update used, of the first parameter group (the encoder); head_lr: the last group's
  (the heads, train_multitask.py's --head_lr) when it differs.
- loss_<name>: the mean of the batch losses since the previous record, or since the epoch began (the bar shows
  the epoch's running mean).
- examples_per_s: examples over training seconds since the previous record (evaluation time left out).
- grad_norm: the L2 norm over all gradients of the update at the record's step, measured on record steps only,
  where it is cheap and right: once per update (after every micro-batch of --grad_accum), after DDP's average
  across ranks, after PCGrad/GradVac combined the task gradients, and after fp16's unscale
  (minbert/run/optimizer_step.py). A non-finite number is written as null (JSON has no NaN).
- elapsed_s: seconds since the run began, earlier sessions of a resumed run included.

The record is also a line, above the tqdm bar on a terminal and among the progress lines in a log:

    step 150 (epoch 1) | loss sst 1.520 para 0.610 sts 2.900 | lr 9.5e-05, heads 9.5e-04 | grad norm 4.20 | 63 ex/s

`--report_to tensorboard` also writes each number as a TensorBoard scalar (train/<name>) and each epoch's dev
scores (dev/<metric>, at the epoch's last step) into OUT_DIR/tensorboard, through torch.utils.tensorboard
(`tensorboard --logdir runs` shows every run). The `tensorboard` package is an optional extra: without it the flag
is refused at parse time, naming `pip install tensorboard`.

Resume: the log's state (the run's seconds so far, the epoch's training seconds and examples, what the next record
averages) is in every resume checkpoint, so a resumed run's metrics.jsonl records the epoch's true speed and the run's true elapsed time. Before,
an epoch whose steps had all run before the interruption (a Ctrl-C during its evaluation) recorded 0.0 ex/s, and
elapsed_s restarted from 0. Records of the steps a resume redoes are dropped from steps.jsonl, and TensorBoard
purges its events from the first redone step on; a resumed run's steps.jsonl is the uninterrupted run's.

Left out: other trackers (W&B, MLflow); records from ranks other than 0 (their losses are their own shards').
"""

import argparse
import importlib.util
import json
import math
import os
import time

from minbert.core import progress
from minbert.run import distributed

STEPS = "steps.jsonl"
TENSORBOARD = "tensorboard"
REPORT_TO = ("none", "tensorboard")
clock = time.monotonic   # every time the log reads; tests put a fake clock here


def add_args(parser) -> None:
    group = progress.add_args(parser)   # --log_every, --log_seconds
    group.add_argument("--report_to", type=report_to, choices=REPORT_TO, default="none",
                       help="tensorboard: also write the step records and dev scores to OUT_DIR/tensorboard "
                            "(needs pip install tensorboard); steps.jsonl is written either way")


def report_to(text: str) -> str:
    """type= of --report_to: refuses tensorboard, at parse time, where the package is not installed."""
    if text == "tensorboard" and importlib.util.find_spec("tensorboard") is None:
        raise argparse.ArgumentTypeError("the tensorboard package is not installed: pip install tensorboard "
                                         "(or leave the flag out: OUT_DIR/steps.jsonl has the same numbers)")
    return text


def _sums(running: dict) -> dict:
    """A script's running loss sums as {name: (sum, count)}: train_multitask keeps {task: [sum, count]},
    train_mml {name: sum, ..., "n": count}."""
    if "n" in running:
        return {k: (v, running["n"]) for k, v in running.items() if k != "n"}
    return {k: (s, n) for k, (s, n) in running.items()}


def _finite(x):
    return x if x is None or math.isfinite(x) else None


class StepLog:
    """What the training loop calls: `bar(epoch)` before an epoch's steps, `step(bar, **running_means)` after each
    optimizer step, `epoch_times()` into the epoch's record, `epoch_end(history)` after it. `seen` counts the
    examples of the current step (train_multitask adds each batch's), else `examples_per_step` is used."""

    def __init__(self, args, update, loop, steps_per_epoch: int, examples_per_step: int = 0):
        self.args, self.update, self.loop, self.steps_per_epoch = args, update, loop, steps_per_epoch
        self.every, self.examples_per_step, self.main = args.log_every, examples_per_step, distributed.is_main()
        self.path = os.path.join(args.out_dir, STEPS)
        self.start, self.before = clock(), 0.0      # this session's start; seconds of earlier sessions
        self.epoch_s, self.epoch_examples, self.seen = 0.0, 0, 0
        self.window, self.last = [0.0, 0], {}   # seconds and examples since the last record; loss sums then
        self.rate, self.writer, self.purge = progress.RecentRate(), None, None

    # ------------------------------------------------------------------ the loop's calls
    def bar(self, epoch: int):
        """The epoch's progress bar (tqdm, or log lines: minbert/core/progress.py), from the loop's position."""
        self.mark = clock()
        self.rate.restart(self.mark)
        self.update.measure = self.due(self.completed() + 1)
        return progress.bar(range(self.loop.step, self.steps_per_epoch), epoch, self.args.epochs,
                            self.steps_per_epoch, self.loop.step, disable=not self.main, args=self.args)

    def step(self, bar, **numbers) -> None:
        """After an optimizer step: the bar's numbers and recent ex/s; every --log_every steps, a record."""
        now = clock()
        examples, self.seen = self.seen or self.examples_per_step, 0
        took, self.mark = now - self.mark, now
        self.epoch_s, self.epoch_examples = self.epoch_s + took, self.epoch_examples + examples
        self.window = [self.window[0] + took, self.window[1] + examples]
        self.rate.add(now, examples)
        progress.show(bar, **numbers, **{"ex/s": f"{self.rate.examples_per_s():.0f}"})
        step = self.completed() + 1   # loop.step is this step's index until the loop moves on
        if self.due(step):
            self.write(self.record(step), bar)
        self.update.measure = self.due(step + 1)

    def epoch_times(self) -> dict:
        """The epoch record's speed (examples over training seconds, every session of the epoch) and elapsed time."""
        return {"train_examples_per_s": round(self.epoch_examples / max(self.epoch_s, 1e-9), 1),
                "elapsed_s": round(self.elapsed(), 1)}

    def epoch_end(self, history: list) -> None:
        """Print the epoch's record, rewrite metrics.jsonl, add its dev scores to TensorBoard; next epoch's clock."""
        progress.log_epoch(history, self.args.out_dir, write=self.main)
        if self.tensorboard():
            record = history[-1]
            for key, value in record.items():
                if key != "epoch" and not key.startswith(("loss_", "train_", "elapsed")) and _finite(value) is not None:
                    self.writer.add_scalar(f"dev/{key}", value, record["epoch"] * self.steps_per_epoch)
            self.writer.flush()
        self.epoch_s, self.epoch_examples, self.last = 0.0, 0, {}   # the loop's loss sums restart with the epoch

    # ------------------------------------------------------------------ a record
    def due(self, step: int) -> bool:
        return step % self.every == 0

    def completed(self) -> int:
        """Optimizer steps finished since the run began (at a step boundary)."""
        return (self.loop.epoch - 1) * self.steps_per_epoch + self.loop.step

    def elapsed(self) -> float:
        return self.before + clock() - self.start

    def record(self, step: int) -> dict:
        lrs = self.update.last_lr
        record = {"step": step, "epoch": self.loop.epoch, "lr": lrs[0]}
        if lrs[-1] != lrs[0]:
            record["head_lr"] = lrs[-1]
        for name, (s, n) in _sums(self.loop.running).items():
            s0, n0 = self.last.get(name, (0.0, 0))
            if n > n0:
                record[f"loss_{name}"] = _finite(round((s - s0) / (n - n0), 4))
        self.last = _sums(self.loop.running)
        record["examples_per_s"] = round(self.window[1] / max(self.window[0], 1e-9), 1)
        record["grad_norm"] = _finite(self.update.grad_norm)
        record["elapsed_s"] = round(self.elapsed(), 1)
        self.window = [0.0, 0]
        return record

    def write(self, record: dict, bar) -> None:
        if not self.main:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tensorboard():
            for key, value in record.items():
                if key not in ("step", "epoch") and value is not None:
                    self.writer.add_scalar(f"train/{key}", value, record["step"])
        bar.write(line(record))   # above tqdm's bar, or a plain line

    def tensorboard(self):
        """The SummaryWriter of --report_to tensorboard (made on first use, rank 0 only), else None."""
        if self.writer is None and self.main and self.args.report_to == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter
            self.writer = SummaryWriter(os.path.join(self.args.out_dir, TENSORBOARD), purge_step=self.purge)
        return self.writer

    # ------------------------------------------------------------------ resume
    def state_dict(self) -> dict:
        return {"elapsed_s": self.elapsed(), "epoch_s": self.epoch_s, "epoch_examples": self.epoch_examples,
                "window": list(self.window), "last": {k: list(v) for k, v in self.last.items()},
                "step": self.completed()}

    def load_state_dict(self, state: dict) -> None:
        self.before, self.start = state["elapsed_s"], clock()
        self.epoch_s, self.epoch_examples = state["epoch_s"], state["epoch_examples"]
        self.window, self.last = list(state["window"]), {k: tuple(v) for k, v in state["last"].items()}
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
    """The terminal line of a step record."""
    def number(value, digits):
        return "nan" if value is None else f"{value:.{digits}f}"

    losses = " ".join(f"{k[5:]} {number(v, 3)}" for k, v in record.items() if k.startswith("loss_"))
    lr = f"lr {record['lr']:.1e}" + (f", heads {record['head_lr']:.1e}" if "head_lr" in record else "")
    return (f"step {record['step']} (epoch {record['epoch']}) | loss {losses} | {lr} | "
            f"grad norm {number(record['grad_norm'], 2)} | {record['examples_per_s']:.0f} ex/s")
