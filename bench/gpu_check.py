"""The GPU check's measurements (bench/gpu_check.sh runs this; see its header for when and how).

    python bench/gpu_check.py --out bench/results/gpu_check.md              # on the GPU, offline, ~5 min
    python bench/gpu_check.py --out /tmp/gpu_check.md --cpu-smoke           # tiny, on CPU: the script works

Writes one Markdown file with four parts:
  1. what `--amp auto` chooses on this device (minbert.core.device.resolve_amp), and why;
  2. one train step (forward, loss, backward, torch.optim.AdamW) of minbert's BertModel against Hugging Face's
     transformers.BertModel loaded from the same files, at bert-base shape (random weights, B=16, T=128) and with
     the packaged MiniLM (B=32, T=64), under bf16 autocast and under fp16 autocast with a GradScaler; medians of
     --steps steps, ours and HF interleaved (bench/bench_model.py's timing, with the device synchronised);
  3. the peak GPU memory of each (torch.cuda.max_memory_allocated over one step, that model alone on the GPU);
  4. the README's quick start for 1 epoch on the shipped data: wall time, train examples/s and the dev scores
     from its metrics.jsonl.
--cpu-smoke: the same code on CPU at a tiny shape (BertConfig.tiny(), B=4, T=16, 2 steps) and a quick start on
64 examples: checks that everything runs end to end; its numbers mean nothing. No network is used (MiniLM is
the packaged minilm-l6; the data is data/).
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
from bench_model import SHAPES as SHAPE, checkpoint_dir, load, make_batch, table  # noqa: E402  (B, T)
from minbert.core.device import cpu_name, resolve_amp  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
QUICK_START = ["train_multitask.py", "--option", "finetune", "--model", "minilm-l6", "--pooling", "mean", "--lr", "1e-4",
               "--head_lr", "1e-3", "--batch_size", "32", "--hidden_dropout_prob", "0.1", "--epochs", "1"]  # README's


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def stepper(model, device, precision):
    """A train step of `model` on a fixed random batch: autocast to `precision`; fp16 goes through a GradScaler."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def step(batch):
        with torch.autocast(device.type, dtype=DTYPES[precision]):
            out = model(**batch)                     # both return an object indexable by these two names
            loss = out["last_hidden_state"].float().mean() + out["pooler_output"].float().mean()
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()            # scaled so small fp16 gradients do not flush to zero
            scaler.step(opt)                         # unscales; skips the step if a gradient is inf/nan
            scaler.update()
        opt.zero_grad(set_to_none=True)
    return step


def time_pair(ckpt, shape, precision, device, steps):
    """{'ours'|'hf': (median s/step, peak MB or None)} at `shape`: steps timed with ours and HF interleaved round
    by round; then each model's peak memory alone (only it, its AdamW state and one step's activations resident)."""
    torch.manual_seed(0)
    batch = {k: v.to(device) for k, v in make_batch(*SHAPE[shape]).items()}
    steps_of = {who: stepper(load(who, ckpt, "fast").to(device), device, precision) for who in ("ours", "hf")}
    times = {who: [] for who in steps_of}           # ours on the SDPA path vs HF "sdpa"
    for who in steps_of:                             # warm-up: allocations, kernel selection
        steps_of[who](batch)
    for i in range(steps):
        for who in (("ours", "hf") if i % 2 else ("hf", "ours")):
            sync(device)
            t0 = time.perf_counter()
            steps_of[who](batch)
            sync(device)
            times[who].append(time.perf_counter() - t0)
    del steps_of
    result = {who: (statistics.median(times[who]), None) for who in times}
    if device.type == "cuda":
        for who in times:
            step = stepper(load(who, ckpt, "fast").to(device), device, precision)
            step(batch)                              # AdamW's state exists from the first step on
            sync(device)
            torch.cuda.reset_peak_memory_stats(device)
            step(batch)
            sync(device)
            result[who] = (result[who][0], torch.cuda.max_memory_allocated(device) / 2**20)
            del step
            torch.cuda.empty_cache()
    return result


