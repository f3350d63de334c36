"""Fast paths for the train step: given code, chosen automatically, one flag away from off.

The readable code stays the reference (what the classroom grades and the tests compare against); a fast path
computes the same with fewer passes over memory, tests/run/test_fast_paths.py checks it, and `--fast_paths off`
runs the readable path bit for bit. `auto` takes every path that applies here (PATHS below); what each buys and
what was measured and not kept: docs/benchmarks.md and bench/results/roofline.md.
"""

import argparse
from dataclasses import dataclass

import torch

from minbert.bert.dropout import set_fast_mask
from minbert.core.device import keep_freed_memory

PATHS = ("fused_adamw", "keep_memory", "dropout_mask")


@dataclass
class FastPaths:
    fused_adamw: bool = False   # AdamW(fused=...)
    keep_memory: bool = False   # keep_freed_memory() was applied to this process
    dropout_mask: bool = False  # minbert.bert.dropout.set_fast_mask(True) was applied to this process

    def __str__(self):
        on = [name for name in PATHS if getattr(self, name)]
        return ", ".join(on) if on else "off (readable paths only)"


def names(text: str) -> set:
    """'auto' | 'off' | a comma list of PATHS -> the set of names asked for (an unknown name: refused)."""
    if text == "auto":
        return set(PATHS)
    if text == "off":
        return set()
    asked = {name.strip() for name in text.split(",") if name.strip()}
    if not asked or asked - set(PATHS):
        raise argparse.ArgumentTypeError(f"expected auto, off or a comma list of {', '.join(PATHS)}; got {text!r}")
    return asked


def _flag(text: str) -> str:
    """argparse type=: checks the value, keeps the string (checkpoints store flags as plain values)."""
    names(text)
    return text


def add_args(parser) -> None:
    g = parser.add_argument_group("fast paths (a bf16 train step that spends its time in matmuls; bench/roofline.py)")
    g.add_argument("--fast_paths", type=_flag, default="auto", metavar="auto|off|" + ",".join(PATHS),
                   help="faster code for the same maths (fused AdamW, no page faults on big tensors, a cheaper "
                        "dropout mask), tested equal to the readable code; 'off' runs only the readable code, "
                        "e.g. to step through it")


def from_args(args, device: torch.device) -> FastPaths:
    """Turn on what was asked for and applies on `device`; says what it did."""
    asked = names(args.fast_paths)
    fast = FastPaths(fused_adamw="fused_adamw" in asked and device.type in ("cpu", "cuda"))
    # keep_memory only with fused_adamw: beside the readable AdamW it made the step slower (bench/results/roofline.md)
    if "keep_memory" in asked and device.type == "cpu" and fast.fused_adamw:
        fast.keep_memory = keep_freed_memory()
    # process-wide either way, so that a run with off after one with auto (tests) is readable again
    fast.dropout_mask = "dropout_mask" in asked and device.type == "cpu"
    set_fast_mask(fast.dropout_mask)
    return fast
