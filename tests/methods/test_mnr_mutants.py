"""Tests for minbert/methods/mnr.py written for mutation-testing survivors: defaults, flags, error messages,
the positives-only batches and the objective's switches. Fast unit tests only (no training run), so
bench/mutation.py can run them per mutant; the loss itself is graded in tests/methods/test_mnr.py.

Oracles: hand computation (sentence-transformers' MultipleNegativesRankingLoss: cross-entropy of 20·cos),
the documented rules, and TaskData.batches, which PositivePairs.batches is documented to follow.
Run: python -m pytest -q tests/methods/test_mnr_mutants.py   (offline, CPU, about a second)
"""

import argparse

import pytest
import torch
import torch.nn.functional as F

from minbert.bert.tokenizer import Tokenizer
from minbert.core.errors import UserError
from minbert.methods import mnr
from minbert.methods.mnr import MNRObjective, PositivePairs, mnr_loss, mnr_scores
from minbert.tasks.data import Example
from minbert.tasks.sampling import TaskData
from conftest import flags_parser, refusal

WORDS = ["good", "bad", "film", "plot", "dull", "fun", "great", "awful", "long", "short", "actors", "story"]


def pair_data(n, label=lambda i: 4.5, pair_mode="separate", same_length=False):
    """n STS-style pairs of varied lengths (many ties; with same_length, all two one-token words), labels label(i)."""
    tok = Tokenizer.from_pretrained("minilm-l6")
    if same_length:
        examples = [Example(f"e{i}", f"{WORDS[i % 12]} {WORDS[(i + 1) % 12]}", f"{WORDS[(i + 2) % 12]} {WORDS[(i + 3) % 12]}",
                            label(i)) for i in range(n)]
    else:
        examples = [Example(f"e{i}", " ".join(WORDS[(i * k) % 12] for k in range(1, 2 + i % 7)),
                            " ".join(WORDS[(i + k) % 12] for k in range(1 + i % 3)), label(i)) for i in range(n)]
    return TaskData(examples, tok, 32, pair_mode=pair_mode)


def embeds(B, C=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, C, generator=g), torch.randn(B, C, generator=g)


def sts_batch(labels):
    """A bi-encoder STS batch: distinct one-token texts per row, given similarity labels."""
    B = len(labels)
    ids_a = torch.arange(B).unsqueeze(1) + 10          # (B, 1)
    return {"labels": torch.tensor(labels), "input_ids": ids_a, "attention_mask": torch.ones(B, 1),
            "input_ids_b": ids_a + 100, "attention_mask_b": torch.ones(B, 1)}


# ---------------------------------------------------------------------------- defaults of the loss and the objective
def test_default_scale_is_twenty_times_the_cosine():
    """Oracle: sentence-transformers' default scale 20 (temperature 0.05): S = 20·F.cosine_similarity, pairwise."""
    a, p = embeds(5)
    expected = 20.0 * F.cosine_similarity(a.unsqueeze(1), p.unsqueeze(0), dim=-1)     # (B, B)
    torch.testing.assert_close(mnr_scores(a, p), expected, rtol=1e-6, atol=1e-6,
                               msg="minbert.methods.mnr.mnr_scores: the default scale is 20")


def test_objective_defaults_weight_one_and_scale_given_is_used():
    """Oracle: hand computation. MNRObjective() adds 1·MNR (20·cos); scale=5 replaces the default 20."""
    u, v = embeds(3)
    task = torch.tensor(2.0)
    batch = sts_batch([4.5, 5.0, 4.0])
    torch.testing.assert_close(MNRObjective().loss("sts", u, v, batch, task), task + mnr_loss(u, v, 20.0), rtol=0, atol=1e-6,
                               msg="minbert.methods.mnr.MNRObjective(): expected task loss + 1.0·MNR at scale 20")
    obj = MNRObjective(scale=5.0)
    assert obj.scale == 5.0, f"minbert.methods.mnr.MNRObjective(scale=5): scale {obj.scale}"
    torch.testing.assert_close(obj.loss("sts", u, v, batch, task), task + mnr_loss(u, v, 5.0), rtol=0, atol=1e-6)


def test_first_half_with_one_epoch_never_uses_mnr():
    """Oracle: the documented rule e ≤ E // 2 with the default E = 1: 1 ≤ 0 is false, so epoch 1 is a task-loss epoch."""
    obj = MNRObjective(schedule="first_half")
    obj.set_epoch(1)
    assert obj.mnr_epoch is False, "minbert.methods.mnr.MNRObjective(first_half) with num_epochs=1 (default): no MNR epoch"


