"""Gradient surgery overhead: a PCGrad / GradVac step vs the plain summed 3-task backward.

    python bench/bench_surgery.py              # ~1-2 min on 2 cores: MiniLM shape, bf16 autocast
    python bench/bench_surgery.py --fp32 --reps 9

Every step takes the same three batches (one per CS224N task, B=32, T=64) through MiniLM with
mean pooling, then either `sum(losses).backward()` or `surgery.accumulate(losses); surgery.apply()`,
then AdamW. Methods are interleaved round by round and the median is kept, so machine drift
hits all alike. Target: PCGrad and GradVac ≤ 1.10× the summed backward. Before the
per-param rewrite (a flat (K, P) stack) they measured 1.21-1.22× (bench/results/methods.md).
"""

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import timing  # noqa: E402
from bench_methods import batch  # noqa: E402

from minbert.adamw import AdamW  # noqa: E402
from minbert.core.device import autocast  # noqa: E402
from minbert.methods.gradvac import GradVac  # noqa: E402
from minbert.bert.model import BertModel  # noqa: E402
from minbert.tasks.multitask import TASKS, MultitaskBert, task_loss  # noqa: E402
from minbert.methods.pcgrad import PCGrad  # noqa: E402

CPU = torch.device("cpu")


def median_times(fns: dict, reps: int, clock) -> dict:
    """Interleave the step functions round by round (drift hits all alike); median seconds each."""
    times = {k: [] for k in fns}
    for r in range(reps + 1):
        for k, fn in fns.items():
            t = clock()
            fn()
            if r:  # round 0 warms up
                times[k].append(clock() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fp32", action="store_true", help="no autocast (default: bf16 autocast, as bench_methods)")
    timing.add_args(p, "timed rounds (one more warms up); medians are reported")
    a = p.parse_args()
    clock = timing.clock_from_args(a)
    amp = "off" if a.fp32 else "bf16"
    torch.manual_seed(0)
    model = MultitaskBert(BertModel.from_pretrained("minilm-l6", hidden_dropout_prob=0.1), pooling="mean").train()
    params = [q for q in model.parameters() if q.requires_grad]
    opt = AdamW(params, lr=1e-5)
    batches = {t: batch(32, 64, t, i) for i, t in enumerate(TASKS)}

    def step(surgery=None):
        def run():
            with autocast(CPU, amp):
                losses = [task_loss(t, model(t, batches[t]), batches[t]["labels"]) for t in TASKS]
            if surgery is None:
                sum(losses).backward()          # one backward through the three graphs
            else:
                surgery.accumulate(losses)      # K per-task backward passes, kept per param
                surgery.apply()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return run

    t = median_times({"summed backward": step(), "PCGrad": step(PCGrad(params)), "GradVac": step(GradVac(params))}, a.reps, clock)
    print(f"MiniLM B32 T64 x 3 tasks, {amp}, {torch.get_num_threads()} threads, median of {a.reps}, "
          f"{'process CPU time' if a.cpu_time else 'wall time'}")
    print("| method | s/step | ratio to summed backward | target |\n|---|---|---|---|")
    for k, v in t.items():
        print(f"| {k} | {v:.3f} | {v / t['summed backward']:.2f} | {'' if k == 'summed backward' else '≤ 1.10×'} |")


if __name__ == "__main__":
    main()
