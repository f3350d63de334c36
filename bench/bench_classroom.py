"""Classroom edition: how long grading takes, and what the exploits score (bench/results/classroom.md).

    python bench/bench_classroom.py [--repeats 2]
    python bench/bench_classroom.py --baseline ../minbert-old [--repeats 3]   (writes classroom_vs_baseline.md)

Times `grade` of this repository (all 10 assignments, 110 points) with 1 and 2 workers, interleaved,
and `student` (the hand-out build); then grades each exploit of minbert/classroom/autograder.py. Names the
CPU and the load, since the machine is shared. With --baseline, times `python -m minbert classroom grade`
(the command a teacher runs, 2 workers) in another checkout and in this one, alternating, and reports the
ratio of the medians: both see the same machine and load.
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

from minbert.classroom import assignments as C                     # noqa: E402
from minbert.classroom import autograder as A             # noqa: E402
from minbert.classroom.grade import grade                 # noqa: E402


def cpu():
    """The CPU as a figure needs it: name, family/model (Zen 3 and Zen 5 share the name 'AMD EPYC'), bf16 support."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    field = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in out.splitlines() if ":" in ln}
    flags = set(field.get("Flags", "").split())
    bf16 = "AMX" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags else "no native bf16"
    return (f"{field.get('Model name', '?')} (family {field.get('CPU family', '?')}, model {field.get('Model', '?')}; "
            f"{bf16}), {os.cpu_count()} cores")


def compare(baseline: Path, repeats: int):
    """Wall seconds of the grade command in `baseline` and here, alternating; writes the ratio."""
    times, load = {"baseline": [], "this": []}, [os.getloadavg()[0]]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for _ in range(repeats):
        for name, root in (("baseline", baseline), ("this", ROOT)):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "minbert", "classroom", "grade"], cwd=root, env=env,
                               capture_output=True, text=True)
            times[name].append(time.perf_counter() - t)
            assert r.returncode == 0 and "110.0 / 110" in r.stdout, f"{root} did not grade 110/110:\n{r.stdout}{r.stderr}"
            load.append(os.getloadavg()[0])
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    isolation = next((ln for ln in r.stdout.splitlines() if ln.startswith("isolation:")), "isolation: (not printed)")
    lines = ["# Classroom grading: this grader against a baseline checkout", "",
             f"CPU: {cpu()}. Load average during the run: {min(load):.1f}-{max(load):.1f}. "
             f"`python -m minbert classroom grade` (all 10 assignments, 2 workers), {repeats} runs each, alternating.",
             f"This grader's {isolation}", "",
             "| grader | wall seconds (each run) | median |", "|---|---|---|",
             f"| baseline ({baseline.name}) | {', '.join(f'{t:.1f}' for t in times['baseline'])} | {med['baseline']:.1f} |",
             f"| this checkout | {', '.join(f'{t:.1f}' for t in times['this'])} | {med['this']:.1f} |", "",
             f"Ratio this / baseline: **{med['this'] / med['baseline']:.2f}x** (target ≤ 1.3x).", ""]
    (ROOT / "bench" / "results" / "classroom_vs_baseline.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--baseline", type=Path, default=None,
                   help="another checkout of minbert (e.g. the commit before a grader change) to time against")
    args = p.parse_args()
    if args.baseline:
        return compare(args.baseline.resolve(), args.repeats)
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
             f"CPU: {cpu()}. Load average during the run: {min(load):.1f}-{max(load):.1f} (other jobs).", "",
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
