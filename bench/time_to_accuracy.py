"""Time to accuracy on a CPU: how long a configuration takes to reach a dev score, side by side with fe0d914's
quick start (MLPerf Training's and DAWNBench's measure: wall time to a fixed quality on a held-out set, several runs,
rules written before the runs).

    python bench/time_to_accuracy.py                    # A = fe0d914's quick start, B = the README's; seeds 1-3
    python bench/time_to_accuracy.py --config "bs16=python train_multitask.py ... --batch_size 16" --config ...
    python bench/time_to_accuracy.py --smoke            # 32 examples per split, one seed: checks this script

The rules (written on 2026-12-02 before the first measured run; bench/results/time_to_accuracy.md quotes them):

1. Configurations. A is fe0d914's quick start: the `python train_multitask.py ...` line of fe0d914's README, run from
   `git archive fe0d914` in a temporary folder. Every other configuration is a command line of this checkout's
   train_multitask.py (default: B, the README's quick start line). Each run adds --seed S and a temporary --out_dir.
2. Order. Round r runs every configuration once with seed r (seeds 1, 2, 3 unless --seeds says more), A included;
   the order is rotated by one place each round, so no configuration always runs first or after the same one.
   One run at a time, each with --threads set to the machine's cores (what the scripts choose on a quiet machine;
   left to choose, a run started just after another sees the 1-minute load average of the last one and takes
   fewer: amended 04:22, after the first run, which was discarded). Before each run: wait (at most 5 min) until the
   CPUs are 90% idle over 5 s; the load average at its start, mean and maximum is recorded.
3. Scoring points. A runs exactly as shipped: its one dev evaluation at the end is its only point. Every other
   configuration is scored at 4 evenly spaced points of its own schedule: its --epochs E become 4E epochs of
   ceil(S/4) steps (S: its steps per epoch, from its --dry_run), which keeps its learning-rate schedule, task draws
   and batches (up to 3 more steps for the rounding); its schedule must not change with the epoch (no `annealed`).
   A point's time is the seconds from the launch to the printing of its dev scores, so start-up, every evaluation
   and every checkpoint before it are counted. The 3 added evaluations make these configurations' times
   pessimistic against their shipped command (one evaluation).
4. Quality: the dev overall score the script prints, (SST acc + Quora acc + (STS r + 1) / 2) / 3 on the shipped
   dev files. Targets: 0.740 (fe0d914's quick start) and 0.752 (the 6-epoch CPU recipe). Time to a target: its
   first point at or above it; else "not reached".
5. Results. Per run: its points (time, scores), wall time, load, the machine. Per configuration: the mean over
   seeds of the time to each target and of the final point's dev scores, each with a 95% t interval over seeds; the
   ratio of its time to each target and of its wall time to A's wall time of the same round (paired by round), mean
   and 95% t interval. A time to a target has an interval only when every seed reached it.
6. The issue's two bars for the README's quick start, read from B's row: (a) final dev overall >= 0.752 with a
   wall-time ratio <= 1; (b) dev overall >= 0.740 reached at <= 0.4x A's wall time. Both are stated per CPU.

Writes bench/results/time_to_accuracy/NAME.json (every run) and prints the table; --table FILE... prints the table
of committed results again.
"""

import argparse
import ast
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import readme_times   # the machine, the load sampler, the newcomer's environment, the README's command line

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "time_to_accuracy"
A_REF = "fe0d914"
TARGETS = (0.740, 0.752)
POINTS = 4
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


# ---------------------------------------------------------------------------- the machine is quiet
def cpu_times() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)   # (idle + iowait, all)


def idle_fraction(seconds: float = 5.0) -> float:
    (idle0, all0), _ = cpu_times(), time.sleep(seconds)
    idle1, all1 = cpu_times()
    return (idle1 - idle0) / max(all1 - all0, 1)


def wait_quiet(limit: float = 300.0) -> float:
    """Wait until the CPUs are 90% idle over 5 s (at most `limit` s); the idle fraction last seen."""
    t0 = time.perf_counter()
    while (idle := idle_fraction()) < 0.9 and time.perf_counter() - t0 < limit:
        pass
    return round(idle, 3)


