"""The GPU check's measurements (bench/gpu_check.sh runs this; see its header for when and how).

    python bench/gpu_check.py --out bench/results/gpu_check.md              # on the GPU, offline, ~8 min
    python bench/gpu_check.py --out /tmp/gpu_check.md --cpu-smoke           # tiny, on CPU: the script works

Writes one Markdown file with five parts:
  1. what `--amp auto` chooses on this device (minbert.core.device.resolve_amp), and why;
  2. one train step (forward, loss, backward, torch.optim.AdamW) of minbert's BertModel three ways: eager,
     compiled (minbert.bert.compiled.compile_blocks, torch.compile's default mode) and compiled with CUDA graphs
     (mode="reduce-overhead": the step's kernels recorded once for the batch's static shape, then replayed),
     against Hugging Face's transformers.BertModel loaded from the same files (eager), at bert-base shape (random
     weights, B=16, T=128) and with the packaged MiniLM (B=32, T=64), under bf16 autocast and under fp16 autocast
     with a GradScaler; medians of --steps steps, all four interleaved (bench/bench_model.py's timing, with the
     device synchronised), and AdamW's own share (the optimizer step alone, eager);
  3. the peak GPU memory of each (torch.cuda.max_memory_allocated over one step, that model alone on the GPU);
  4. where the time goes: torch.profiler over one eager and one compiled step of each (kernels the GPU ran, launch
     calls the CPU made, and the GPU busy fraction: the union of the kernels' time over the step's wall time);
  5. the README's quick start for 1 epoch on the shipped data, eager and with --compile: wall time, train
     examples/s and the dev scores from its metrics.jsonl.
--cpu-smoke: the same code on CPU at a tiny shape (BertConfig.tiny(), B=4, T=16, 2 steps; bf16 only; no CUDA-graph
column, which needs CUDA) and an eager quick start on 64 examples: checks that everything runs end to end; its
numbers mean nothing. No network is used (MiniLM is the packaged minilm-l6; the data is data/).
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
from minbert.bert.compiled import compile_blocks  # noqa: E402
from minbert.core.device import cpu_name, resolve_amp  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
QUICK_START = ["train_multitask.py", "--option", "finetune", "--model", "minilm-l6", "--pooling", "mean", "--lr", "1e-4",
               "--head_lr", "1e-3", "--batch_size", "32", "--hidden_dropout_prob", "0.1", "--epochs", "1"]  # README's


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# name -> (which model, torch.compile mode): the columns of the step table, in order
VARIANTS = {"eager": ("ours", "eager"), "compiled": ("ours", None), "graphs": ("ours", "reduce-overhead"),
            "hf": ("hf", "eager")}


def build(variant, ckpt, device):
    """The model of `variant` on `device`, compiled as the variant says (lazily: the first step compiles)."""
    who, mode = VARIANTS[variant]
    model = load(who, ckpt, "fast").to(device)
    if mode != "eager":
        compile_blocks(model, [], mode=mode)   # what --compile does to the encoder, in place
    return model


def stepper(model, device, precision, graphs=False):
    """A train step of `model` on a fixed random batch: autocast to `precision`; fp16 goes through a GradScaler.
    graphs: the model's blocks replay CUDA graphs, so each step first tells torch a new step begins (the previous
    step's outputs may be overwritten)."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def backward(batch):
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(device.type, dtype=DTYPES[precision]):
            out = model(**batch)                     # both return an object indexable by these two names
            loss = out["last_hidden_state"].float().mean() + out["pooler_output"].float().mean()
        (loss if scaler is None else scaler.scale(loss)).backward()   # scaled: small fp16 gradients do not flush

    def step(batch):
        backward(batch)
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)                         # unscales; skips the step if a gradient is inf/nan
            scaler.update()
        opt.zero_grad(set_to_none=True)
    step.backward, step.opt = backward, opt
    return step


def adamw_time(step, batch, device, steps):
    """Median s of the optimizer step alone (AdamW over gradients a forward and backward just made)."""
    times = []
    for _ in range(steps):
        step.backward(batch)
        times.append(timed(device, step.opt.step))
        step.opt.zero_grad(set_to_none=True)
    return statistics.median(times)


def timed(device, fn, *args):
    sync(device)
    t0 = time.perf_counter()
    fn(*args)
    sync(device)
    return time.perf_counter() - t0


