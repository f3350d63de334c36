"""Scoring a split in input order: the one evaluation loop of both scripts and of a finished run (load_run).

`in_order(splits, forward, device, amp, batch_size, desc)` runs `forward(name, batch)` under --amp on every batch
of each split {name: TaskData}, in length-sorted batches (`TaskData.batches(shuffle=False)`: the least padding),
applies `after` to each batch's outputs in fp32 (MML's Eq. 5: a mean rounded to bf16 under autocast would
differ), and puts every row back at its place in the split. Per split it returns `Scored(outputs, order)`:
the outputs in the split's own order, and `order`, the positions in the order they were scored (the order the
prediction files are written in).

The evaluation batch is EVAL_BATCH (or --batch_size when larger: `eval_batch`), whoever scores: the same batches
give the same numbers, so `python -m minbert predict` answers what the script wrote. Progress: a line as it
starts, then a bar on a terminal or a line every 30 s in a log (minbert/core/progress.py); none when `desc` is
None (the Python API, which prints nothing).
"""

import math
from typing import NamedTuple

import torch

from minbert.core.device import autocast
from minbert.core.progress import phase
from minbert.tasks.sampling import to_device

EVAL_BATCH = 64   # rows per forward pass when scoring (the scripts' dev/test evaluation, predict, load_run)


def eval_batch(batch_size: int) -> int:
    """The scripts' evaluation batch: EVAL_BATCH, or their training --batch_size when it is larger."""
    return max(EVAL_BATCH, batch_size)


class Scored(NamedTuple):
    outputs: torch.Tensor   # (N, ...) fp32 on the CPU, row i for the split's example i
    order: torch.Tensor     # (N,) long: the positions in the order they were scored (length-sorted batches)


@torch.inference_mode()
def in_order(splits: dict, forward, device, amp: str, batch_size: int = EVAL_BATCH, desc: str | None = "score",
             after=None) -> dict[str, Scored]:
    """forward(name, batch) under `amp` on every batch of each split, then after(outputs) in fp32; per split the
    outputs in its own order and the scoring order (module docstring)."""
    batches = ((name, batch) for name, data in splits.items() for batch in data.batches(batch_size, shuffle=False))
    if desc is not None:
        batches = phase(batches, desc, sum(math.ceil(len(data) / batch_size) for data in splits.values()))
    outputs, orders = {name: None for name in splits}, {name: [] for name in splits}
    for name, batch in batches:
        with autocast(device, amp):
            y = forward(name, to_device(batch, device))
        y = (after or (lambda t: t))(y.float()).cpu()
        if outputs[name] is None:
            outputs[name] = torch.empty((len(splits[name]), *y.shape[1:]))
        outputs[name][batch["index"]] = y
        orders[name].append(batch["index"])
    return {name: Scored(outputs[name], torch.cat(orders[name])) for name in splits}