# ---------------------------------------------------------------------------- one run
def steps_per_epoch(argv: list, cwd: Path) -> int:
    """S, from the command's --dry_run ("steps  956 per epoch x 1 epochs ...")."""
    out = subprocess.run([*argv, "--dry_run"], cwd=cwd, capture_output=True, text=True, env=readme_times.newcomer_env())
    found = re.search(r"^steps\s+([\d,]+) per epoch x (\d+) epochs", out.stdout, re.M)
    if out.returncode or not found:
        sys.exit(f"time_to_accuracy: `{shlex.join(argv)} --dry_run` gave no steps line:\n{out.stdout}{out.stderr}")
    return int(found.group(1).replace(",", ""))


def with_points(argv: list, steps: int, points: int) -> list:
    """The same run scored at `points` evenly spaced points: --epochs E -> points*E epochs of ceil(S/points) steps."""
    if "annealed" in argv:
        sys.exit("time_to_accuracy: an annealed schedule changes with the epoch; its points would change the run")
    epochs = int(argv[argv.index("--epochs") + 1]) if "--epochs" in argv else 10
    argv = [a for i, a in enumerate(argv) if a != "--epochs" and (i == 0 or argv[i - 1] != "--epochs")]
    return argv + ["--epochs", str(points * epochs), "--steps_per_epoch", str(math.ceil(steps / points))]


def run(name: str, argv: list, cwd: Path, seed: int, out_dir: Path) -> dict:
    """Launch, timestamp each printed line, keep the dev-score lines: {t_s, scores} per point."""
    argv = argv + ["--seed", str(seed), "--out_dir", str(out_dir), "--threads", str(readme_times.machine()["cores"])]
    idle = wait_quiet()
    points, tail, startup = [], [], None
    with readme_times.LoadSampler(5.0) as load:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=readme_times.newcomer_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        for line in proc.stdout:
            t = time.perf_counter() - t0
            tail = (tail + [line])[-20:]
            if startup is None and line.startswith("epoch 1/"):   # the first bar: loading and tokenizing done
                startup = round(t, 1)
            if line.startswith("{'epoch'"):
                record = ast.literal_eval(line.strip())
                points.append({"t_s": round(t, 1), **{k: record[k] for k in
                                                      ("epoch", "sst_acc", "para_acc", "sts_pearson", "overall")}})
                print(f"  {name} seed {seed}: {t:6.1f} s  dev overall {record['overall']:.4f}", flush=True)
        rc = proc.wait()
        wall = time.perf_counter() - t0
    if rc or not points:
        sys.exit(f"time_to_accuracy: {name} seed {seed} failed (exit status {rc}):\n{''.join(tail)}")
    reached = {f"{x:.3f}": next((p["t_s"] for p in points if p["overall"] >= x), None) for x in TARGETS}
    return {"config": name, "seed": seed, "command": shlex.join(argv[1:]), "wall_s": round(wall, 1),
            "startup_s": startup, "points": points, "time_to": reached, "idle_before": idle, **load.summary()}


# ---------------------------------------------------------------------------- the table
def mean_ci(xs: list, digits: int = 3) -> str:
    """The mean and its 95% t interval over the runs: "m [lo, hi]"."""
    if not xs:
        return "-"
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return f"{m:.{digits}f}"
    h = T95[len(xs) - 1] * math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs))
    return f"{m:.{digits}f} [{m - h:.{digits}f}, {m + h:.{digits}f}]"


