"""`--compile` vs eager: one fp32 train step (forward, backward, AdamW) on CPU, and the compile time.

    python bench/bench_compile.py                     # MiniLM (B=32, T=64) and bert-base (B=16, T=128)
    python bench/bench_compile.py --shapes minilm --reps 3 --fast_attention

Both models get the same weights (MiniLM: the packaged minilm-l6; bert-base: random, speed does
not depend on them) and the same fixed SST batch, dropout 0.1 as in training. The compiled
model is minbert.bert.compiled.compile_blocks, exactly what --compile does. "compile s" is the first
compiled step's time minus a warm eager step's: the one-off cost a run pays. Then eager and
compiled steps alternate round by round and the medians are kept. Target: ≥ 1.15× at
the MiniLM shape. Run nothing else heavy meanwhile; torch.get_num_threads() threads are used.
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import timing  # noqa: E402
from minbert.adamw import AdamW  # noqa: E402
from minbert.bert.compiled import compile_blocks  # noqa: E402
from minbert.bert.config import BertConfig  # noqa: E402
from minbert.bert.model import BertModel  # noqa: E402
from minbert.tasks.multitask import MultitaskBert, task_loss  # noqa: E402

SHAPES = {"minilm": ("MiniLM B32 T64", 32, 64), "bert-base": ("bert-base B16 T128", 16, 128)}


def build(shape, fast_attention):
    torch.manual_seed(0)
    if shape == "minilm":
        return MultitaskBert(BertModel.from_pretrained("minilm-l6", hidden_dropout_prob=0.1, fast_attention=fast_attention), pooling="mean")
    return MultitaskBert(BertModel(BertConfig(fast_attention=fast_attention)))


def train_step(model, opt, batch):
    def step():
        task_loss("sst", model("sst", batch), batch["labels"]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def timed(fn, clock=time.perf_counter):
    t = clock()
    fn()
    return clock() - t


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="minilm,bert-base", help="comma list of: " + ", ".join(SHAPES))
    p.add_argument("--fast_attention", action="store_true", help="the SDPA attention path (default: written-out softmax)")
    timing.add_args(p, "timed rounds after warm-up; medians are reported (the compile time stays wall time)")
    a = p.parse_args()
    clock = timing.clock_from_args(a)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, fp32, "
          f"{'SDPA' if a.fast_attention else 'explicit'} attention, median of {a.reps}, {'CPU' if a.cpu_time else 'wall'} time")
    print("| shape | eager s/step | compiled s/step | speed-up | compile s |\n|---|---|---|---|---|")
    for shape in a.shapes.split(","):
        name, B, T = SHAPES[shape]
        g = torch.Generator().manual_seed(0)
        batch = {"input_ids": torch.randint(1000, 30000, (B, T), generator=g), "attention_mask": torch.ones(B, T, dtype=torch.long),
                 "token_type_ids": torch.zeros(B, T, dtype=torch.long), "labels": torch.randint(0, 5, (B,), generator=g)}
        eager, compiled = build(shape, a.fast_attention).train(), build(shape, a.fast_attention).train()
        compile_blocks(compiled, list(compiled.heads.values()))
        steps = {k: train_step(m, AdamW(m.parameters(), lr=1e-5), batch) for k, m in (("eager", eager), ("compiled", compiled))}
        timed(steps["eager"])                                        # warm-up (allocator, threads)
        warm_eager = timed(steps["eager"])
        compile_s = timed(steps["compiled"]) - warm_eager            # first compiled step pays the compile
        timed(steps["compiled"])                                     # second: any leftover recompile
        times = {k: [] for k in steps}
        for _ in range(a.reps):
            for k, fn in steps.items():
                times[k].append(timed(fn, clock))
        e, c = statistics.median(times["eager"]), statistics.median(times["compiled"])
        print(f"| {name} | {e:.3f} | {c:.3f} | {e / c:.2f}× | {compile_s:.0f} |", flush=True)


if __name__ == "__main__":
    main()
