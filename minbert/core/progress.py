"""What a training loop cannot write in a line of its own: the log's flags, tqdm's bar in a log file (one line per
--log_seconds instead of carriage returns), a step record and its printed line, the records a resume redoes, and
TensorBoard (Anchors: Hugging Face Trainer's `logging_steps` and `report_to`, Lightning's `log_every_n_steps`).
Every record field: docs/outputs.md. Left out: other trackers (W&B, MLflow); records from ranks other than 0.
"""

import argparse
import importlib.util
import json
import math
import os
import sys

from tqdm import tqdm

from minbert.core.flags import at_least, positive
from minbert.core.report import write_jsonl

LOG_EVERY = 50       # steps between records: Lightning's; a record every ~25 s of the README's CPU quick start
LOG_SECONDS = 30.0   # seconds between progress lines in a log
STEPS = "steps.jsonl"
TENSORBOARD = "tensorboard"
REPORT_TO = ("none", "tensorboard")


def add_args(parser) -> None:
    g = parser.add_argument_group("progress and logs (minbert/core/progress.py)")
    g.add_argument("--log_every", type=at_least(1), default=LOG_EVERY,
                   help="every N optimizer steps: a record in OUT_DIR/steps.jsonl (losses, lr, gradient norm, ex/s) "
                        "and a line on the terminal or in the log; lower it for short runs")
    g.add_argument("--log_seconds", type=positive, default=LOG_SECONDS,
                   help="when stdout is not a terminal, print a progress line every T seconds (at the end of the "
                        "step in which they pass)")
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


class Lines:
    """tqdm's file in a log: each redraw of the bar ('\r' + text) printed as a line, on today's sys.stdout; a redraw
    at the same count as the line before (the bar's close after its last step's line) is left out."""

    def __init__(self):
        self.last = None

    def write(self, text: str) -> None:
        text = text.replace("\r", "").rstrip()
        if text and text.split(" [")[0] != self.last:   # "epoch 1/2:  40%|####      | 10/25" [times]
            print(text, flush=True)
            self.last = text.split(" [")[0]

    def flush(self) -> None:
        pass


def bar(iterable, desc: str, total: int, initial: int = 0, seconds: float = LOG_SECONDS, leave: bool = True):
    """tqdm over `iterable` (rank 0 alone): drawn on a terminal; in a log, a line as it starts, every `seconds` and
    at its end ("epoch 1/2:  40%|####      | 10/25 [00:12<00:18,  1.21it/s]")."""
    hidden = int(os.environ.get("RANK", "0")) != 0   # torchrun's ranks > 0 show nothing
    if on_terminal():
        return tqdm(iterable, desc=desc, total=total, initial=initial, leave=leave, disable=hidden, dynamic_ncols=True)
    return tqdm(iterable, desc=desc, total=total, initial=initial, disable=hidden, file=Lines(), ascii=True,
                mininterval=seconds, miniters=1)


def phase(iterable, desc: str, total: int):
    """Progress of work that is not an epoch (evaluation, predictions): on a terminal a line, then a bar that
    disappears when done; in a log `bar`'s lines, the last one at 100%."""
    if on_terminal():
        print(f"{desc}: {total} batches", flush=True)
    return bar(iterable, desc, total, leave=False)


def record(step: int, epoch: int, lrs: list, window: dict, seen: list, grad_norm, elapsed: float) -> dict:
    """A steps.jsonl record after optimizer step `step`: the learning rates it used (the heads' where they differ),
    each loss's mean since the last record ({name: [sum, count]}, finite losses only), the epoch's training
    examples per second (`seen`: [seconds, examples]), the gradient norm and the run's seconds."""
    head_lr = {"head_lr": lrs[-1]} if lrs[-1] != lrs[0] else {}
    losses = {f"loss_{name}": finite(round(s / n, 4)) for name, (s, n) in window.items() if n}
    return {"step": step, "epoch": epoch, "lr": lrs[0], **head_lr, **losses,
            "examples_per_s": round(seen[1] / max(seen[0], 1e-9), 1), "grad_norm": finite(float(grad_norm)),
            "elapsed_s": round(elapsed, 1)}


def epoch_record(sums: dict, seen: list, elapsed: float) -> dict:
    """The epoch record's mean losses (loss_<name>), training examples per second and the run's seconds."""
    return {**{f"loss_{name}": round(s / max(n, 1), 4) for name, (s, n) in sums.items()},
            "train_examples_per_s": round(seen[1] / max(seen[0], 1e-9), 1), "elapsed_s": round(elapsed, 1)}


def epoch_end(out_dir, history: list, writer, step: int) -> None:
    """After an epoch (rank 0): metrics.jsonl rewritten, its record printed, its dev scores to TensorBoard."""
    if int(os.environ.get("RANK", "0")) != 0:
        return
    write_jsonl(os.path.join(out_dir, "metrics.jsonl"), history)
    print(history[-1], flush=True)
    scores = {k: v for k, v in history[-1].items() if not k.startswith(("loss_", "train_", "elapsed"))}
    report(writer, "dev", scores, step)


def line(record: dict) -> str:
    """The printed line of a steps.jsonl record."""
    def number(value, digits):
        return "nan" if value is None else f"{value:.{digits}f}"

    losses = " ".join(f"{k[5:]} {number(v, 3)}" for k, v in record.items() if k.startswith("loss_"))
    lr = f"lr {record['lr']:.1e}" + (f", heads {record['head_lr']:.1e}" if "head_lr" in record else "")
    return (f"step {record['step']} (epoch {record['epoch']}) | loss {losses} | {lr} | "
            f"grad norm {number(record['grad_norm'], 2)} | {record['examples_per_s']:.0f} ex/s")


def write(record: dict, path, writer) -> None:
    """A step record (rank 0): its line printed, appended to steps.jsonl (`path`), and to TensorBoard (`writer`)."""
    tqdm.write(line(record))
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    report(writer, "train", record, record["step"])   # --report_to tensorboard


def finite(x):
    """x, or None (JSON null) for nan and inf, which JSON cannot hold."""
    return x if x is None or math.isfinite(x) else None


def start(args, step: int):
    """A run's log from optimizer step `step` on (0, or where a resume starts): the path of steps.jsonl, without the
    records the resume redoes, and the SummaryWriter of --report_to tensorboard (rank 0; else None)."""
    path = os.path.join(args.out_dir, STEPS)
    if int(os.environ.get("RANK", "0")) != 0:
        return path, None
    if os.path.isfile(path):
        with open(path) as f:
            kept = [x for x in f if (_step(x) or math.inf) <= step]
        with open(path, "w") as f:
            f.writelines(kept)
    if args.report_to != "tensorboard":
        return path, None
    from torch.utils.tensorboard import SummaryWriter
    return path, SummaryWriter(os.path.join(args.out_dir, TENSORBOARD), purge_step=step + 1 if step else None)


def _step(text: str):
    """A steps.jsonl line's step; None for a line cut short by a crash."""
    try:
        return json.loads(text)["step"]
    except (ValueError, KeyError, TypeError):
        return None


def report(writer, group: str, numbers: dict, step: int) -> None:
    """Numbers to TensorBoard as group/name at `step` (writer None: --report_to none, nothing)."""
    if writer is None:
        return
    for key, value in numbers.items():
        if key not in ("step", "epoch") and finite(value) is not None:
            writer.add_scalar(f"{group}/{key}", value, step)
    writer.flush()