def table(runs: list) -> str:
    names = list(dict.fromkeys(r["config"] for r in runs))
    a_wall = {r["seed"]: r["wall_s"] for r in runs if r["config"] == "A"}
    a_final = {r["seed"]: r["points"][-1]["overall"] for r in runs if r["config"] == "A"}
    rows = ["| configuration | seeds | wall (s) | wall / A | " + " | ".join(
        f"to {x:.3f}: s (reached) | / A's wall" for x in TARGETS) + " | final dev SST / Quora / STS | final overall | its difference from A's (paired) |",
        "|---|---|---|---|" + "---|---|" * len(TARGETS) + "---|---|---|"]
    for name in names:
        rs = [r for r in runs if r["config"] == name]
        cells = [name, ",".join(str(r["seed"]) for r in rs), mean_ci([r["wall_s"] for r in rs], 1),
                 mean_ci([r["wall_s"] / a_wall[r["seed"]] for r in rs if r["seed"] in a_wall], 2)]
        for x in TARGETS:
            times = [r["time_to"][f"{x:.3f}"] for r in rs]
            got = [t for t in times if t is not None]
            cells += [f"{mean_ci(got, 1) if len(got) == len(times) else '-'} ({len(got)}/{len(times)})",
                      mean_ci([t / a_wall[r["seed"]] for t, r in zip(times, rs) if t is not None and r["seed"] in a_wall],
                              2) if len(got) == len(times) else "-"]
        last = [r["points"][-1] for r in rs]
        cells += [" / ".join(mean_ci([p[k] for p in last]).split(" [")[0] for k in ("sst_acc", "para_acc", "sts_pearson")),
                  mean_ci([p["overall"] for p in last]),
                  mean_ci([p["overall"] - a_final[r["seed"]] for p, r in zip(last, rs) if r["seed"] in a_final], 4)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------- main
def configs(specs: list, smoke: bool, a_root: Path) -> dict:
    """{name: (argv, cwd)}: A from fe0d914's README, the others from --config NAME=COMMAND (or the README)."""
    a_line = readme_times.readme_command("quickstart", (a_root / "README.md").read_text())
    b_line = readme_times.readme_command("quickstart", (ROOT / "README.md").read_text())
    extra = ["--limit", "32"] if smoke else []

    def argv_of(line):   # this interpreter; --out_dir dropped (each run gets its own)
        argv = [sys.executable, *shlex.split(line)[1:], *extra]
        return [x for i, x in enumerate(argv) if x != "--out_dir" and argv[i - 1] != "--out_dir"]
    out = {"A": (argv_of(a_line), a_root)}
    for spec in specs or [f"B={b_line}"]:
        name, _, line = spec.partition("=")
        argv = argv_of(line)
        out[name] = (with_points(argv, steps_per_epoch(argv, ROOT), POINTS), ROOT)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", action="append", default=[], metavar="NAME=COMMAND",
                   help="a configuration: a `python train_multitask.py ...` line (repeatable; default B = the README's)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--name", default="quickstart", help="results file: bench/results/time_to_accuracy/NAME.json")
    p.add_argument("--smoke", action="store_true", help="32 examples per split, the first seed only; writes nothing")
    p.add_argument("--table", nargs="+", metavar="FILE", help="print the table of these results files and exit")
    a = p.parse_args()
    if a.table:
        print(table([r for f in a.table for r in json.loads(Path(f).read_text())["runs"]]))
        return
    seeds = a.seeds[:1] if a.smoke else a.seeds
    with tempfile.TemporaryDirectory() as tmp:
        a_root = Path(tmp) / A_REF
        a_root.mkdir()
        archive = subprocess.run(["git", "archive", A_REF], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(a_root)], input=archive, check=True)
        todo = configs(a.config, a.smoke, a_root)
        names, runs = list(todo), []
        result = {"rules": "bench/time_to_accuracy.py's docstring", "a_ref": A_REF, "machine": readme_times.machine(),
                  "date": time.strftime("%Y-%m-%d %H:%M"), "configs": {n: shlex.join(todo[n][0][1:]) for n in names},
                  "runs": runs}
        path = RESULTS / f"{a.name}.json"
        for r, seed in enumerate(seeds):
            for name in names[r % len(names):] + names[:r % len(names)]:   # rotated by one each round
                argv, cwd = todo[name]
                print(f"round {r + 1}/{len(seeds)}: {name}, seed {seed}", flush=True)
                runs.append(run(name, argv, cwd, seed, Path(tmp) / f"{name}-{seed}"))
                shutil.rmtree(Path(tmp) / f"{name}-{seed}", ignore_errors=True)   # ~0.3 GB a run
                if not a.smoke:   # after each run: an interrupted measurement keeps what it measured
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(result, indent=1) + "\n")
    print(table(runs))
    print(f"machine: {readme_times.cpu_words(result['machine'])}")


if __name__ == "__main__":
    main()
