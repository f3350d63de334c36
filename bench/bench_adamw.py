"""Time one optimizer step of minbert's AdamW against torch.optim.AdamW on bert-base's parameters.

    python bench/bench_adamw.py

Builds the ~110M parameters of bert-base-uncased (12 layers, hidden 768, intermediate 3072,
vocab 30522, 512 positions, 2 token types, pooler) as plain nn.Parameters with random gradients;
no model or weights are needed. All optimizers share these tensors (each has its own state), and
their steps are interleaved so that CPU-frequency drift and other jobs affect them equally.
Prints the median and min ms/step; the target is ours / torch-foreach ≤ 1.1. On a shared machine
single steps can be 10x slower; the median absorbs a few such steps, but treat the numbers as
indicative and rerun when the machine is busy. Takes ~15 s on an idle 2-core CPU (longer when
busy) and needs ~4 GB of RAM.
"""

import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # run from anywhere
from minbert.adamw import AdamW  # noqa: E402

WARMUP, TIMED = 2, 10


def bert_base_shapes(layers=12, hidden=768, inter=3072, vocab=30522, positions=512, types=2):
    """Parameter shapes of bert-base-uncased, in checkpoint order (199 tensors, 109.5M values)."""
    shapes = [(vocab, hidden), (positions, hidden), (types, hidden), (hidden,), (hidden,)]
    for _ in range(layers):
        shapes += [(hidden, hidden), (hidden,)] * 4  # query, key, value, attention output
        shapes += [(hidden,), (hidden,)]  # attention LayerNorm
        shapes += [(inter, hidden), (inter,), (hidden, inter), (hidden,)]  # feed-forward
        shapes += [(hidden,), (hidden,)]  # output LayerNorm
    shapes += [(hidden, hidden), (hidden,)]  # pooler
    return shapes


def main():
    # ------------------------------------------------------------------ parameters
    g = torch.Generator().manual_seed(0)
    params = []
    for shape in bert_base_shapes():
        p = torch.nn.Parameter(torch.randn(shape, generator=g) * 0.02)
        p.grad = torch.randn(shape, generator=g) * 1e-3
        params.append(p)
    n = sum(p.numel() for p in params)
    print(f"bert-base parameter set: {len(params)} tensors, {n / 1e6:.1f}M params, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    # ------------------------------------------------------------------ optimizers
    hparams = dict(lr=1e-4, weight_decay=0.01)
    optimizers = {
        "minbert AdamW": AdamW(params, **hparams),
        "torch AdamW foreach=True": torch.optim.AdamW(params, foreach=True, **hparams),
        "torch AdamW foreach=False": torch.optim.AdamW(params, foreach=False, **hparams),
    }

    # ------------------------------------------------------------------ timing loop
    times = {name: [] for name in optimizers}
    names = list(optimizers)
    for i in range(WARMUP + TIMED):
        # Interleaved: one step of each per round, and the order rotates every round so that
        # no optimizer always runs right after the same neighbour (allocator and cache effects).
        for name in names[i % len(names):] + names[: i % len(names)]:
            t0 = time.perf_counter()
            optimizers[name].step()
            elapsed = time.perf_counter() - t0
            if i >= WARMUP:  # the first steps allocate state and warm caches
                times[name].append(elapsed * 1e3)

    # ------------------------------------------------------------------ report
    # The median is the headline number; the min (the least disturbed step) is printed too,
    # because on a busy machine a few rounds can be slowed down by other processes.
    median = {name: statistics.median(ts) for name, ts in times.items()}
    fastest = {name: min(ts) for name, ts in times.items()}
    ref = "torch AdamW foreach=True"
    print(f"\n{'optimizer':<28}{'median ms':>11}{'min ms':>9}{'median vs foreach':>19}")
    for name in optimizers:
        print(f"{name:<28}{median[name]:>11.1f}{fastest[name]:>9.1f}{median[name] / median[ref]:>18.2f}x")
    ours = "minbert AdamW"
    print(f"\nratio ours / torch-foreach: median {median[ours] / median[ref]:.3f}, "
          f"min {fastest[ours] / fastest[ref]:.3f} (target <= 1.1)")

if __name__ == "__main__":
    main()
