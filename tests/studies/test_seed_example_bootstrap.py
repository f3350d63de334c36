"""Grades bench/seed_example_bootstrap.py: the seed × example bootstrap of a study's paired Δ.

Oracles: (a) the dev scores train_multitask.py recorded in committed metrics.jsonl files (written by
minbert.tasks.multitask.task_scores, another code path) must come back from the runs' outputs.pt; (b) a loop over
the resamples written here with numpy and scipy.stats.pearsonr, fed the same random draws, must give the same
resampled differences; (c) a configuration against itself differs by exactly 0 on every resample.

Run: python -m pytest -q tests/studies/test_seed_example_bootstrap.py   (offline, seconds)
"""

from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import torch

from minbert.core.export import load_outputs
from bench import seed_example_bootstrap as boot

RUNS = Path(__file__).resolve().parents[2] / "bench" / "results" / "study_controls" / "runs"
MOD = "bench.seed_example_bootstrap"


def test_scores_from_outputs_are_the_recorded_dev_scores():
    """Seeds 6-8 of the committed controls: their outputs.pt (the best epoch, the rule they were made with) must give
    the dev scores metrics.jsonl recorded for that epoch, to its 4 decimals."""
    import json
    for config in ("baseline", "concat"):
        for seed in (6, 7, 8):
            folder = RUNS / config / f"seed{seed}"
            records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
            best = max(records, key=lambda r: (r["overall"], -r["epoch"]))
            got = boot.scores_of([load_outputs(folder)])[0]
            for metric, value in got.items():
                assert value == pytest.approx(best[metric], abs=6e-5), \
                    f"{MOD}.scores_of: {config} seed {seed} {metric} {value:.5f}, recorded {best[metric]}"


def fake_run(rng, n=(7, 9, 6), noise=1.0):
    """A run's outputs.pt content: sst (N, 5) logits, para (N,) logits, sts (N,) scores, with gold labels."""
    gold = {"sst": torch.arange(n[0]) % 5, "para": torch.arange(n[1]) % 2, "sts": torch.linspace(0, 5, n[2])}
    dev = {"sst": {"outputs": torch.tensor(rng.normal(size=(n[0], 5)), dtype=torch.float32)},
           "para": {"outputs": torch.tensor(rng.normal(size=n[1]), dtype=torch.float32)},
           "sts": {"outputs": gold["sts"] + torch.tensor(noise * rng.normal(size=n[2]), dtype=torch.float32)}}
    for task, entry in dev.items():
        entry["ids"] = [f"{task}{i}" for i in range(len(gold[task]))]
        entry["labels"] = gold[task]
    return {"dev": dev}


def reference(arm, base, resamples, seed):
    """The bootstrap as a loop: the same torch draws (seeds, then each task's examples, per chunk of all
    resamples), scored with numpy and scipy."""
    g = torch.Generator().manual_seed(seed)
    n = len(arm)
    seeds = torch.randint(n, (resamples, n), generator=g).numpy()
    idx = {t: torch.randint(len(arm[0]["dev"][t]["ids"]), (resamples, len(arm[0]["dev"][t]["ids"])), generator=g).numpy()
           for t in ("sst", "para", "sts")}

    def score(run, r):
        dev = run["dev"]
        i = idx["sst"][r]
        sst = np.mean(dev["sst"]["outputs"].numpy().argmax(-1)[i] == dev["sst"]["labels"].numpy()[i])
        i = idx["para"][r]
        para = np.mean((dev["para"]["outputs"].numpy() > 0).astype(int)[i] == dev["para"]["labels"].numpy()[i])
        i = idx["sts"][r]
        sts = scipy.stats.pearsonr(dev["sts"]["outputs"].numpy().astype(float)[i], dev["sts"]["labels"].numpy()[i])[0]
        return (sst + para + (sts + 1) / 2) / 3
    return np.array([np.mean([score(arm[s], r) - score(base[s], r) for s in seeds[r]]) for r in range(resamples)])


def test_the_bootstrap_equals_a_loop_over_its_resamples():
    rng = np.random.default_rng(0)
    arm, base = [fake_run(rng) for _ in range(3)], [fake_run(rng, noise=2.0) for _ in range(3)]
    got = boot.seed_example_bootstrap(arm, base, resamples=40, seed=5, chunk=40)["overall"].numpy()
    want = reference(arm, base, 40, 5)
    np.testing.assert_allclose(got, want, atol=1e-12,
                               err_msg=f"{MOD}.seed_example_bootstrap: resampled Δ overall differs from the loop")
    assert got.std() > 0, "fixture: the resamples must differ"


def test_a_configuration_against_itself_differs_by_zero():
    rng = np.random.default_rng(1)
    runs = [fake_run(rng) for _ in range(2)]
    for metric, values in boot.seed_example_bootstrap(runs, runs, resamples=30).items():
        assert torch.equal(values, torch.zeros(30, dtype=values.dtype)), f"{MOD}: {metric} of a run against itself"
    with pytest.raises(ValueError):
        boot.seed_example_bootstrap(runs, runs[:1])
