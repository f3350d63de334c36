"""Grades minbert.tools.ensemble (Song, Hu & Pan §3.1; greedy selection with replacement, Caruana 2004).

Oracles: (c) constructed outputs whose best subset is known by design (three complementary
members beat every other choice; two harmful members never help); hand-computed weighted
averages and votes, including the documented ties; and an ensemble of ONE real run of
train_multitask.py reproduces that run's six prediction files byte for byte.
"""

import math

import pytest
import torch

from minbert.tools import ensemble
from minbert.tasks.data import STAND_IN_PARA_TEST
from minbert.tools.ensemble import combine, greedy_select, weighted_average, weighted_vote

N = 30   # examples per task; thirds 0-9, 10-19, 20-29


def constructed_members():
    """Members A, B, C: right (confidently) except on their own third, where they are wrong
    (weakly). D, E: confidently wrong everywhere. STS: gold + mutually orthogonal noise of equal
    size for A, B, C (averaging all three is best), -gold for D and E."""
    sst_gold = torch.arange(N) % 5
    para_gold = torch.arange(N) % 2
    # orthonormal, mean-zero columns: gold direction and three noise directions
    g = torch.Generator().manual_seed(0)
    basis, _ = torch.linalg.qr(torch.cat([torch.ones(N, 1), torch.randn(N, 4, generator=g, dtype=torch.float64)], 1))
    sts_gold = basis[:, 1] * 5
    members = []
    for k in range(5):
        wrong = torch.zeros(N, dtype=torch.bool) if k < 3 else torch.ones(N, dtype=torch.bool)
        if k < 3:
            wrong[10 * k: 10 * k + 10] = True
        sst = torch.zeros(N, 5)
        sst[torch.arange(N), sst_gold] = 2.0                     # right: margin 2 on the gold class
        sst[wrong] = 0.0
        sst[wrong, (sst_gold[wrong] + 1) % 5] = 1.0 if k < 3 else 4.0   # wrong: weak (A-C) or strong (D, E)
        para = torch.where(para_gold == 1, 3.0, -3.0)           # right: margin 3
        para[wrong] = torch.where(para_gold[wrong] == 1, -1.0, 1.0) * (1 if k < 3 else 4)
        sts = (sts_gold + 3 * basis[:, 2 + k]) if k < 3 else -sts_gold
        members.append({"sst": {"outputs": sst, "labels": sst_gold}, "para": {"outputs": para, "labels": para_gold.float()},
                        "sts": {"outputs": sts.float(), "labels": sts_gold.float()}})
    return members


def test_greedy_selection_finds_the_known_best_subset():
    members = constructed_members()
    counts = greedy_select(members, "average")
    assert counts == [1, 1, 1, 0, 0], f"minbert.tools.ensemble.greedy_select: expected A, B, C once each and D, E never, got counts {counts}"
    best = ensemble.dev_scores(members, [1, 1, 1, 0, 0], "average")
    assert best["sst_acc"] == 1.0 and best["para_acc"] == 1.0, f"constructed case: A+B+C should be perfect, got {best}"
    # the order of the command line decides ties only: shuffling the members keeps the subset
    order = [4, 2, 3, 0, 1]
    counts = greedy_select([members[i] for i in order], "average")
    assert counts == [0, 1, 0, 1, 1], f"minbert.tools.ensemble.greedy_select: members reordered {order}: expected C, A, B, got {counts}"