def test_first_half_without_positives_gives_a_zero_even_for_a_zero_task_loss():
    """Oracle: the documented 0·task_loss (a zero that keeps the graph): a task loss of exactly 0 must give 0, not NaN."""
    u, v = embeds(3)
    task = torch.tensor(0.0, requires_grad=True)
    out = MNRObjective(schedule="first_half", num_epochs=2).loss("sts", u, v, sts_batch([4.5, 1.0, 2.0]), task)
    assert out.item() == 0.0 and out.requires_grad, f"minbert.methods.mnr.MNRObjective.loss: expected a zero with a graph, got {out}"


@pytest.mark.parametrize("kwargs, bad", [({"score": "euclid"}, "'euclid', 'add', 'mixed'"),
                                         ({"schedule": "last_half"}, "'cosine', 'last_half', 'mixed'"),
                                         ({"batches": "all"}, "'cosine', 'add', 'all'")])
def test_each_bad_choice_alone_is_rejected_with_the_choices(kwargs, bad):
    """Oracle: the documented choices (SCORES, SCHEDULES, BATCHES): any one bad value raises, naming all three."""
    with pytest.raises(ValueError, match=r"^MNRObjective: score must be one of \('cosine', 'dot'\), schedule one of "
                                         r"\('add', 'first_half'\) and batches one of \('positives', 'mixed'\), got " + bad + "$"):
        MNRObjective(**kwargs)


def test_mnr_batch_of_a_task_without_a_stream_is_the_batch_itself():
    """Oracle: the documented rule ('or `batch` itself (mixed)')."""
    batch = sts_batch([4.5, 5.0])
    assert MNRObjective(batches="mixed").mnr_batch("sts", batch) is batch


def test_error_messages_say_what_to_pass():
    """Oracle: the documented errors, word for word."""
    a, p = embeds(2)
    with pytest.raises(ValueError, match=r"^mnr_scores: pass both texts_a and texts_p, or neither$"):
        mnr_scores(a, p, texts_a=["x", "y"])
    obj = MNRObjective(batches="positives")
    obj.streams["sts"] = object()
    with pytest.raises(ValueError, match=r"^MNRObjective\.loss: positives-only batches need features=$"):
        obj.loss("sts", a, p, sts_batch([4.5, 5.0]), torch.tensor(1.0))


# ---------------------------------------------------------------------------- positives-only batches
def test_positive_pairs_need_labels_and_separate_encoding():
    """Oracle: the documented precondition: labeled pairs, encoded separately (bi-encoder); either missing raises."""
    message = r"^PositivePairs: needs labeled pair data encoded separately \(a bi-encoder head\)$"
    with pytest.raises(ValueError, match=message):
        PositivePairs(pair_data(4, pair_mode="cross"), "sts")                    # labeled, but cross-encoded
    with pytest.raises(ValueError, match=message):
        PositivePairs(pair_data(4, label=lambda i: None), "sts")                # separate, but unlabeled


@pytest.mark.parametrize("n, batch_size, same_length", [(230, 2, False), (9, 4, False), (9, 4, True)])
def test_positives_batches_follow_taskdata_batches_when_every_pair_is_positive(n, batch_size, same_length):
    """Oracle: PositivePairs.batches is documented to batch 'as TaskData.batches' (a permutation cut into chunks of
    50 batches, each sorted by length, in shuffled order). With every pair positive the two see the same rows, so
    with the same generator seed they must give the same batches; 230 rows at batch size 2 span three chunks.
    Without shuffle (one chunk here at n = 9): the rows in length order, ties in file order, as TaskData's eval
    order (with every length equal, that is the file order itself)."""
    data = pair_data(n, same_length=same_length)
    assert not same_length or len(set(data.lengths)) == 1, "test setup: the pairs should all have one length"
    positives = PositivePairs(data, "sts")
    for seed in (0, 1):
        got = [b["ids"] for b in positives.batches(batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))]
        want = [b["ids"] for b in data.batches(batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))]
        assert got == want, f"minbert.methods.mnr.PositivePairs.batches(shuffle=True, seed {seed}): not TaskData.batches' batches"
    if n <= 50 * batch_size:
        got = [b["ids"] for b in positives.batches(batch_size, shuffle=False)]
        want = [b["ids"] for b in data.batches(batch_size, shuffle=False)]
        assert got == want, f"minbert.methods.mnr.PositivePairs.batches(shuffle=False): expected length order {want}, got {got}"


