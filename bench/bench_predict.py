"""`python -m minbert predict` timed as a user runs it, and checked against the run's own prediction files.

    python bench/bench_predict.py runs/quickstart              # three sentences, then 1,000 SST dev rows
    python bench/bench_predict.py runs/quickstart --write      # and append the lines to bench/results/predict.md

Each measurement is a real process, `python -m minbert predict ...`, timed from its start to its exit: Python's
start, loading the run and printing included, as a user waits for it (ex/s = rows / that time). The rows are the
first --rows of --data (default the shipped data/ids-sst-dev.csv, 1,101 rows), given with --file; RUN_DIR's
predictions/sst-dev-output.csv holds the training script's labels for them, and the script counts how many of
predict's labels agree (all must: exit status 1 otherwise) and the largest gap between the probabilities of
predict's batches and of one sentence at a time over the three sentences (batching must not change an answer).
It prints the machine (CPU, cores, threads, load at the start), the commands and the figures.
"""

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THREE = ["A gorgeous, witty, seductive movie.", "Dull, overlong and badly acted.", "It is a film about a family."]


def timed(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "minbert", "predict", *argv], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if p.returncode:
        sys.exit(f"python -m minbert predict {' '.join(argv)} failed:\n{p.stderr[-2000:]}")
    return seconds, p.stdout


def script_labels(run_dir: Path) -> dict:
    path = run_dir / "predictions" / "sst-dev-output.csv"
    if not path.is_file():
        sys.exit(f"{path}: no such file; pass the --out_dir of a finished train_multitask.py run")
    return {i.strip(): int(v) for i, v in (line.split(" , ") for line in path.read_text().splitlines()[1:])}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="--out_dir of a finished train_multitask.py run")
    p.add_argument("--data", default=str(ROOT / "data" / "ids-sst-dev.csv"), help="the SST file the run scored")
    p.add_argument("--rows", type=int, default=1000, help="how many of its first rows to predict")
    p.add_argument("--write", action="store_true", help="append the result lines to bench/results/predict.md")
    args = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from minbert.core.device import cpu_name, usable_cores
    run_dir = Path(args.run_dir)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    machine = (f"{cpu_name()}, {usable_cores()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
               f"load {load:.1f} at the start, {time.strftime('%Y-%m-%d')}")
    lines = [f"`python bench/bench_predict.py {args.run_dir}` on {machine}:", ""]

    three_s, out = timed([str(run_dir), *THREE, "--format", "jsonl"])
    single = [timed([str(run_dir), s, "--format", "jsonl"])[1] for s in THREE]
    batched = [json.loads(x)["sst_probabilities"] for x in out.splitlines()]
    alone = [json.loads(x)["sst_probabilities"] for s in single for x in s.splitlines()]
    gap = max(abs(a - b) for pa, pb in zip(batched, alone) for a, b in zip(pa, pb))
    lines.append(f"- three sentences as arguments: {three_s:.1f} s, from start to exit (largest probability gap "
                 f"against one sentence per call: {gap:.1e})")

    with open(args.data, newline="", encoding="utf-8") as f:
        text = f.read().splitlines()
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, encoding="utf-8") as f:   # header + rows
        f.write("\n".join(text[: args.rows + 1]) + "\n")
        rows = f.name
    seconds, out = timed([str(run_dir), "--file", rows, "--format", "csv"])
    os.unlink(rows)
    got = list(csv.DictReader(io.StringIO(out)))
    want = script_labels(run_dir)
    shared = [r for r in got if r["id"] in want]
    equal = sum(int(r["sst_label"]) == want[r["id"]] for r in shared)
    lines.append(f"- {len(got):,} rows of {os.path.relpath(args.data, ROOT)} with --file: {seconds:.1f} s, "
                 f"{len(got) / seconds:.0f} rows/s from start to exit; SST labels equal to the run's "
                 f"predictions/sst-dev-output.csv: {equal:,} of {len(shared):,}")
    print("\n".join(lines))
    if args.write:
        with open(ROOT / "bench" / "results" / "predict.md", "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n\n")
    return 0 if shared and equal == len(shared) and gap < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