def test_ranked_overall_selection_is_one_pass_without_replacement():
    """--weights ranked_overall: members in order of their own dev overall, each kept once if it helps."""
    members = constructed_members()
    assert ensemble.ranked_overall_select(members, "average") == [1, 1, 1, 0, 0], \
        "minbert.tools.ensemble.ranked_overall_select: expected A, B, C kept (in rank order) and D, E rejected"
    # a strong member listed twice: with replacement greedy may reuse it, ranked never does
    counts = ensemble.ranked_overall_select([members[0], members[3]], "average")
    assert counts == [1, 0], f"minbert.tools.ensemble.ranked_overall_select: expected [1, 0], got {counts}"
    # per task: A + B are already perfect on SST and Quora (each is right where the other is weakly wrong),
    # so C cannot strictly improve them; on STS each member's orthogonal noise averages down, so C joins
    per_task = ensemble.ranked_select(members, "average")
    expected = {"sst": [1, 1, 0, 0, 0], "para": [1, 1, 0, 0, 0], "sts": [1, 1, 1, 0, 0]}
    assert per_task == expected, f"minbert.tools.ensemble.ranked_select: per task, expected {expected}, got {per_task}"


def logit(p):
    p = torch.tensor(p, dtype=torch.float64)
    return (p / (1 - p)).log()


def two_members(para_a, para_b, sts_a, sts_b, para_gold, sts_gold):
    """Members with identical SST outputs (all right) and the given para probabilities / STS scores."""
    sst = torch.tensor([[2.0, 0, 0, 0, 0]] * len(para_gold))
    gold = torch.zeros(len(para_gold), dtype=torch.long)
    return [{"sst": {"outputs": sst, "labels": gold},
             "para": {"outputs": logit(pa), "labels": torch.tensor(para_gold, dtype=torch.float32)},
             "sts": {"outputs": torch.tensor(sa, dtype=torch.float64), "labels": torch.tensor(sts_gold, dtype=torch.float64)}}
            for pa, sa in ((para_a, sts_a), (para_b, sts_b))]


def test_ranked_is_algorithm_1_per_task_on_a_hand_computed_case():
    """Song, Hu & Pan §3.1 + Algorithm 1, worked by hand.
    Para (gold 1, 1, 0, 0): A = .9 .9 .1 .1 (acc 1), B = .4 .4 .6 .6 (acc 0). Ranked by para: A joins
      (Fin empty); A+B averages .65 .65 .35 .35 -> acc 1, not > 1: B rejected.  para weights [1, 0].
    STS (gold 0 1 2 3): A = 0 2 1 3 (r = 0.8), B = 0 1 2 3 (r = 1). Ranked by STS: B joins first; A+B =
      0 1.5 1.5 3, r = 0.949 < 1: A rejected.  sts weights [0, 1].
    SST: identical members: the first joins, the second adds nothing.  sst weights [1, 0].
    The old overall ranking took A first (better overall), then B (the STS average 0.949 > 0.8): [1, 1]."""
    members = two_members([.9, .9, .1, .1], [.4, .4, .6, .6], [0, 2, 1, 3], [0, 1, 2, 3], [1, 1, 0, 0], [0, 1, 2, 3])
    got = ensemble.ranked_select(members, "average")
    expected = {"sst": [1.0, 0.0], "para": [1.0, 0.0], "sts": [0.0, 1.0]}
    assert got == expected, (f"minbert.tools.ensemble.ranked_select: Algorithm 1 ranked per task (§3.1 'ranking the models by "
                             f"their accuracy for each task'): expected {expected}, got {got}")
    assert ensemble.ranked_overall_select(members, "average") == [1, 1], "ranked_overall (the other reading): expected [1, 1]"


def test_ranked_uses_algorithm_1_prior_weights():
    """Para (gold 1, 1, 0, 0): A = .9 .9 .7 .2 (acc .75), B = .3 .6 .1 .1 (acc .75); the tie keeps A first.
    Priors 1, 1: (A + B)/2 = .6 .75 .4 .15 -> acc 1 > .75: B joins, weights [1, 1].
    Priors 1, 3: (A + 3B)/4 = .45 .675 .25 .125 -> acc .75, not > .75: B rejected, weights [1, 0]."""
    members = two_members([.9, .9, .7, .2], [.3, .6, .1, .1], [0, 1, 2, 3], [0, 1, 2, 3], [1, 1, 0, 0], [0, 1, 2, 3])
    assert ensemble.ranked_select(members, "average", [1.0, 1.0])["para"] == [1.0, 1.0], \
        "minbert.tools.ensemble.ranked_select: priors 1, 1: B improves para accuracy to 1 and must join"
    assert ensemble.ranked_select(members, "average", [1.0, 3.0])["para"] == [1.0, 0.0], \
        "minbert.tools.ensemble.ranked_select: priors 1, 3 (Algorithm 1's ŵ_i): A + 3B scores .75 and B must be rejected"
    assert ensemble.ranked_select(members, "average", [2.0, 1.0])["para"] == [2.0, 1.0], \
        "minbert.tools.ensemble.ranked_select: a kept member's weight is its prior ŵ_i"