WARMUP = 3   # compiles at the first call; CUDA graphs are recorded after a warm-up call, then replayed


def time_variants(ckpt, shape, precision, device, steps, variants):
    """{variant: (median s/step, peak MB or None)} at `shape`, the variants' steps interleaved round by round;
    then each model's peak memory alone (only it, its AdamW state and one step's activations resident);
    'adamw': the median s of the optimizer step alone (eager model's AdamW, foreach)."""
    torch.manual_seed(0)
    batch = {k: v.to(device) for k, v in make_batch(*SHAPE[shape]).items()}
    steps_of = {v: stepper(build(v, ckpt, device), device, precision, graphs=v == "graphs") for v in variants}
    for v, step in steps_of.items():
        print(f"gpu_check:   warm-up {v} ...", file=sys.stderr, flush=True)
        for _ in range(WARMUP):
            step(batch)
    times = {v: [] for v in steps_of}
    for i in range(steps):
        for v in (variants if i % 2 else variants[::-1]):
            times[v].append(timed(device, steps_of[v], batch))
    adamw = adamw_time(steps_of["eager"], batch, device, steps)
    profiles = {v: profile(steps_of[v], batch, device) for v in ("eager", "compiled", "graphs") if v in steps_of}
    del steps_of
    result = {v: (statistics.median(times[v]), None) for v in times}
    if device.type == "cuda":
        for v in times:
            step = stepper(build(v, ckpt, device), device, precision, graphs=v == "graphs")
            for _ in range(WARMUP):                  # AdamW's state exists from the first step on
                step(batch)
            sync(device)
            torch.cuda.reset_peak_memory_stats(device)
            step(batch)
            sync(device)
            result[v] = (result[v][0], torch.cuda.max_memory_allocated(device) / 2**20)
            del step
            torch.cuda.empty_cache()
    return result, adamw, profiles


LAUNCHES = ("cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cuGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync",
            "cuMemcpy", "cuMemset")   # how the names of the calls by which the CPU hands the GPU work begin


def profile(step, batch, device):
    """One warm step under torch.profiler: {kernels, launches, busy, wall_ms}. kernels: the GPU kernels that ran;
    launches: the CPU's launch calls (a CUDA graph's replay is one); busy: the union of the kernels' time
    intervals over the step's wall time (1.0: the GPU never waited for the CPU). On CPU: the ops torch ran."""
    from torch.profiler import ProfilerActivity, profile as torch_profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch_profile(activities=activities) as prof:
        wall = timed(device, step, batch)
    events = prof.events()
    kernels = sorted((e.time_range.start, e.time_range.end) for e in events
                     if e.device_type == torch.autograd.DeviceType.CUDA)
    busy, end = 0.0, float("-inf")
    for a, b in kernels:                             # the union of the intervals, in microseconds
        busy += max(0.0, b - max(a, end))
        end = max(end, b)
    launches = sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith(LAUNCHES))
    return {"kernels": len(kernels) if device.type == "cuda" else None, "launches": launches,
            "ops": sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CPU),
            "busy": busy / (wall * 1e6) if device.type == "cuda" else None, "wall_ms": wall * 1000}


