"""Grades minbert/methods/ensemble.py (Song, Hu & Pan §3.1; greedy selection with replacement, Caruana 2004).

Oracles: (c) constructed outputs whose best subset is known by design (three complementary
members beat every other choice; two harmful members never help); hand-computed weighted
averages and votes, including the documented ties. The command around the method (an ensemble of ONE real run of
train_multitask.py reproduces that run's six prediction files byte for byte) is graded by
tests/tools/test_ensemble.py; this file's name differs from it because pytest refuses two test files of one name.
"""

import math

import torch

from minbert.methods import ensemble
from minbert.methods.ensemble import combine, greedy_select, weighted_average, weighted_vote

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
    assert counts == [1, 1, 1, 0, 0], f"minbert.methods.ensemble.greedy_select: expected A, B, C once each and D, E never, got counts {counts}"
    best = ensemble.dev_scores(members, [1, 1, 1, 0, 0], "average")
    assert best["sst_acc"] == 1.0 and best["para_acc"] == 1.0, f"constructed case: A+B+C should be perfect, got {best}"
    # the order of the command line decides ties only: shuffling the members keeps the subset
    order = [4, 2, 3, 0, 1]
    counts = greedy_select([members[i] for i in order], "average")
    assert counts == [0, 1, 0, 1, 1], f"minbert.methods.ensemble.greedy_select: members reordered {order}: expected C, A, B, got {counts}"


def test_ranked_overall_selection_is_one_pass_without_replacement():
    """--weights ranked_overall: members in order of their own dev overall, each kept once if it helps."""
    members = constructed_members()
    assert ensemble.ranked_overall_select(members, "average") == [1, 1, 1, 0, 0], \
        "minbert.methods.ensemble.ranked_overall_select: expected A, B, C kept (in rank order) and D, E rejected"
    # a strong member listed twice: with replacement greedy may reuse it, ranked never does
    counts = ensemble.ranked_overall_select([members[0], members[3]], "average")
    assert counts == [1, 0], f"minbert.methods.ensemble.ranked_overall_select: expected [1, 0], got {counts}"
    # per task: A + B are already perfect on SST and Quora (each is right where the other is weakly wrong),
    # so C cannot strictly improve them; on STS each member's orthogonal noise averages down, so C joins
    per_task = ensemble.ranked_select(members, "average")
    expected = {"sst": [1, 1, 0, 0, 0], "para": [1, 1, 0, 0, 0], "sts": [1, 1, 1, 0, 0]}
    assert per_task == expected, f"minbert.methods.ensemble.ranked_select: per task, expected {expected}, got {per_task}"


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
    assert got == expected, (f"minbert.methods.ensemble.ranked_select: Algorithm 1 ranked per task (§3.1 'ranking the models by "
                             f"their accuracy for each task'): expected {expected}, got {got}")
    assert ensemble.ranked_overall_select(members, "average") == [1, 1], "ranked_overall (the other reading): expected [1, 1]"


def test_ranked_uses_algorithm_1_prior_weights():
    """Para (gold 1, 1, 0, 0): A = .9 .9 .7 .2 (acc .75), B = .3 .6 .1 .1 (acc .75); the tie keeps A first.
    Priors 1, 1: (A + B)/2 = .6 .75 .4 .15 -> acc 1 > .75: B joins, weights [1, 1].
    Priors 1, 3: (A + 3B)/4 = .45 .675 .25 .125 -> acc .75, not > .75: B rejected, weights [1, 0]."""
    members = two_members([.9, .9, .7, .2], [.3, .6, .1, .1], [0, 1, 2, 3], [0, 1, 2, 3], [1, 1, 0, 0], [0, 1, 2, 3])
    assert ensemble.ranked_select(members, "average", [1.0, 1.0])["para"] == [1.0, 1.0], \
        "minbert.methods.ensemble.ranked_select: priors 1, 1: B improves para accuracy to 1 and must join"
    assert ensemble.ranked_select(members, "average", [1.0, 3.0])["para"] == [1.0, 0.0], \
        "minbert.methods.ensemble.ranked_select: priors 1, 3 (Algorithm 1's ŵ_i): A + 3B scores .75 and B must be rejected"
    assert ensemble.ranked_select(members, "average", [2.0, 1.0])["para"] == [2.0, 1.0], \
        "minbert.methods.ensemble.ranked_select: a kept member's weight is its prior ŵ_i"


