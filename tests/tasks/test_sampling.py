"""Tests for minbert.tasks.sampling: task sampling schedules (Stickland & Murray 2019, §4), and TaskData's batches
(tokenized once, length-aware, dynamically padded)."""

import math
from argparse import Namespace

import numpy as np
import pytest
import torch

from minbert.methods.gradient_compromise import GradientCompromise
from minbert.tasks.data import Example
from minbert.tasks.sampling import (SCHEDULES, TaskData, TaskSampler, anneal_alpha, step_tasks, steps_per_epoch,
                                     task_probs)

from conftest import WordTokenizer, make_examples

SIZES_SAMPLE = [8544, 16000, 6040]  # SST train, the shared 16k Quora sample, STS train
SIZES_FULL = [8544, 141506, 6040]  # SST train, full Quora train, STS train


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("sizes", [SIZES_SAMPLE, SIZES_FULL, [1, 1], [5]])
def test_task_probs_sum_to_one(schedule, sizes):
    """Oracle: property. Every schedule gives a probability vector (K,) with entries > 0 summing to 1."""
    for epoch in (1, 4, 7):
        p = task_probs(sizes, schedule, epoch, num_epochs=7)
        assert p.shape == (len(sizes),), f"minbert.tasks.sampling.task_probs: expected shape (K,) = ({len(sizes)},), got {p.shape}"
        assert (p > 0).all(), f"minbert.tasks.sampling.task_probs: non-positive probability in {p}"
        np.testing.assert_allclose(p.sum(), 1.0, rtol=0, atol=1e-12)


def test_anneal_alpha_goes_from_one_to_point_two_monotonically():
    """Oracle: property of α = 1 − 0.8·(e − 1)/(E − 1): α(1) = 1, α(E) = 0.2, strictly decreasing."""
    num_epochs = 10
    alphas = [anneal_alpha(e, num_epochs) for e in range(1, num_epochs + 1)]
    assert alphas[0] == pytest.approx(1.0, abs=1e-12), "minbert.tasks.sampling.anneal_alpha: α(1) must be 1"
    assert alphas[-1] == pytest.approx(0.2, abs=1e-12), "minbert.tasks.sampling.anneal_alpha: α(E) must be 0.2"
    assert all(a > b for a, b in zip(alphas, alphas[1:])), f"minbert.tasks.sampling.anneal_alpha: not decreasing: {alphas}"
    assert anneal_alpha(5, 10) == pytest.approx(1 - 0.8 * 4 / 9, abs=1e-12), "epoch is 1-indexed: α(5 of 10) = 0.644"


def test_anneal_alpha_is_one_for_a_single_epoch():
    """Oracle: definition. With E = 1 the formula divides by zero; α = 1 (proportional)."""
    assert anneal_alpha(1, 1) == 1.0
    np.testing.assert_allclose(task_probs(SIZES_SAMPLE, "annealed", 1, 1),
                               task_probs(SIZES_SAMPLE, "proportional"), rtol=0, atol=1e-12)


def test_anneal_alpha_rejects_epochs_outside_range():
    """Oracle: property. Epochs are 1-indexed and at most num_epochs (α must not drop below 0.2)."""
    with pytest.raises(ValueError, match="1-indexed"):
        anneal_alpha(0, 10)
    with pytest.raises(ValueError, match="1-indexed"):
        anneal_alpha(11, 10)


@pytest.mark.parametrize("sizes, epoch, expected", [
    (SIZES_SAMPLE, 1, (0.2794, 0.5231, 0.1975)),
    (SIZES_SAMPLE, 10, (0.3261, 0.3697, 0.3042)),
    (SIZES_FULL, 1, (0.0547, 0.9066, 0.0387)),
    (SIZES_FULL, 5, (0.1265, 0.7723, 0.1012)),  # α = 1 − 0.8·4/9 = 0.644
    (SIZES_FULL, 10, (0.2713, 0.4756, 0.2531)),
])
def test_annealed_probs_match_reference_values(sizes, epoch, expected):
    """Oracle: stored reference values (computed with the Bert-n-Pals formula, Stickland & Murray 2019 §4), E = 10."""
    p = task_probs(sizes, "annealed", epoch, num_epochs=10)
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-3,
                               err_msg=f"minbert.tasks.sampling.task_probs(annealed, e={epoch}, E=10) for N={sizes}")