def test_greedy_ties_go_to_the_member_listed_first():
    members = constructed_members()
    twins = [members[3], members[0], members[0]]          # D, then two identical copies of A
    assert greedy_select(twins, "average") == [0, 1, 0], \
        "minbert.tools.ensemble.greedy_select: two equally good members: the first listed must be taken"


def test_weighted_average_matches_hand_computation():
    # two members, weights 3 and 1: (3·0.2 + 1·0.6) / 4 = 0.3 and (3·0.9 + 0.1) / 4 = 0.7
    f = weighted_average([torch.tensor([0.2, 0.9], dtype=torch.float64), torch.tensor([0.6, 0.1], dtype=torch.float64)], [3.0, 1.0])
    torch.testing.assert_close(f, torch.tensor([0.3, 0.7], dtype=torch.float64), atol=1e-12, rtol=0,
                               msg="minbert.tools.ensemble.weighted_average: expected Σ w f / Σ w = [0.3, 0.7]")
    # para from logits: sigmoid(0) = 0.5 and sigmoid(ln 3) = 0.75 -> (0.5 + 0.75) / 2 = 0.625 > 0.5 -> 1;
    # sigmoid(-ln 3) = 0.25 and sigmoid(ln 3) = 0.75 average exactly 0.5 -> 0 (only > 0.5 predicts 1)
    members = [{"outputs": torch.tensor([0.0, -math.log(3)])}, {"outputs": torch.tensor([math.log(3), math.log(3)])}]
    assert combine("para", members, [1.0, 1.0], "average") == [1, 0], "minbert.tools.ensemble.combine(para, average): expected [1, 0]"
    # sts: plain weighted mean of scores, whatever the method
    sts = [{"outputs": torch.tensor([1.0, 4.0])}, {"outputs": torch.tensor([3.0, 0.0])}]
    for method in ("average", "vote"):
        assert combine("sts", sts, [1.0, 3.0], method) == [2.5, 1.0], f"minbert.tools.ensemble.combine(sts, {method}): expected [2.5, 1.0]"


def test_weighted_vote_matches_hand_computation_and_breaks_ties_to_the_smallest_class():
    # example 0: class 0 has weight 0.5, class 1 has 0.3 + 0.3 = 0.6 -> 1
    # example 1: classes 3 and 1 both have weight 1 (third member weight 0) -> tie -> 1
    got = weighted_vote([[0, 3], [1, 1], [1, 4]], [0.5, 0.3, 0.3], 5)
    assert got[0] == 1, f"minbert.tools.ensemble.weighted_vote: 0.3 + 0.3 > 0.5 must win, got {got[0]}"
    got = weighted_vote([[3], [1], [4]], [1.0, 1.0, 0.0], 5)
    assert got == [1], f"minbert.tools.ensemble.weighted_vote: tie between classes 3 and 1 must go to 1, got {got}"
    # sst through combine: the vote counts predicted classes, not probabilities
    logits = [torch.tensor([[5.0, 0, 0, 0, 0]]), torch.tensor([[0, 0.1, 0, 0, 0]]), torch.tensor([[0, 0.1, 0, 0, 0]])]
    members = [{"outputs": x} for x in logits]
    assert combine("sst", members, [1, 1, 1], "vote") == [1], "minbert.tools.ensemble.combine(sst, vote): two weak votes beat one confident"
    assert combine("sst", members, [1, 1, 1], "average") == [0], "minbert.tools.ensemble.combine(sst, average): the confident member dominates"