def test_greedy_ties_go_to_the_member_listed_first():
    members = constructed_members()
    twins = [members[3], members[0], members[0]]          # D, then two identical copies of A
    assert greedy_select(twins, "average") == [0, 1, 0], \
        "minbert.methods.ensemble.greedy_select: two equally good members: the first listed must be taken"


def test_weighted_average_matches_hand_computation():
    # two members, weights 3 and 1: (3·0.2 + 1·0.6) / 4 = 0.3 and (3·0.9 + 0.1) / 4 = 0.7
    f = weighted_average([torch.tensor([0.2, 0.9], dtype=torch.float64), torch.tensor([0.6, 0.1], dtype=torch.float64)], [3.0, 1.0])
    torch.testing.assert_close(f, torch.tensor([0.3, 0.7], dtype=torch.float64), atol=1e-12, rtol=0,
                               msg="minbert.methods.ensemble.weighted_average: expected Σ w f / Σ w = [0.3, 0.7]")
    # para from logits: sigmoid(0) = 0.5 and sigmoid(ln 3) = 0.75 -> (0.5 + 0.75) / 2 = 0.625 > 0.5 -> 1;
    # sigmoid(-ln 3) = 0.25 and sigmoid(ln 3) = 0.75 average exactly 0.5 -> 0 (only > 0.5 predicts 1)
    members = [{"outputs": torch.tensor([0.0, -math.log(3)])}, {"outputs": torch.tensor([math.log(3), math.log(3)])}]
    assert combine("para", members, [1.0, 1.0], "average") == [1, 0], "minbert.methods.ensemble.combine(para, average): expected [1, 0]"
    # sts: plain weighted mean of scores, whatever the method
    sts = [{"outputs": torch.tensor([1.0, 4.0])}, {"outputs": torch.tensor([3.0, 0.0])}]
    for method in ("average", "vote"):
        assert combine("sts", sts, [1.0, 3.0], method) == [2.5, 1.0], f"minbert.methods.ensemble.combine(sts, {method}): expected [2.5, 1.0]"


def test_weighted_vote_matches_hand_computation_and_breaks_ties_to_the_smallest_class():
    # example 0: class 0 has weight 0.5, class 1 has 0.3 + 0.3 = 0.6 -> 1
    # example 1: classes 3 and 1 both have weight 1 (third member weight 0) -> tie -> 1
    got = weighted_vote([[0, 3], [1, 1], [1, 4]], [0.5, 0.3, 0.3], 5)
    assert got[0] == 1, f"minbert.methods.ensemble.weighted_vote: 0.3 + 0.3 > 0.5 must win, got {got[0]}"
    got = weighted_vote([[3], [1], [4]], [1.0, 1.0, 0.0], 5)
    assert got == [1], f"minbert.methods.ensemble.weighted_vote: tie between classes 3 and 1 must go to 1, got {got}"
    # sst through combine: the vote counts predicted classes, not probabilities
    logits = [torch.tensor([[5.0, 0, 0, 0, 0]]), torch.tensor([[0, 0.1, 0, 0, 0]]), torch.tensor([[0, 0.1, 0, 0, 0]])]
    members = [{"outputs": x} for x in logits]
    assert combine("sst", members, [1, 1, 1], "vote") == [1], "minbert.methods.ensemble.combine(sst, vote): two weak votes beat one confident"
    assert combine("sst", members, [1, 1, 1], "average") == [0], "minbert.methods.ensemble.combine(sst, average): the confident member dominates"


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
        f"minbert.methods.ensemble.greedy_select: expected [2, 1, 0] (A twice, B once, D never), got {counts}; selection is "
        "WITH replacement (Caruana et al. 2004): a member already chosen stays a candidate in every round")