def quick_start(device, smoke, compiled=False):
    """Run the README's quick start for 1 epoch (with --compile if `compiled`); (wall s, train ex/s, dev scores of
    the epoch, the command)."""
    argv = QUICK_START + (["--limit", "64", "--batch_size", "8", "--device", "cpu"] if smoke else [])
    argv += ["--compile"] if compiled else []
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
    variants = [v for v in VARIANTS if not (a.cpu_smoke and v == "graphs")]   # CUDA graphs need CUDA
    precisions = ["bf16"] if a.cpu_smoke else ["bf16", "fp16"]
    lines = [f"# GPU check{' (CPU smoke run: the numbers mean nothing)' if a.cpu_smoke else ''}", "",
             f"Device: **{card}**; torch {torch.__version__}"
             + (f", CUDA {torch.version.cuda}" if device.type == "cuda" else "")
             + f"; Python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
             "Written by `bash bench/gpu_check.sh` (bench/gpu_check.py).", "",
             "## What `--amp auto` chooses", "", f"`{amp}`: {why}.", "",
             "## Train step: minbert eager, compiled, compiled with CUDA graphs, and Hugging Face BertModel", "",
             f"Forward, loss, backward and torch.optim.AdamW (foreach) on the same weights and batch, all on the SDPA "
             f"attention path; median of {steps} steps after {WARMUP} warm-up steps (the compile, the graphs' "
             "recording), the variants interleaved. compiled: minbert.bert.compiled.compile_blocks (what --compile "
             "does; torch.compile's default mode); graphs: the same with mode=\"reduce-overhead\" (CUDA graphs over "
             "the batch's static shape). AdamW: the optimizer step alone, eager. Peak memory: "
             "torch.cuda.max_memory_allocated during one step with that model alone on the device (weights, "
             "gradients, AdamW state, activations). bert-base has random weights (speed and memory do not depend "
             "on them).", ""]
    rows, prof_rows = [], []
    mb = lambda x: "n/a (CPU)" if x is None else f"{x:.0f}"   # noqa: E731
    for shape in shapes:
        with tempfile.TemporaryDirectory() as tmp:
            ckpt = checkpoint_dir(shape, tmp)
            for precision in precisions:
                print(f"gpu_check: {shape} {precision} ...", file=sys.stderr, flush=True)
                r, adamw, profiles = time_variants(ckpt, shape, precision, device, steps, variants)
                ms = {v: r[v][0] * 1000 for v in r}
                autocast = precision + (" + GradScaler" if precision == "fp16" else "")
                rows.append([LABEL[shape], autocast, *(f"{ms[v]:.1f}" if v in ms else "n/a" for v in VARIANTS),
                             f"{adamw * 1000:.1f}", *(f"{ms['eager'] / ms[v]:.2f}" if v in ms else "n/a"
                                                      for v in ("compiled", "graphs", "hf")),
                             *(mb(r[v][1]) if v in r else "n/a" for v in VARIANTS)])
                for v, pr in profiles.items():
                    prof_rows.append([LABEL[shape], autocast, v, f"{pr['wall_ms']:.1f}",
                                      "n/a (CPU)" if pr["kernels"] is None else pr["kernels"], pr["launches"],
                                      pr["ops"], "n/a (CPU)" if pr["busy"] is None else f"{pr['busy']:.0%}"])
    lines += [table(["shape", "autocast", "eager ms", "compiled ms", "graphs ms", "HF ms", "AdamW ms",
                     "eager / compiled", "eager / graphs", "eager / HF", "eager MB", "compiled MB", "graphs MB",
                     "HF MB"], rows), ""]
    lines += ["## Where the time goes: one step under torch.profiler", "",
              "After the timed steps, one more step of each minbert variant under torch.profiler (CPU and CUDA "
              "activity). GPU kernels: the kernels the GPU ran; launch calls: the CPU's cudaLaunchKernel / "
              "cudaGraphLaunch / async copy and memset calls (a CUDA graph's replay is one call for all its "
              "kernels); CPU ops: the profiler's CPU-side events (torch ops and runtime calls); GPU busy: the union "
              "of the kernels' intervals over the step's wall time (the rest the GPU waited for the CPU). The "
              "profiler slows the CPU side, so the wall times here are longer than the table's.", "",
              table(["shape", "autocast", "variant", "wall ms (profiled)", "GPU kernels", "launch calls",
                     "CPU ops", "GPU busy"], prof_rows), ""]

    lines += ["## The README's quick start, 1 epoch", ""]
    for compiled in ([False] if a.cpu_smoke else [False, True]):   # compiling MiniLM on a CPU takes minutes
        print(f"gpu_check: the quick start, 1 epoch{', --compile' if compiled else ''} ...", file=sys.stderr,
              flush=True)
        wall, speed, dev, command = quick_start(device, a.cpu_smoke, compiled)
        lines += [f"`{command} --out_dir <temporary>` (offline, `HF_HUB_OFFLINE=1`, the shipped data"
                  f"{'; --limit 64 for the smoke run' if a.cpu_smoke else ''}):", "",
                  f"- wall time {wall:.0f} s (start to exit); training {speed:.0f} examples/s",
                  "- dev scores of the epoch (metrics.jsonl): "
                  + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in dev.items()), ""]
    lines += [f"Whole check: {time.perf_counter() - t_start:.0f} s.", ""]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"gpu_check: written to {a.out}", file=sys.stderr)


LABEL = {"base": "bert-base (random) B=16 T=128", "minilm": "MiniLM-L6 B=32 T=64", "tiny": "tiny B=4 T=16"}

if __name__ == "__main__":
    main()