# ---------------------------------------------------------------------------- attach: one stream per bi-encoder pair task
def test_attach_makes_a_stream_per_separate_pair_task_with_its_own_seed():
    """Oracle: the documented rule: positives-only streams for para/sts encoded separately only (a cross-encoded para
    gets none, sst never); each stream's seed differs from the run's seed and from the other stream's."""
    made = []
    obj = MNRObjective(batches="positives")
    train = {"para": pair_data(6, label=lambda i: i % 2, pair_mode="cross"), "sts": pair_data(6), "sst": pair_data(3)}
    obj.attach(train, lambda data, seed: made.append((data.task, seed)) or data, seed=11)
    assert [task for task, _ in made] == ["sts"], f"minbert.methods.mnr.MNRObjective.attach: streams for {made}"
    made.clear()
    obj = MNRObjective(batches="positives")
    obj.attach({"para": pair_data(6, label=lambda i: i % 2), "sts": pair_data(6)}, lambda d, s: made.append((d.task, s)) or d, seed=11)
    seeds = [s for _, s in made]
    assert [t for t, _ in made] == ["para", "sts"] and 11 not in seeds and len(set(seeds)) == 2, \
        f"minbert.methods.mnr.MNRObjective.attach: each stream needs its own seed, not the run's (11): {made}"
    assert MNRObjective(batches="mixed").attach(train, lambda d, s: 1 / 0, seed=0) is None   # mixed: no streams


@pytest.mark.parametrize("positives, ok", [(2, True), (1, False), (0, False)])
def test_attach_needs_two_positive_pairs(positives, ok):
    """Oracle: MNR needs at least 2 positives (one right answer and one negative per row); 2 is enough."""
    data = pair_data(5, label=lambda i: 4.5 if i < positives else 1.0)
    obj = MNRObjective(batches="positives")
    if ok:
        obj.attach({"sts": data}, lambda d, s: d, seed=0)
        return
    with pytest.raises(UserError, match=rf"^--mnr: the sts training set has {positives} positive pairs; MNR needs at least 2 "
                                        r"\(or use --mnr_batches mixed\)$"):
        obj.attach({"sts": data}, lambda d, s: d, seed=0)


# ---------------------------------------------------------------------------- flags
def mnr_parser():
    from minbert.tasks import multitask
    return flags_parser(multitask, mnr)


def test_flags_defaults_types_and_choices():
    """Oracle: the flags' contract: off (0), cosine scores, the scale chosen by the score (None), the add schedule,
    Benton's positives-only batches; a fractional weight parses, a negative one or an unknown choice does not."""
    args = mnr_parser().parse_args([])
    assert (args.mnr, args.mnr_score, args.mnr_scale, args.mnr_schedule, args.mnr_batches) == (0.0, "cosine", None, "add", "positives"), \
        f"minbert.methods.mnr.add_args defaults: {args}"
    args = mnr_parser().parse_args(["--mnr", "0.5", "--mnr_score", "dot", "--mnr_scale", "2", "--mnr_schedule", "first_half",
                                    "--mnr_batches", "mixed"])
    assert (args.mnr, args.mnr_score, args.mnr_scale, args.mnr_schedule, args.mnr_batches) == (0.5, "dot", 2.0, "first_half", "mixed") \
        and isinstance(args.mnr_scale, float), f"minbert.methods.mnr.add_args: {args}"
    assert mnr_parser().parse_args(["--mnr", "0"]).mnr == 0.0
    for bad in (["--mnr", "-1"], ["--mnr_score", "euclid"], ["--mnr_scale", "0"], ["--mnr_schedule", "last_half"],
                ["--mnr_batches", "all"]):
        with pytest.raises(SystemExit):
            mnr_parser().parse_args(bad)


@pytest.mark.parametrize("argv, ok", [
    ([], True), (["--mnr", "1", "--para_head", "cosine"], True), (["--mnr", "1", "--sts_head", "dot"], True),
    (["--mnr", "1"], False),                                               # cross, cross
    (["--mnr", "1", "--sts_head", "cross_tanh"], False),                   # cross, cross_tanh: still no bi-encoder
])
def test_check_args_needs_a_bi_encoder_pair_head(argv, ok, capsys):
    """Oracle: the rule (MNR compares separately embedded sentences, so at least one pair head must be a bi-encoder)."""
    said = refusal(mnr, mnr_parser(), argv, capsys)
    error = ": error: --mnr needs a bi-encoder pair head: --para_head or --sts_head cosine|dot|concat|siamese\n"
    assert (said is None if ok else error in (said or "")), f"minbert.methods.mnr.check_args({argv}): got {said!r}"


def test_from_args_passes_every_flag():
    """Oracle: the flag -> constructor map by hand; --mnr 0 builds nothing."""
    args = argparse.Namespace(mnr=0.0, mnr_score="dot", mnr_scale=3.0, mnr_schedule="first_half", epochs=6, mnr_batches="mixed", seed=1)
    assert mnr.from_args(args, {}, None) is None
    args.mnr = 0.25
    obj = mnr.from_args(args, {}, None)
    got = (obj.weight, obj.score, obj.scale, obj.schedule, obj.num_epochs, obj.batches)
    assert got == (0.25, "dot", 3.0, "first_half", 6, "mixed"), f"minbert.methods.mnr.from_args: {got}"