def test_ensemble_of_one_run_reproduces_its_prediction_files_byte_for_byte(tmp_path):
    from test_train_multitask import run
    data, model = tiny_run_inputs(tmp_path)
    run((data, model), tmp_path, "--epochs", "1", "--limit", "12")
    for method, weights in (("average", "greedy"), ("average", "ranked"), ("average", "ranked_overall"), ("vote", "uniform"),
                            ("average", "3")):
        out = tmp_path / f"ens-{method}-{weights}"
        ensemble.main([str(tmp_path / "run"), "--method", method, "--weights", weights, "--out_dir", str(out)])
        for task in ("sst", "para", "sts"):
            for split in ("dev", "test"):
                name = f"{task}-{split}-output.csv"
                mine, theirs = (out / "predictions" / name).read_bytes(), (tmp_path / "predictions" / name).read_bytes()
                assert mine == theirs, f"minbert.tools.ensemble.main ({method}, {weights}): {name} of a one-run ensemble differs from the run's own file"
        assert "ensemble" in (out / "members.md").read_text()


def tiny_run_inputs(root):
    """The CS224N-format files and the tiny model (with MiniLM's vocabulary) of test_train_multitask."""
    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    from minbert.bert.tokenizer import Tokenizer
    from test_train_multitask import write_task_files
    data, model = root / "data", root / "model"
    data.mkdir()
    write_task_files(data)
    torch.manual_seed(0)
    BertModel(BertConfig.tiny()).save_pretrained(model, tokenizer=Tokenizer.from_pretrained("minilm-l6"))
    return data, model


def test_greedy_selection_reuses_a_member_when_counting_it_twice_is_best():
    """Caruana et al. 2004, with replacement. SST and Quora are identical for every member, so only
    STS decides. A = g + e1, B = g + sqrt(2)·e2 with g, e1, e2 orthogonal, mean-zero and |g| = |e_i|;
    D = -g. By hand, the weighted average w_A·A + w_B·B has Pearson r = 1 / sqrt(1 + s²) with
    s² = (w_A² + 2·w_B²) / (w_A + w_B)²: A alone 1, A+B 0.75, 2A+B 2/3 (the optimum, inverse-variance
    weights 2:1), A+2B 1, 3A+B 0.6875, 2A+2B 0.75. Greedy: A; then B; then A AGAIN; then nothing
    improves -> counts [2, 1, 0]. Without replacement it would stop at [1, 1, 0]."""
    g = torch.Generator().manual_seed(1)
    basis, _ = torch.linalg.qr(torch.cat([torch.ones(N, 1), torch.randn(N, 3, generator=g, dtype=torch.float64)], 1))
    gold, e1, e2 = basis[:, 1], basis[:, 2], basis[:, 3]
    sst_gold, para_gold = torch.arange(N) % 5, torch.arange(N) % 2
    same = {"sst": {"outputs": torch.nn.functional.one_hot(sst_gold, 5).float(), "labels": sst_gold},
            "para": {"outputs": torch.where(para_gold == 1, 2.0, -2.0), "labels": para_gold.float()}}
    members = [{**same, "sts": {"outputs": sts, "labels": gold}} for sts in (gold + e1, gold + 2 ** 0.5 * e2, -gold)]
    for w, s2 in (((1, 0, 0), 1.0), ((1, 1, 0), 0.75), ((2, 1, 0), 2 / 3)):
        r = ensemble.dev_scores(members, list(w), "average")["sts_pearson"]
        assert abs(r - (1 + s2) ** -0.5) < 1e-9, \
            f"constructed case: weights {w} should give Pearson {(1 + s2) ** -0.5:.6f}, got {r:.6f}"
    counts = greedy_select(members, "average")
    assert counts == [2, 1, 0], (
        f"minbert.tools.ensemble.greedy_select: expected [2, 1, 0] (A twice, B once, D never), got {counts}; selection is "
        "WITH replacement (Caruana et al. 2004): a member already chosen stays a candidate in every round")


