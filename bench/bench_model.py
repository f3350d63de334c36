"""Compare minbert's BertModel with Hugging Face transformers.BertModel, in one process.

    python bench/bench_model.py                      # everything: about 15 minutes on 2 cores
    python bench/bench_model.py --shapes minilm --paths fast --precisions fp32 --steps 2 --no-memory
    python bench/bench_model.py --quick              # tiny config, seconds: smoke test only

Both models are built from the same config.json and model.safetensors (bert-base: random weights
from `BertConfig()` saved with our save_pretrained; MiniLM: the packaged `minilm-l6` files). For
every shape x attention path x precision it measures, with random ids and a full attention mask:
  - a train step: forward + loss + backward + torch.optim.AdamW(foreach=True) step, so the
    optimizer is identical and only the model differs (dropout on, as in fine-tuning);
  - inference throughput in eval mode under torch.inference_mode(), in examples/s;
  - the peak RSS of a fresh child process that loads one model and runs 2 train steps (one
    child per model, so the two never share a peak). Each child imports both libraries, so the
    ~constant interpreter + torch + transformers baseline is included on both sides.
Pairs: ours explicit softmax vs HF "eager"; ours fast (F.scaled_dot_product_attention) vs HF "sdpa".
bf16 means torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss.

Timing: 1 warm-up step each, then --steps timed steps with ours and HF interleaved (the order
alternates each round) to cancel CPU-frequency drift; medians are reported. Ratios are HF / ours
for times and memory and ours / HF for throughput, so > 1 always means minbert is better.
Writes the tables to stdout and to bench/results/model.md. Run nothing else heavy at the same
time: the machine has 2 cores and a busy neighbour distorts the numbers by more than the
differences being measured. Peak RAM ~8 GB (two bert-base models with AdamW state in one process).
"""

import argparse
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # run from anywhere
from minbert.core import hub  # noqa: E402
from minbert.core.device import cpu_has_native_bf16  # noqa: E402
from minbert.bert.config import BertConfig  # noqa: E402
from minbert.bert.model import BertModel  # noqa: E402

SHAPES = {"base": (16, 128), "minilm": (32, 64), "tiny": (4, 16)}  # name -> (B, T)
HF_ATTN = {"explicit": "eager", "fast": "sdpa"}  # our attention path -> HF attn_implementation
RESULTS = Path(__file__).parent / "results" / "model.md"


# ---------------------------------------------------------------------- models and steps

def checkpoint_dir(shape: str, tmp: str) -> str:
    """A directory with config.json + model.safetensors that both libraries load."""
    if shape == "minilm":
        return str(hub.resolve("minilm-l6"))
    torch.manual_seed(0)
    config = BertConfig.tiny() if shape == "tiny" else BertConfig()  # bert-base defaults
    BertModel(config).save_pretrained(Path(tmp) / shape)
    return str(Path(tmp) / shape)


def load(who: str, ckpt: str, path: str) -> torch.nn.Module:
    """Load 'ours' or 'hf' in train mode with the attention path's implementation."""
    if who == "ours":
        return BertModel.from_pretrained(ckpt, fast_attention=(path == "fast"))
    import transformers  # slow import (5-8 s): only where needed
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()  # no "Loading weights" bar per model
    # dtype: transformers 5 defaults to the checkpoint's dtype ("auto"); pin fp32 like ours
    model = transformers.BertModel.from_pretrained(ckpt, attn_implementation=HF_ATTN[path],
                                                   dtype=torch.float32)
    return model.train()  # HF returns eval mode; ours returns train mode


def make_batch(B: int, T: int) -> dict:
    return {"input_ids": torch.randint(1000, 30000, (B, T)),         # (B, T)
            "attention_mask": torch.ones(B, T, dtype=torch.long),    # full mask: no padding
            "token_type_ids": torch.zeros(B, T, dtype=torch.long)}


def autocast(precision: str):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=(precision == "bf16"))


def train_step(model, opt, batch, precision) -> None:
    with autocast(precision):
        out = model(**batch)  # both return an object indexable by these two names
        loss = out["last_hidden_state"].float().mean() + out["pooler_output"].float().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def infer_step(model, batch, precision) -> None:
    with torch.inference_mode(), autocast(precision):
        model(**batch)