def quick_start(device, smoke):
    """Run the README's quick start for 1 epoch; (wall s, train ex/s, dev scores of the epoch, the command)."""
    argv = QUICK_START + (["--limit", "64", "--batch_size", "8", "--device", "cpu"] if smoke else [])
    out = Path(tempfile.mkdtemp(prefix="gpu_check_quickstart_"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, *argv, "--out_dir", str(out / "run")], cwd=ROOT, env=env,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"gpu_check: the quick start failed (exit {r.returncode}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines() if line.strip()]
    shutil.rmtree(out, ignore_errors=True)
    last = rows[-1]                                  # {"epoch", dev scores..., "loss_<task>", speed, "elapsed_s"}
    dev = {k: v for k, v in last.items() if k not in ("epoch", "train_examples_per_s", "elapsed_s")
           and not k.startswith("loss_")}
    return wall, last["train_examples_per_s"], dev, " ".join(["python", *argv])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="the Markdown file to write (e.g. bench/results/gpu_check.md)")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on CPU: checks the script, numbers mean nothing")
    p.add_argument("--steps", type=int, default=10, help="timed train steps per model (medians)")
    a = p.parse_args()
    if not a.cpu_smoke and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device here; run with --cpu-smoke to check the script on CPU")
    device = torch.device("cpu" if a.cpu_smoke else "cuda")
    steps = 2 if a.cpu_smoke else a.steps
    shapes = ["tiny"] if a.cpu_smoke else ["base", "minilm"]
    card = cpu_name() if a.cpu_smoke else torch.cuda.get_device_name(device)
    t_start = time.perf_counter()

    amp, why = resolve_amp("auto", device)
    lines = [f"# GPU check{' (CPU smoke run: the numbers mean nothing)' if a.cpu_smoke else ''}", "",
             f"Device: **{card}**; torch {torch.__version__}"
             + (f", CUDA {torch.version.cuda}" if device.type == "cuda" else "")
             + f"; Python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
             "Written by `bash bench/gpu_check.sh` (bench/gpu_check.py).", "",
             "## What `--amp auto` chooses", "", f"`{amp}`: {why}.", "",
             "## Train step: minbert vs Hugging Face BertModel", "",
             f"Forward, loss, backward and torch.optim.AdamW on the same weights and batch, both on the SDPA "
             f"attention path; median of {steps} steps after a warm-up, ours and HF interleaved. Peak memory: "
             "torch.cuda.max_memory_allocated during one step with that model alone on the device (weights, "
             "gradients, AdamW state, activations). bert-base has random weights (speed and memory do not depend "
             "on them).", ""]
    rows = []
    for shape in shapes:
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = checkpoint_dir(shape, tmp)
            for precision in ("bf16", "fp16"):
                print(f"gpu_check: {shape} {precision} ...", file=sys.stderr, flush=True)
                r = time_pair(ckpt, shape, precision, device, steps)
                (ours, ours_mb), (hf, hf_mb) = r["ours"], r["hf"]
                mb = lambda x: "n/a (CPU)" if x is None else f"{x:.0f}"   # noqa: E731
                rows.append([LABEL[shape], precision + (" + GradScaler" if precision == "fp16" else ""),
                             f"{ours * 1000:.1f}", f"{hf * 1000:.1f}", f"{hf / ours:.2f}", mb(ours_mb), mb(hf_mb)])
    lines += [table(["shape", "autocast", "ours ms/step", "HF ms/step", "HF / ours", "ours peak MB", "HF peak MB"],
                    rows), ""]

    print("gpu_check: the quick start, 1 epoch ...", file=sys.stderr, flush=True)
    wall, speed, dev, command = quick_start(device, a.cpu_smoke)
    lines += ["## The README's quick start, 1 epoch", "", f"`{command} --out_dir <temporary>` (offline, "
              f"`HF_HUB_OFFLINE=1`, the shipped data{'; --limit 64 for the smoke run' if a.cpu_smoke else ''}):",
              "", f"- wall time {wall:.0f} s (start to exit); training {speed:.0f} examples/s",
              "- dev scores of the epoch (metrics.jsonl): "
              + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in dev.items()), "",
              f"Whole check: {time.perf_counter() - t_start:.0f} s.", ""]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"gpu_check: written to {a.out}", file=sys.stderr)


LABEL = {"base": "bert-base (random) B=16 T=128", "minilm": "MiniLM-L6 B=32 T=64", "tiny": "tiny B=4 T=16"}

if __name__ == "__main__":
    main()
