"""Classroom edition: how long grading takes, and what the exploits score (bench/results/classroom.md).

    python bench/bench_classroom.py [--repeats 2]

Times `grade` of this repository (all 10 assignments, 110 points) with 1 and 2 workers, interleaved,
and `student` (the hand-out build); then grades each exploit of minbert/grader/autograder.py. Names the
CPU and the load, since the machine is shared.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minbert import classroom as C                     # noqa: E402
from minbert.grader import autograder as A             # noqa: E402
from minbert.grader.grade import grade                 # noqa: E402


def cpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    name = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
    return f"{name}, {os.cpu_count()} cores"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    rows, load = [], [os.getloadavg()[0]]
    times = {1: [], 2: []}
    for _ in range(args.repeats):
        for workers in (1, 2):                           # interleaved, so both see the same load
            t = time.perf_counter()
            entries = grade(ROOT, workers=workers)
            times[workers].append(time.perf_counter() - t)
            assert abs(sum(e["score"] for e in entries) - 110) < 1e-6, "the repository must grade 110/110"
            load.append(os.getloadavg()[0])
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        C.student(Path(tmp) / "copy", None)
        build = time.perf_counter() - t
        for exploit in A.EXPLOITS:
            sub = Path(tmp) / exploit.__name__
            shutil.copytree(Path(tmp) / "copy", sub, ignore=shutil.ignore_patterns(".git"))
            key = exploit(sub)
            got = sum(e["score"] for e in grade(sub, {key}))
            rows.append(f"| {exploit.__name__} | {key} | {got:g} |")
    lines = ["# Classroom edition: grading time and exploits", "",
             f"CPU: {cpu()}. Load average during the run: {min(load):.1f}-{max(load):.1f} (other agents).", "",
             "| what | wall seconds (each run) |", "|---|---|",
             f"| grade all 10 assignments, 1 worker | {', '.join(f'{t:.1f}' for t in times[1])} |",
             f"| grade all 10 assignments, 2 workers | {', '.join(f'{t:.1f}' for t in times[2])} |",
             f"| student copy build (with git init + commit) | {build:.1f} |", "",
             "| exploit | assignment | score after |", "|---|---|---|", *rows, ""]
    out = ROOT / "bench" / "results" / "classroom.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