def interleaved_medians(steps: dict, n: int) -> dict:
    """Median seconds per call of each callable: 1 warm-up, then n rounds alternating the order."""
    names, times = list(steps), {name: [] for name in steps}
    for i in range(1 + n):
        for name in (names if i % 2 else names[::-1]):
            t0 = time.perf_counter()
            steps[name]()
            if i > 0:  # round 0 is the warm-up (allocations, kernel selection)
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def time_pair(ckpt: str, shape: str, path: str, precision: str, n: int) -> dict:
    """Train s/step and inference ex/s of ours and HF for one configuration."""
    B, T = SHAPES[shape]
    torch.manual_seed(0)
    batch = make_batch(B, T)
    models = {who: load(who, ckpt, path) for who in ("ours", "hf")}
    opts = {who: torch.optim.AdamW(m.parameters(), lr=1e-5, foreach=True) for who, m in models.items()}
    train = interleaved_medians({who: (lambda w=who: train_step(models[w], opts[w], batch, precision))
                                 for who in models}, n)
    for m in models.values():
        m.eval()
    infer = interleaved_medians({who: (lambda w=who: infer_step(models[w], batch, precision))
                                 for who in models}, n)
    return {"train": train, "infer": {who: B / s for who, s in infer.items()}}


# ---------------------------------------------------------------------- peak memory (child processes)

def peak_rss_child(who: str, ckpt: str, shape: str, path: str, precision: str) -> float:
    """Runs in a fresh spawned process: load one model, 2 train steps, return peak RSS in MB."""
    import transformers  # noqa: F401  imported on both sides so the baselines match
    torch.manual_seed(0)
    model = load(who, ckpt, path)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    batch = make_batch(*SHAPES[shape])
    for _ in range(2):
        train_step(model, opt, batch, precision)
    # Not getrusage's ru_maxrss: Linux keeps it across execve, so a spawned child would report
    # the parent's peak. VmHWM belongs to this process's own (post-exec) address space.
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024   # KiB -> MB


def peak_rss(*args) -> float:
    # spawn (not fork): a fresh interpreter whose peak owes nothing to this process's memory
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(peak_rss_child, *args).result()


# ---------------------------------------------------------------------- report

def table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="base,minilm",
                   help="comma list of base (B=16, T=128, random weights) and minilm (B=32, T=64)")
    p.add_argument("--paths", default="explicit,fast",
                   help="attention paths: explicit (vs HF eager) and/or fast (SDPA, vs HF sdpa)")
    p.add_argument("--precisions", default="fp32,bf16", help="fp32 and/or bf16 (CPU autocast)")
    p.add_argument("--steps", type=int, default=5,
                   help="timed steps per model after 1 warm-up; raise it if the medians wobble")
    p.add_argument("--quick", action="store_true",
                   help="tiny config, B=4, T=16, 2 steps: checks the script runs, numbers mean nothing")
    p.add_argument("--no-memory", action="store_true",
                   help="skip the peak-memory children (they add ~1/3 to the runtime)")
    args = p.parse_args()
    shapes = ["tiny"] if args.quick else args.shapes.split(",")
    paths, precisions = args.paths.split(","), args.precisions.split(",")
    if "bf16" in precisions and not cpu_has_native_bf16():
        print("note: this CPU has no native bf16 (AMX/AVX512-BF16); bf16 rows are emulated, ~30x slower than fp32")
    steps = 2 if args.quick else args.steps
    for name, given, allowed in (("shape", shapes, SHAPES), ("path", paths, HF_ATTN),
                                 ("precision", precisions, ("fp32", "bf16"))):
        if bad := [g for g in given if g not in allowed]:
            p.error(f"unknown {name} {bad}; choose from {list(allowed)}")

    header = (f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
              f"{steps} timed steps (medians), ratio > 1 means minbert is better")
    print(header, flush=True)
    speed, memory = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in shapes:
            ckpt = checkpoint_dir(shape, tmp)
            B, T = SHAPES[shape]
            for path in paths:
                for precision in precisions:
                    label = [f"{shape} B={B} T={T}", path, precision]
                    print(f"timing {' / '.join(label)} ...", file=sys.stderr, flush=True)
                    r = time_pair(ckpt, shape, path, precision, steps)
                    tr, inf = r["train"], r["infer"]
                    speed.append(label + [f"{tr['ours']:.3f}", f"{tr['hf']:.3f}", f"{tr['hf'] / tr['ours']:.2f}",
                                          f"{inf['ours']:.1f}", f"{inf['hf']:.1f}", f"{inf['ours'] / inf['hf']:.2f}"])
                    if not args.no_memory:
                        mb = {who: peak_rss(who, ckpt, shape, path, precision) for who in ("ours", "hf")}
                        memory.append(label + [f"{mb['ours']:.0f}", f"{mb['hf']:.0f}", f"{mb['hf'] / mb['ours']:.2f}"])

    text = table(
        ["shape", "attention", "precision", "ours train s/step", "HF train s/step", "ratio (HF/ours)",
         "ours inference ex/s", "HF inference ex/s", "ratio (ours/HF)"], speed)
    if memory:
        text += ("\n\nPeak RSS of a fresh process loading one model and running 2 train steps:\n\n"
                 + table(["shape", "attention", "precision", "ours MB", "HF MB", "ratio (HF/ours)"], memory))
    print("\n" + text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(header + "\n\n" + text + "\n")
    print(f"\nwritten to {RESULTS}")


if __name__ == "__main__":
    main()
