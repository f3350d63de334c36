"""bench/time_to_accuracy.py: its rule 3 (a run scored at 4 points is the same run), its intervals and its reading of
the points, and the README's time-to-accuracy sentence against the committed results.

Oracles: the run itself without the points (rule 3), scipy's t interval, and the committed JSON records."""

import json
import math
import re
from pathlib import Path

import pytest
import torch

import train_multitask
from conftest import bench_script, save_tiny_model, write_task_files
from minbert.run import checkpoint

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "time_to_accuracy"


def bench():
    return bench_script("time_to_accuracy")


def test_four_points_split_the_epochs_and_keep_the_step_count_within_three():
    tta = bench()
    argv = ["python", "train_multitask.py", "--epochs", "1", "--batch_size", "16"]
    assert tta.with_points(argv, 1912, 4)[-4:] == ["--epochs", "4", "--steps_per_epoch", "478"]
    for steps in (957, 958, 959, 960):
        out = tta.with_points(argv, steps, 4)
        total = int(out[out.index("--epochs") + 1]) * int(out[out.index("--steps_per_epoch") + 1])
        assert steps <= total <= steps + 3, f"{steps} steps became {total}: rule 3 allows up to 3 more"
    two = tta.with_points(["python", "train_multitask.py", "--epochs", "2"], 100, 4)
    assert two.count("--epochs") == 1 and two[-4:] == ["--epochs", "8", "--steps_per_epoch", "25"]
    with pytest.raises(SystemExit, match="annealed"):
        tta.with_points(["python", "train_multitask.py", "--schedule", "annealed"], 100, 4)


def test_a_run_scored_at_four_points_trains_the_same_weights_as_the_run_scored_once(tmp_path):
    """Rule 3: --epochs E -> 4E epochs of S/4 steps keeps the schedule, task draws and batches."""
    data, model = tmp_path / "data", tmp_path / "model"
    data.mkdir()
    write_task_files(data)
    save_tiny_model(model)

    def run(name, *flags):
        out = tmp_path / name
        train_multitask.main(["--model", str(model), "--data_dir", str(data), "--out_dir", str(out), "--batch_size",
                              "4", "--lr", "1e-3", "--seed", "3", "--device", "cpu", "--amp", "off",
                              "--keep_resume_state", "--select_epoch", "last", *flags])
        return checkpoint.load(out / "last.pt")["model"], [json.loads(x) for x in (out / "metrics.jsonl").open()]

    once, once_points = run("once", "--epochs", "1", "--steps_per_epoch", "8")
    four, four_points = run("four", "--epochs", "4", "--steps_per_epoch", "2")
    assert len(once_points) == 1 and len(four_points) == 4
    differ = [k for k in once if not torch.equal(once[k], four[k])]
    assert not differ, f"scored at 4 points, the run trained other weights: {differ[:5]}"
    assert four_points[-1]["overall"] == once_points[0]["overall"]


def test_the_interval_is_scipys_t_interval():
    from scipy import stats
    tta = bench()
    xs = [0.7412, 0.7455, 0.7391]
    m, sd = sum(xs) / 3, float(torch.tensor(xs, dtype=torch.float64).std())
    lo, hi = stats.t.interval(0.95, df=2, loc=m, scale=sd / math.sqrt(3))
    assert tta.mean_ci(xs) == f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
    assert tta.mean_ci([0.5]) == "0.500" and tta.mean_ci([]) == "-"
    for n in range(2, 11):
        assert tta.T95[n - 1] == pytest.approx(stats.t.ppf(0.975, n - 1), abs=5e-4), f"T95[{n - 1}]"


def test_the_time_to_a_target_is_the_first_point_at_or_above_it():
    tta = bench()
    runs = [{"config": "A", "seed": 1, "wall_s": 300.0, "points": [{"t_s": 290.0, "sst_acc": 0.47, "para_acc": 0.82,
                                                                     "sts_pearson": 0.86, "overall": 0.7400}],
             "time_to": {"0.740": 290.0, "0.752": None}},
            {"config": "B", "seed": 1, "wall_s": 250.0,
             "points": [{"t_s": t, "sst_acc": 0.4, "para_acc": 0.8, "sts_pearson": 0.8, "overall": o}
                        for t, o in ((60.0, 0.69), (120.0, 0.741), (180.0, 0.739), (240.0, 0.745))],
             "time_to": {"0.740": 120.0, "0.752": None}}]
    row = next(line for line in tta.table(runs).splitlines() if line.startswith("| B |"))
    assert "| 120.0 (1/1) | 0.40 |" in row and "- (0/1)" in row, row
    assert "| 0.83 |" in row, "B's wall / A's wall of the same seed: 250 / 300"


def committed_runs() -> list:
    return [r for f in sorted(RESULTS.glob("*.json")) for r in json.loads(f.read_text())["runs"]]


def test_the_readmes_time_to_accuracy_sentence_is_what_the_bench_measured():
    """The Quick start's "Time to accuracy" sentence: B's mean final dev overall, its time to 0.740 as a share of
    fe0d914's quick start, and the seeds, recomputed from bench/results/time_to_accuracy/*.json."""
    runs = committed_runs()
    a_wall = {r["seed"]: r["wall_s"] for r in runs if r["config"] == "A"}
    b = [r for r in runs if r["config"] == "B"]
    assert b and a_wall, "no committed B and A runs in bench/results/time_to_accuracy/"
    overall = sum(r["points"][-1]["overall"] for r in b) / len(b)
    wall = sum(r["wall_s"] / a_wall[r["seed"]] for r in b) / len(b)
    a_overall = sum(r["points"][-1]["overall"] for r in runs if r["config"] == "A") / len(a_wall)
    text = (ROOT / "README.md").read_text()
    sentence = re.search(r"- \*\*Time to accuracy:\*\*(.*)", text)
    assert sentence, "README.md's Quick start has no '- **Time to accuracy:**' line"
    line = sentence.group(1)
    expected = [f"{overall:.3f}", f"{a_overall:.3f}", f"{wall:.2f}x", f"{len(b)} seeds"]
    missing = [x for x in expected if x not in line]
    assert not missing, f"README's time-to-accuracy line should state {expected} (from the committed runs); " \
                        f"missing {missing}:\n{line}"


def test_the_committed_table_is_what_the_runs_render_to():
    """bench/results/time_to_accuracy.md's table, between its markers, is `--table` of the committed runs."""
    tta = bench()
    page = (ROOT / "bench" / "results" / "time_to_accuracy.md").read_text()
    written = page.split("<!-- table:begin -->", 1)[1].split("<!-- table:end -->", 1)[0].strip()
    assert written == tta.table(committed_runs()), \
        "bench/results/time_to_accuracy.md's table is not what its JSON renders to: rerun " \
        "`python bench/time_to_accuracy.py --table bench/results/time_to_accuracy/*.json` and paste it"