def test_ensemble_of_runs_on_the_quora_stand_in_names_its_file_so(tmp_path):
    """train_multitask.py names the Quora test predictions of the shipped dev sample (read without labels) as a
    stand-in; an ensemble of such runs must not write them under the handout's submission name."""
    from test_train_multitask import run
    data, model = tiny_run_inputs(tmp_path)
    run((data, model), tmp_path, "--epochs", "1", "--limit", "12", "--para_test", str(data / "quora-dev.csv"))
    out = tmp_path / "ens"
    ensemble.main([str(tmp_path / "run"), "--out_dir", str(out)])
    written = {p.name for p in (out / "predictions").iterdir()}
    assert STAND_IN_PARA_TEST in written and "para-test-output.csv" not in written, \
        f"minbert.tools.ensemble: Quora test predictions of the dev sample must be named {STAND_IN_PARA_TEST}, got {sorted(written)}"


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
    import numpy as np
    import scipy.stats
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
    boot = ensemble.bootstrap_overall(members, [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]], resamples=4000)
    observed = overall(*data, None) - overall(*data, 0)
    got = bootstrap_difference(observed, (boot[:, 0] - boot[:, 1]).tolist())
    width = want.high - want.low
    assert abs(got["low"] - want.low) < 0.15 * width and abs(got["high"] - want.high) < 0.15 * width, \
        f"minbert.tools.ensemble.bootstrap_overall: interval [{got['low']:.4f}, {got['high']:.4f}], scipy.stats.bootstrap " \
        f"[{want.low:.4f}, {want.high:.4f}]"
    full = ensemble.bootstrap_overall(members, [[1.0, 1.0, 1.0]], resamples=1)   # shape (R, W)
    assert tuple(full.shape) == (1, 1), f"minbert.tools.ensemble.bootstrap_overall: expected (R, W) = (1, 1), got {tuple(full.shape)}"


def test_bootstrap_is_paired_so_a_member_against_itself_differs_by_exactly_zero():
    """The same resample for every weighting: member 2 alone, listed twice, differs from itself by 0 on every resample
    (an unpaired bootstrap would give a spread around 0)."""
    boot = ensemble.bootstrap_overall(bootstrap_members(), [[0.0, 1.0, 0.0], [0.0, 2.0, 0.0]], resamples=200)
    assert torch.equal(boot[:, 0], boot[:, 1]), "minbert.tools.ensemble.bootstrap_overall: resamples are not shared (paired)"
    assert boot[:, 0].std() > 0, "minbert.tools.ensemble.bootstrap_overall: every resample gave the same score (no resampling?)"


def test_ensemble_never_replaces_prediction_files_without_overwrite(tmp_path):
    """`ensemble RUN --out_dir FOLDER` wrote FOLDER/predictions/*.csv over whatever was there: a run's own files
    (here the tiny run's, which sit in tmp_path/predictions) were silently replaced."""
    import hashlib
    from minbert.core.errors import UserError
    from test_train_multitask import run
    data, model = tiny_run_inputs(tmp_path)
    run((data, model), tmp_path, "--epochs", "1", "--limit", "12")
    digest = lambda: {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "predictions").iterdir()}
    before = digest()
    with pytest.raises(UserError, match="already exists.*--overwrite"):
        ensemble.main([str(tmp_path / "run"), "--weights", "uniform", "--out_dir", str(tmp_path)])
    assert digest() == before, "minbert.tools.ensemble.main: a refused ensemble changed the prediction files there"
    ensemble.main([str(tmp_path / "run"), "--weights", "uniform", "--out_dir", str(tmp_path), "--overwrite"])
    assert (tmp_path / "members.md").is_file(), "minbert.tools.ensemble.main --overwrite must write the ensemble"