def test_proportional_and_sqrt_probs():
    """Oracle: closed form. proportional p_i = N_i / ΣN; sqrt p_i = √N_i / Σ√N."""
    n = np.array(SIZES_FULL, dtype=np.float64)
    np.testing.assert_allclose(task_probs(SIZES_FULL, "proportional"), n / n.sum(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(task_probs(SIZES_FULL, "sqrt"), np.sqrt(n) / np.sqrt(n).sum(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(task_probs(SIZES_FULL, "round_robin"), [1 / 3] * 3, rtol=0, atol=1e-12)


def test_task_probs_rejects_bad_input():
    """Oracle: property. Unknown schedules and non-positive sizes are errors that name the problem."""
    with pytest.raises(ValueError, match="unknown schedule"):
        task_probs(SIZES_SAMPLE, "temperature")
    with pytest.raises(ValueError, match="positive"):
        task_probs([10, 0, 5], "sqrt")
    with pytest.raises(ValueError, match="unknown schedule"):
        TaskSampler(SIZES_SAMPLE, "rr", num_epochs=3, seed=0)


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_empirical_frequencies_match_probs_within_3_sigma(schedule):
    """Oracle: property. Over 10^5 draws each task's count is within 3σ = 3·√(n·p·(1−p)) of n·p.
    (round_robin is reported as uniform and hits n/K up to one draw.)"""
    n, num_epochs = 100_000, 10
    for epoch in (1, num_epochs):
        sampler = TaskSampler(SIZES_FULL, schedule, num_epochs=num_epochs, seed=1234)
        sampler.set_epoch(epoch)
        counts = np.bincount([sampler.next() for _ in range(n)], minlength=3)
        p = task_probs(SIZES_FULL, schedule, epoch, num_epochs)
        sigma = np.sqrt(n * p * (1 - p))
        assert (np.abs(counts - n * p) <= 3 * sigma).all(), (
            f"minbert.tasks.sampling.TaskSampler.next ({schedule}, epoch {epoch}): counts {counts.tolist()}, "
            f"expected {(n * p).round(1).tolist()} ± {(3 * sigma).round(1).tolist()}")


def test_round_robin_cycles_tasks_in_order():
    """Oracle: definition. round_robin gives 0, 1, 2, 0, 1, 2, ... (the reference's stuck-at-0 bug avoided)."""
    sampler = TaskSampler(SIZES_FULL, "round_robin", num_epochs=3, seed=0)
    draws = [sampler.next() for _ in range(300)]
    assert draws[:7] == [0, 1, 2, 0, 1, 2, 0], f"minbert.tasks.sampling.TaskSampler.next: got {draws[:7]}"
    assert np.bincount(draws).tolist() == [100, 100, 100]
    sampler.set_epoch(2)  # a new epoch does not restart or stop the cycle
    assert [sampler.next() for _ in range(4)] == [0, 1, 2, 0]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_seeded_sampler_is_reproducible(schedule):
    """Oracle: determinism under a fixed seed, unaffected by the global numpy/torch RNGs."""
    first = TaskSampler(SIZES_SAMPLE, schedule, num_epochs=3, seed=7)
    a = [first.next() for _ in range(500)]
    np.random.seed(0), torch.manual_seed(0), np.random.rand(10)  # global RNG use must not matter
    second = TaskSampler(SIZES_SAMPLE, schedule, num_epochs=3, seed=7)
    b = [second.next() for _ in range(500)]
    assert a == b, "minbert.tasks.sampling.TaskSampler: the same seed gave different task sequences"
    if schedule != "round_robin":
        other = TaskSampler(SIZES_SAMPLE, schedule, num_epochs=3, seed=8)
        assert [other.next() for _ in range(500)] != a, "a different seed should give a different sequence"


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_state_dict_round_trip_continues_the_same_sequence(schedule, tmp_path):
    """Oracle: determinism. Save mid-run (through torch.save/torch.load, as a checkpoint would), load
    into a sampler built with another seed, and the next draws equal those of the uninterrupted run."""
    sampler = TaskSampler(SIZES_SAMPLE, schedule, num_epochs=4, seed=3)
    sampler.set_epoch(2)
    [sampler.next() for _ in range(101)]
    torch.save({"sampler": sampler.state_dict()}, tmp_path / "ckpt.pt")
    expected = [sampler.next() for _ in range(300)]
    sampler.set_epoch(3)
    expected += [sampler.next() for _ in range(300)]

    resumed = TaskSampler(SIZES_SAMPLE, schedule, num_epochs=4, seed=999)
    resumed.load_state_dict(torch.load(tmp_path / "ckpt.pt")["sampler"])  # weights_only=True default
    assert resumed.epoch == 2
    got = [resumed.next() for _ in range(300)]
    resumed.set_epoch(3)
    got += [resumed.next() for _ in range(300)]
    assert got == expected, "minbert.tasks.sampling.TaskSampler.load_state_dict: resumed sequence differs"


def test_load_state_dict_rejects_a_different_task_setup():
    """Oracle: property. Resuming with other task sizes or another schedule is an error, not a silent change."""
    state = TaskSampler(SIZES_SAMPLE, "sqrt", num_epochs=4, seed=0).state_dict()
    with pytest.raises(ValueError, match="sizes, schedule, num_epochs"):
        TaskSampler(SIZES_FULL, "sqrt", num_epochs=4, seed=0).load_state_dict(state)


def test_uniform_schedule_is_random_with_equal_probabilities():
    """Oracle: definition (Pritsky et al. §3.1, a random task scheduler). p = (1/3, 1/3, 1/3) whatever the sizes
    and epoch, and the draws are random, not round robin's fixed cycle."""
    for epoch in (1, 3):
        np.testing.assert_allclose(task_probs(SIZES_FULL, "uniform", epoch, 3), [1 / 3] * 3, rtol=0, atol=1e-15,
                                   err_msg="minbert.tasks.sampling.task_probs('uniform'): expected 1/K per task")
    sampler = TaskSampler(SIZES_FULL, "uniform", num_epochs=3, seed=0)
    draws = [sampler.next() for _ in range(300)]
    assert draws != [0, 1, 2] * 100, "TaskSampler('uniform') must draw at random, not cycle"
    assert any(a == b for a, b in zip(draws, draws[1:])), "uniform draws repeat a task sometimes; a cycle never does"


# ---------------------------------------------------------------------------- Muppet heterogeneous steps
def test_heterogeneous_natural_mix_follows_dataset_sizes_within_sampling_error():
    """Oracle: Muppet §3.4 ("the natural distribution of the datasets"): over n sub-batches, task i's count is
    Binomial(n, N_i / Σ N); every count must lie within 4.5 standard deviations of n·p_i."""
    from minbert.tasks.sampling import heterogeneous_tasks
    sampler = TaskSampler(SIZES_FULL, "proportional", num_epochs=1, seed=0)
    draws = [t for _ in range(20000) for t in heterogeneous_tasks(sampler, 3, "natural")]
    n, p = len(draws), np.asarray(SIZES_FULL) / sum(SIZES_FULL)
    counts = np.bincount(draws, minlength=3)
    sd = np.sqrt(n * p * (1 - p))
    assert (np.abs(counts - n * p) < 4.5 * sd).all(), (
        f"minbert.tasks.sampling.heterogeneous_tasks (natural): counts {counts.tolist()} over {n} sub-batches, expected "
        f"{(n * p).round().tolist()} ± 4.5·{sd.round(1).tolist()} (sizes {SIZES_FULL}, Muppet §3.4)")
    assert heterogeneous_tasks(sampler, 3, "every_task") == [0, 1, 2], "every_task: one sub-batch of each task"


def test_train_multitask_heterogeneous_steps_follow_the_natural_mix(tmp_path, monkeypatch):
    """End to end: Quora 96 examples, SST and STS 12 each; --heterogeneous, 1 epoch = 10 steps x 3 sub-batches.
    Natural mix: Quora ~80% of the 30 sub-batches (24 expected, sd 2.2); the old one-of-each step gave 10/10/10."""
    import shutil
    from test_train_multitask import record_task_losses, run, write_task_files
    from conftest import tiny_run_inputs
    data, model = tiny_run_inputs(tmp_path)
    big = tmp_path / "big"
    big.mkdir()
    write_task_files(big, n=96)
    shutil.copy(big / "quora-train.csv", data / "quora-train.csv")
    write_small = tmp_path / "small"
    write_small.mkdir()
    write_task_files(write_small, n=12)
    for name in ("ids-sst-train.csv", "sts-train.csv"):
        shutil.copy(write_small / name, data / name)
    log = record_task_losses(monkeypatch)
    run((data, model), tmp_path, "--epochs", "1", "--heterogeneous")
    tasks = [t for t, _ in log]
    counts = {t: tasks.count(t) for t in ("sst", "para", "sts")}
    assert len(tasks) == 30, f"train_multitask --heterogeneous: expected 10 steps x 3 sub-batches, got {len(tasks)}"
    assert counts["para"] >= 18, (f"train_multitask --heterogeneous: sub-batches per task {counts}; Muppet §3.4 keeps the "
                                  "natural distribution, so Quora (96 of 120 examples) should supply ~24 of 30")


class Shuffled:
    """Stand-in for minbert.tasks.sampling.TaskData: batches of example indices, a fresh permutation per call."""

    def __init__(self, n):
        self.n = n

    def batches(self, batch_size, shuffle, generator=None):
        order = torch.randperm(self.n, generator=generator)
        return iter([{"index": order[i:i + batch_size]} for i in range(0, self.n, batch_size)])


@pytest.mark.parametrize("cut", [0, 1, 3, 4, 5, 9])
def test_batch_stream_resumed_at_any_step_gives_the_uninterrupted_batches(cut):
    """Oracle: the uninterrupted stream. Stopping after `cut` batches, saving state_dict and loading it
    into a fresh stream must continue with exactly the batches the uninterrupted stream gives next:
    none skipped, none repeated, also across a pass boundary (10 examples, batch 3: 4 batches a pass)."""
    from minbert.tasks.sampling import BatchStream
    full = BatchStream(Shuffled(10), 3, seed=7)
    want = [full.next()["index"].tolist() for _ in range(12)]
    first = BatchStream(Shuffled(10), 3, seed=7)
    got = [first.next()["index"].tolist() for _ in range(cut)]
    resumed = BatchStream(Shuffled(10), 3, seed=7)
    resumed.load_state_dict(first.state_dict())
    got += [resumed.next()["index"].tolist() for _ in range(12 - cut)]
    assert got == want, (f"minbert.tasks.sampling.BatchStream resumed after {cut} batches: got {got[cut:cut + 2]} next, "
                         f"the uninterrupted run gives {want[cut:cut + 2]} (a batch skipped or repeated on resume?)")
    seen = sorted(i for b in want[:4] for i in b)
    assert seen == list(range(10)), f"minbert.tasks.sampling.BatchStream: one pass must cover every example once, got {seen}"


def plain_args(**flags) -> Namespace:
    """train_multitask.py's flags that steps_per_epoch reads, at their defaults, plus `flags`."""
    return Namespace(**{"batch_size": 4, "grad_accum": 1, "steps_per_epoch": 0, "grad_compromise": 0,
                        "heterogeneous": False, "surgery": "none", "extra_sst_pass": False, **flags})


@pytest.mark.parametrize("world", [1, 2, 4])
def test_extra_sst_pass_is_one_pass_of_global_batches_under_torchrun(world):
    """--extra_sst_pass ends the epoch with one pass over SST. Under torchrun every step takes a global batch of
    batch_size x world x grad_accum examples (minbert/run/distributed.py, ShardedStream), so with W ranks the pass
    is W times shorter, like the schedule's steps. Hand count: SST 100, Quora 1000, STS 60, batch 4."""
    sizes, sst = [100, 1000, 60], 100
    want_schedule = {1: 290, 2: 145, 4: 73}[world]     # ceil(1160 / (4·W))
    want_sst_pass = {1: 25, 2: 13, 4: 7}[world]        # ceil(100 / (4·W))
    got = steps_per_epoch(plain_args(extra_sst_pass=True), sizes, sst, world_size=world)
    assert got == (want_schedule, want_schedule + want_sst_pass), (
        f"minbert.tasks.sampling.steps_per_epoch(world_size={world}) with --extra_sst_pass: got (schedule, all) = "
        f"{got}, want ({want_schedule}, {want_schedule + want_sst_pass}); one SST pass in global batches of "
        f"{4 * world} is {want_sst_pass} steps, not {math.ceil(sst / 4)} (the extra pass must divide by the world size too)")


@pytest.mark.parametrize("flags, want", [
    ({}, 1),                                                             # one batch of one task
    ({"heterogeneous": True}, 3),                                        # Muppet: K = 3 sub-batches
    ({"heterogeneous": True, "heterogeneous_mix": "every_task"}, 3),
    ({"surgery": "pcgrad"}, 3),                                          # one gradient per task
    ({"grad_compromise": 5}, 5),                                         # N = 5 batches, each task at least once
])
def test_a_step_draws_as_many_batches_as_its_epoch_length_assumes(flags, want):
    """The batches a micro-batch draws (step_tasks) and the count steps_per_epoch divides by are one rule: with
    sizes summing to 120 and batch 4, one pass is 30 batches, so an epoch is ceil(30 / batches per step) steps."""
    args = plain_args(**{"heterogeneous_mix": "natural", **flags})
    tasks = ["sst", "para", "sts"]
    compromise = GradientCompromise(tasks, [40, 40, 40], 5, 1, 1.0, False) if args.grad_compromise else None
    drawn = step_tasks(args, TaskSampler([40, 40, 40], "proportional", 1, seed=0), compromise, 1, tasks)
    assert len(drawn) == want and set(drawn) <= set(tasks), f"step_tasks with {flags}: drew {drawn}, want {want} tasks"
    assert steps_per_epoch(args, [40, 40, 40], 40)[0] == math.ceil(30 / want), \
        f"steps_per_epoch with {flags}: an epoch of 120 examples in batches of 4 is ceil(30 / {want}) steps"


# ----------------------------------------------------------------------------------------------
# TaskData: tokenize once, length-aware batches, dynamic padding


def batch_indices(batches) -> list[list[int]]:
    return [b["index"].tolist() for b in batches]


def test_eval_batches_are_sorted_by_length_and_cover_every_example_once():
    """Oracle: property. shuffle=False: batches in nondecreasing length, each example exactly once."""
    data = TaskData(make_examples(37), WordTokenizer(), max_length=64)
    batches = list(data.batches(batch_size=4, shuffle=False))
    flat = [i for b in batch_indices(batches) for i in b]
    assert sorted(flat) == list(range(37)), "minbert.tasks.sampling.TaskData.batches: each example must appear exactly once"
    lengths = [data.lengths[i] for i in flat]
    assert lengths == sorted(lengths), f"minbert.tasks.sampling.TaskData.batches(shuffle=False): not sorted by length: {lengths}"
    assert [len(b["ids"]) for b in batches] == [4] * 9 + [1]


def test_batches_are_padded_to_the_longest_example_in_the_batch():
    """Oracle: the cached unpadded ids. (B, T) with T = longest in batch, mask 1 on tokens, 0 and id 0 on pads."""
    examples = make_examples(23)
    data = TaskData(examples, WordTokenizer(), max_length=64)
    for batch in data.batches(batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(0)):
        B, T = batch["input_ids"].shape
        expected_T = max(data.lengths[i] for i in batch["index"].tolist())
        assert T == expected_T, f"minbert.tasks.sampling.TaskData: expected (B, T) = ({B}, {expected_T}), got {(B, T)}"
        for row, i in enumerate(batch["index"].tolist()):
            n = data.lengths[i]
            assert batch["input_ids"][row, :n].tolist() == data.input_ids[i]
            assert batch["attention_mask"][row].tolist() == [1] * n + [0] * (T - n)
            assert batch["input_ids"][row, n:].eq(0).all()
            assert batch["ids"][row] == examples[i].id and batch["labels"][row].item() == examples[i].label


def test_train_batches_cover_all_examples_and_are_reproducible_with_a_seed():
    """Oracle: determinism + property. shuffle=True: every example once per call; the same seed gives the
    same batches; a different seed, or the next call on the same generator (next epoch), gives others."""
    data = TaskData(make_examples(500), WordTokenizer(), max_length=64)
    run = lambda g: batch_indices(data.batches(batch_size=2, shuffle=True, generator=g))  # noqa: E731
    first = run(torch.Generator().manual_seed(0))
    assert sorted(i for b in first for i in b) == list(range(500))
    assert run(torch.Generator().manual_seed(0)) == first, "minbert.tasks.sampling.TaskData.batches: same seed, different batches"
    assert run(torch.Generator().manual_seed(1)) != first
    g = torch.Generator().manual_seed(0)
    epoch1, epoch2 = run(g), run(g)
    assert epoch1 == first and epoch2 != first and sorted(i for b in epoch2 for i in b) == list(range(500))


def test_train_batches_come_from_length_sorted_chunks_in_shuffled_order():
    """Oracle: the spec's recipe. With n = 500 and B = 2, the permutation splits into 5 chunks of 50·B = 100.
    Every batch lies inside one chunk, batches of one chunk do not overlap in length, and the batch order
    is shuffled (not going short -> long)."""
    data = TaskData(make_examples(500), WordTokenizer(), max_length=64)
    batches = batch_indices(data.batches(batch_size=2, shuffle=True, generator=torch.Generator().manual_seed(3)))
    perm = torch.randperm(500, generator=torch.Generator().manual_seed(3)).tolist()
    chunk_of = {i: pos // 100 for pos, i in enumerate(perm)}
    by_chunk = {}
    for b in batches:
        assert len({chunk_of[i] for i in b}) == 1, f"minbert.tasks.sampling.TaskData.batches: batch {b} spans two chunks"
        by_chunk.setdefault(chunk_of[b[0]], []).append(sorted(data.lengths[i] for i in b))
    for spans in by_chunk.values():
        spans.sort()
        assert all(x[-1] <= y[0] for x, y in zip(spans, spans[1:])), "batches of a chunk must be cut from its sorted order"
    # unshuffled, batches would come chunk after chunk, each chunk going short -> long
    chunk_sequence = [chunk_of[b[0]] for b in batches]
    assert chunk_sequence != sorted(chunk_sequence), "minbert.tasks.sampling.TaskData.batches: batch order was not shuffled"
    first_chunk = [max(data.lengths[i] for i in b) for b in batches if chunk_of[b[0]] == 0]
    assert first_chunk != sorted(first_chunk), "minbert.tasks.sampling.TaskData.batches: batch order was not shuffled"


def test_examples_are_tokenized_once():
    """Oracle: property. encode runs in __init__ only (once per sentence list), never per batch."""
    tokenizer = WordTokenizer()
    data = TaskData(make_examples(20, pairs=True), tokenizer, max_length=64, pair_mode="separate")
    for _ in range(3):
        list(data.batches(batch_size=4, shuffle=True))
    assert tokenizer.encode_calls == 2, f"expected 2 encode calls (a and b), got {tokenizer.encode_calls}"


def test_cross_pair_mode_builds_one_sequence_with_token_types():
    """Oracle: hand-built [CLS] a [SEP] b [SEP] with token types 0 then 1, from the stand-in tokenizer."""
    examples = [Example("p1", "w1 w2", "w3", 1.5)]
    tokenizer = WordTokenizer()
    batch = next(TaskData(examples, tokenizer, max_length=16).batches(batch_size=1, shuffle=False))
    w = [tokenizer.vocab[t] for t in ("w1", "w2", "w3")]
    assert batch["input_ids"].tolist() == [[101, w[0], w[1], 102, w[2], 102]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1]]
    assert "input_ids_b" not in batch
    assert batch["labels"].dtype == torch.float32, "STS labels (floats) must default to float32"


def test_separate_pair_mode_encodes_both_sentences_on_their_own():
    """Oracle: the stand-in tokenizer run on each sentence alone."""
    examples = make_examples(9, pairs=True)
    data = TaskData(examples, WordTokenizer(), max_length=64, pair_mode="separate", label_dtype=torch.float32)
    for batch in data.batches(batch_size=4, shuffle=False):
        for key in ("input_ids_b", "attention_mask_b", "token_type_ids_b"):
            assert batch[key].shape[0] == len(batch["ids"]), f"minbert.tasks.sampling.TaskData: {key} must be (B, T_b)"
        for row, i in enumerate(batch["index"].tolist()):
            n_b = len(examples[i].text2.split()) + 2
            assert batch["attention_mask_b"][row].sum().item() == n_b
            assert batch["token_type_ids_b"][row].eq(0).all()
        assert batch["labels"].dtype == torch.float32, "label_dtype=torch.float32 (Quora with BCE) was ignored"


def test_label_dtypes_and_unlabeled_splits():
    """Oracle: property. Integer labels -> long by default; unlabeled splits give no "labels" key."""
    labeled = TaskData(make_examples(6), WordTokenizer(), max_length=32)
    assert next(labeled.batches(3, shuffle=False))["labels"].dtype == torch.long
    unlabeled = [Example(e.id, e.text, None, None) for e in make_examples(6)]
    batch = next(TaskData(unlabeled, WordTokenizer(), max_length=32).batches(3, shuffle=False))
    assert "labels" not in batch and len(batch["ids"]) == 3


def test_task_data_rejects_bad_arguments():
    """Oracle: property. Errors name what is wrong."""
    with pytest.raises(ValueError, match="pair_mode"):
        TaskData(make_examples(3, pairs=True), WordTokenizer(), 32, pair_mode="concat")
    with pytest.raises(ValueError, match="mix"):
        TaskData(make_examples(2) + make_examples(2, pairs=True), WordTokenizer(), 32)
    with pytest.raises(ValueError, match="batch_size"):
        TaskData(make_examples(3), WordTokenizer(), 32).batches(0, shuffle=False)


def test_task_data_works_with_the_real_wordpiece_tokenizer(tmp_path):
    """Oracle: ids worked out by hand from a tiny vocab.txt (id = line number), through
    minbert.bert.tokenizer.Tokenizer: [CLS]=2, [SEP]=3, how=5, why=6, ?=7, fly=8, ##ing=9, pad 0."""
    from minbert.bert.tokenizer import Tokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "how", "why", "?", "fly", "##ing"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = Tokenizer(tmp_path / "vocab.txt")
    examples = [Example("q1", "How flying?", "Why?", 1), Example("q2", "Why?", "How?", 0)]

    cross = next(TaskData(examples, tokenizer, max_length=16).batches(batch_size=2, shuffle=False))
    assert cross["ids"] == ["q2", "q1"], "eval batches go short -> long"
    assert cross["input_ids"].tolist() == [[2, 6, 7, 3, 5, 7, 3, 0, 0], [2, 5, 8, 9, 7, 3, 6, 7, 3]]
    assert cross["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 1, 1, 1]]
    assert cross["attention_mask"].sum(dim=1).tolist() == [7, 9]

    separate = TaskData(examples, tokenizer, max_length=16, pair_mode="separate", label_dtype=torch.float32)
    batch = next(separate.batches(batch_size=2, shuffle=False))
    assert batch["input_ids"].tolist() == [[2, 6, 7, 3, 0, 0], [2, 5, 8, 9, 7, 3]]
    assert batch["input_ids_b"].tolist() == [[2, 5, 7, 3], [2, 6, 7, 3]]
    assert batch["labels"].tolist() == [0.0, 1.0] and batch["labels"].dtype == torch.float32


def test_task_data_error_messages_say_what_is_wrong():
    with pytest.raises(ValueError, match=r"^TaskData: got no examples$"):
        TaskData([], WordTokenizer(), 32)
    with pytest.raises(ValueError, match=r"^TaskData: examples mix single sentences and pairs \(some text2 are None\)$"):
        TaskData(make_examples(2) + make_examples(2, pairs=True), WordTokenizer(), 32)
    mixed = make_examples(3)
    mixed[1] = Example("x", "a b", None, None)
    with pytest.raises(ValueError, match=r"^TaskData: some examples have labels and some do not$"):
        TaskData(mixed, WordTokenizer(), 32)


def test_single_sentences_ignore_pair_mode_separate():
    """Oracle: the docstring ('Single-sentence tasks ignore pair_mode')."""
    data = TaskData(make_examples(4), WordTokenizer(), 32, pair_mode="separate")
    batch = next(data.batches(4, shuffle=False))
    assert data.pair_mode is None and "input_ids_b" not in batch, sorted(batch)


def test_separate_pairs_are_sorted_by_the_sum_of_both_lengths():
    """Oracle: hand-counted lengths ([CLS] w.. [SEP] per sentence): padded cost ~ longest a + longest b."""
    examples = [Example("0", "w " * 9, "w", 0), Example("1", "w w", "w w w", 1), Example("2", "w", "w " * 6, 2)]
    data = TaskData(examples, WordTokenizer(), 32, pair_mode="separate")
    assert data.lengths == [11 + 3, 4 + 5, 3 + 8], data.lengths
    assert next(data.batches(3, shuffle=False))["ids"] == ["1", "2", "0"]


def test_float_labels_are_float32_whatever_torch_default_dtype():
    """The docstring: float labels default to float32 (the handout's float64 breaks MSE against float32 outputs),
    also when a user has set torch's default dtype to float64."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        data = TaskData([Example("a", "x", "y", 2.5), Example("b", "x", "z", 4.0)], WordTokenizer(), 16)
    finally:
        torch.set_default_dtype(old)
    assert data.labels.dtype == torch.float32, data.labels.dtype
