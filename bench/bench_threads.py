"""The quick start as written (fe0d914's line, batch 32: what bench/results/threads.md measured) against fixed
thread counts, back to back, with one core kept busy.

On a 2-core CPU shared with other work, torch's default of one thread per core can run several times slower
than one thread (threads wait for each other on the busy core). The training scripts now choose the thread
count from the cores free at start (minbert/core/device.py: set_threads). This script measures whether that
choice is as fast as the best fixed count, on this machine, now:

    as written   the README's quick-start line, no OMP_NUM_THREADS (the script chooses)
    N threads    the same line with OMP_NUM_THREADS=N, for N = 1 .. --max_threads (default: the usable cores)

Each run uses the quick start's flags unchanged (a temporary --out_dir, --log_every 5 so that a step record
every 5 steps times them) and is stopped after --steps optimizer steps (or --seconds after step 5). Throughput is taken between
the progress lines at step 5 and the last one (the first steps pay one-off costs), in examples per second
(batch 32). The time to the first progress line is reported too (what a new user waits before seeing the run
move). A spinner process (`while True: pass`) keeps one core busy for the whole measurement, standing in for
the other job on a busy machine; `uptime` is printed before and after.

    python bench/bench_threads.py [--repo DIR] [--steps 60] [--rounds 1] [--out bench/results/threads.md]

--repo runs another checkout's scripts (e.g. one from before the change: its "as written" is torch's default).
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUICK_START = ("python train_multitask.py --option finetune --model minilm-l6 --pooling mean --lr 1e-4 --head_lr 1e-3 "
               "--batch_size 32 --hidden_dropout_prob 0.1 --epochs 1 --out_dir runs/quickstart")
BATCH = 32
LINE = re.compile(r"^(?:epoch \d+/\d+ step (\d+)/\d+|step (\d+) \(epoch \d+\))")   # a progress line or a step record


def cpuinfo(keys) -> dict:
    """The first value of each `keys` field of /proc/cpuinfo (e.g. cpu family 26 = AMD Zen 5)."""
    try:
        with open("/proc/cpuinfo") as f:
            pairs = [line.split(":", 1) for line in f if ":" in line]
    except OSError:
        return {}
    return {k: next((v.strip() for name, v in pairs if name.strip() == k), "?") for k in keys}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def one_run(repo: Path, threads: int | None, steps: int, seconds: float, out_dir: Path) -> dict:
    """Run the quick start until `steps` steps are done (or `seconds` have passed since step 5, with at least
    two timed lines); the seconds to the first progress line, ex/s after step 5, and the threads line."""
    argv = shlex.split(QUICK_START)[1:]
    argv[argv.index("--out_dir") + 1] = str(out_dir)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | {"PYTHONDONTWRITEBYTECODE": "1"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    start = time.monotonic()
    p = subprocess.Popen([sys.executable, str(repo / argv[0]), *argv[1:], "--log_every", "5"], cwd=repo, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    first, marks, said = None, [], ""
    try:
        for line in p.stdout:
            if line.startswith("threads:"):
                said = line.strip()
            m = LINE.match(line)
            if not m:
                continue
            now, step = time.monotonic() - start, int(m.group(1) or m.group(2))
            first = first if first is not None else now
            if step >= 5:
                marks.append((step, now))
            if step >= steps or (len(marks) >= 2 and now - marks[0][1] > seconds):
                break
    finally:
        p.kill()
        p.wait()
    if len(marks) < 2:
        raise SystemExit(f"the quick start printed too few progress lines (threads {threads}); is the data there?")
    (s0, t0), (s1, t1) = marks[0], marks[-1]
    return {"first_line_s": first, "ex_per_s": (s1 - s0) * BATCH / (t1 - t0), "said": said}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]), help="checkout whose scripts run")
    p.add_argument("--steps", type=int, default=60, help="optimizer steps per run (timed from step 5)")
    p.add_argument("--seconds", type=float, default=90, help="stop a run this long after step 5 (slow counts)")
    p.add_argument("--rounds", type=int, default=1, help="repeat the set of runs, interleaved")
    p.add_argument("--max_threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--out", default=None, help="also write the results to this markdown file")
    a = p.parse_args()
    repo = Path(a.repo).resolve()
    sys.path.insert(0, str(repo))
    from minbert.core.device import cpu_capability, cpu_name
    configs = [None] + list(range(1, a.max_threads + 1))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rows = []
    try:
        time.sleep(5)   # let the load average see the spinner
        before = uptime()
        print(before, flush=True)
        with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
            for r in range(a.rounds):
                for i, threads in enumerate(configs):
                    res = one_run(repo, threads, a.steps, a.seconds, Path(tmp) / f"run{r}-{i}")
                    rows.append({"config": "as written" if threads is None else f"{threads} thread(s)", **res})
                    print(f"{rows[-1]['config']:12s} {res['ex_per_s']:6.1f} ex/s, first progress line after "
                          f"{res['first_line_s']:5.1f} s  {res['said']}", flush=True)
        after = uptime()
    finally:
        spinner.kill()
        spinner.wait()
    names = ["as written"] + [f"{t} thread(s)" for t in configs[1:]]
    speeds = {n: [r["ex_per_s"] for r in rows if r["config"] == n] for n in names}
    mean = {n: sum(v) / len(v) for n, v in speeds.items()}
    best_fixed = max(names[1:], key=mean.get)
    family = " ".join(f"{k} {v}" for k, v in cpuinfo(("cpu family", "model")).items())
    table = [f"Quick start as written vs fixed thread counts, one core kept busy by a spinner "
             f"(up to {a.steps} steps or {a.seconds:.0f} s, ex/s from step 5; {a.rounds} round(s), interleaved).",
             "", f"- CPU: {cpu_name()} ({family}; {cpu_capability()} by default), "
                 f"{len(os.sched_getaffinity(0))} usable cores",
             f"- checkout: {repo.name}/ (its commit: git log)", f"- load before: `{before}`", f"- load after: `{after}`", "",
             "| run | ex/s | first progress line after | what the script said |", "|---|---|---|---|"]
    table += [f"| {r['config']} | {r['ex_per_s']:.1f} | {r['first_line_s']:.1f} s | {r['said'] or '(nothing)'} |"
              for r in rows]
    table += ["", "| run | mean ex/s | best ex/s | first progress line, slowest |", "|---|---|---|---|"]
    table += [f"| {n} | {mean[n]:.1f} | {max(speeds[n]):.1f} | "
              f"{max(r['first_line_s'] for r in rows if r['config'] == n):.1f} s |" for n in names]
    table += ["", f"Best fixed count (by mean): {best_fixed}, {mean[best_fixed]:.1f} ex/s; as written: "
                  f"{mean['as written']:.1f} ex/s, so the best fixed count is "
                  f"{mean[best_fixed] / mean['as written']:.2f}x as fast (target: at most 1.2x)."]
    print("\n".join(table))
    if a.out:
        Path(a.out).write_text("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
