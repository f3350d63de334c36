"""Grades bench/seed_example_bootstrap.py: the seed × example bootstrap of a study's paired Δ.

Oracles: (a) the dev scores train_multitask.py recorded in committed metrics.jsonl files (written by
minbert.tasks.multitask.task_scores, another code path) must come back from the runs' outputs.pt; (b) a loop over
the resamples written here with numpy and scipy.stats.pearsonr, fed the same random draws, must give the same
resampled differences; (c) a configuration against itself differs by exactly 0 on every resample. bootstrap_overall
(one ensemble against its members, the dev examples resampled): (b) scipy.stats.bootstrap's percentile interval;
(c) a member against itself differs by exactly 0 on every resample.

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


def bootstrap_members(n=(120, 150, 90), k=3, seed=0):
    """k members with random outputs on an SST, a Quora and an STS dev set of the given sizes, correlated with gold."""
    g = torch.Generator().manual_seed(seed)
    sst_gold, para_gold = torch.randint(5, (n[0],), generator=g), torch.randint(2, (n[1],), generator=g)
    sts_gold = torch.rand(n[2], generator=g, dtype=torch.float64) * 5
    members = []
    for _ in range(k):
        sst = torch.randn(n[0], 5, generator=g) + 1.5 * torch.nn.functional.one_hot(sst_gold, 5)
        para = torch.randn(n[1], generator=g) + 1.5 * (2 * para_gold - 1)
        sts = sts_gold + 2 * torch.randn(n[2], generator=g, dtype=torch.float64)
        members.append({"sst": {"outputs": sst, "labels": sst_gold}, "para": {"outputs": para, "labels": para_gold.float()},
                        "sts": {"outputs": sts.float(), "labels": sts_gold.float()}})
    return members


def test_bootstrap_of_the_seed_average_against_a_member_matches_scipy_bootstrap():
    """Paired bootstrap of dev overall (ensemble − member 1): each task's examples resampled on their own, the same
    resample for both. Oracle: scipy.stats.bootstrap (percentile), one independent sample of example indices per task,
    with the uniform average and the overall score written here in numpy. Monte Carlo: bounds agree to 15% of the width."""
    from bench.seed_statistics import bootstrap_difference
    members = bootstrap_members()
    probs = {"sst": [torch.softmax(m["sst"]["outputs"].double(), -1).numpy() for m in members],
             "para": [torch.sigmoid(m["para"]["outputs"].double()).numpy() for m in members],
             "sts": [m["sts"]["outputs"].double().numpy() for m in members]}
    gold = {t: members[0][t]["labels"].numpy() for t in ("sst", "para", "sts")}

    def overall(i, j, k, which):   # which: None = uniform average, else one member
        pick = (lambda fs: np.mean(fs, 0)) if which is None else (lambda fs: fs[which])
        sst = (pick(probs["sst"])[i].argmax(-1) == gold["sst"][i]).mean()
        para = ((pick(probs["para"])[j] > 0.5) == gold["para"][j]).mean()
        r = np.corrcoef(pick(probs["sts"])[k], gold["sts"][k])[0, 1]
        return (sst + para + (r + 1) / 2) / 3

    data = tuple(np.arange(len(gold[t])) for t in ("sst", "para", "sts"))
    want = scipy.stats.bootstrap(data, lambda i, j, k: overall(i, j, k, None) - overall(i, j, k, 0), vectorized=False,
                                 paired=False, n_resamples=4000, method="percentile", random_state=0).confidence_interval
    resampled = boot.bootstrap_overall(members, [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], resamples=4000)
    observed = overall(*data, None) - overall(*data, 0)
    got = bootstrap_difference(observed, (resampled[:, 0] - resampled[:, 1]).tolist())
    width = want.high - want.low
    assert abs(got["low"] - want.low) < 0.15 * width and abs(got["high"] - want.high) < 0.15 * width, \
        f"{MOD}.bootstrap_overall: interval [{got['low']:.4f}, {got['high']:.4f}], scipy.stats.bootstrap " \
        f"[{want.low:.4f}, {want.high:.4f}]"
    full = boot.bootstrap_overall(members, [[1.0, 1.0, 1.0]], resamples=1)   # shape (R, W)
    assert tuple(full.shape) == (1, 1), f"{MOD}.bootstrap_overall: expected (R, W) = (1, 1), got {tuple(full.shape)}"


def test_bootstrap_is_paired_so_a_member_against_itself_differs_by_exactly_zero():
    """The same resample for every weighting: member 2 alone, listed twice, differs from itself by 0 on every resample
    (an unpaired bootstrap would give a spread around 0)."""
    resampled = boot.bootstrap_overall(bootstrap_members(), [[0.0, 1.0, 0.0], [0.0, 2.0, 0.0]], resamples=200)
    assert torch.equal(resampled[:, 0], resampled[:, 1]), f"{MOD}.bootstrap_overall: resamples are not shared (paired)"
    assert resampled[:, 0].std() > 0, f"{MOD}.bootstrap_overall: every resample gave the same score (no resampling?)"
