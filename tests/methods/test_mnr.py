"""Tests for minbert/methods/mnr.py: Multiple Negatives Ranking loss, duplicate masking, positive-pair rule.

Run: python -m pytest -q tests/methods/test_mnr.py   (offline, CPU, about a second)
"""

import math

import pytest
import torch
import torch.nn.functional as F

from minbert.methods.mnr import MNRObjective, duplicate_mask, mnr_loss, mnr_scores, positive_pairs_mask, token_keys

LOSS = "minbert.methods.mnr.mnr_loss"


def embed(texts, C=16, seed=0):
    """One fixed random vector per distinct text, so equal texts get equal embeddings (B, C)."""
    g = torch.Generator().manual_seed(seed)
    table = {t: torch.randn(C, generator=g) for t in sorted(set(texts))}
    return torch.stack([table[t] for t in texts])


def row_losses(a, p, texts_a=None, texts_p=None, scale=20.0):
    """(B,) per-row MNR losses (the loss is their mean)."""
    S = mnr_scores(a, p, scale, texts_a, texts_p)
    return F.cross_entropy(S, torch.arange(len(S)), reduction="none")


# ---------------------------------------------------------------------------- the loss itself
@pytest.mark.parametrize("B", [1, 2, 4, 8])
def test_mnr_loss_is_log_B_when_all_embeddings_equal(B):
    """Oracle: property. All S_ij equal -> softmax uniform over B columns -> loss = log B."""
    x = torch.randn(1, 16, generator=torch.Generator().manual_seed(B)).expand(B, 16)
    loss = mnr_loss(x, x)
    torch.testing.assert_close(loss, torch.tensor(math.log(B)), rtol=0, atol=1e-5,
                               msg=f"{LOSS}: expected log B = log {B} when all embeddings are equal, got {loss.item()}")


@pytest.mark.parametrize("scale, expected", [
    (1.0, 0.44205795917386514),        # (log(1 + e^−0.4) + log(1 + e^−0.8)) / 2 = (0.513015 + 0.371101) / 2
    (20.0, 0.00016775945403203237),    # (log(1 + e^−8)   + log(1 + e^−16)) / 2
])
def test_mnr_loss_matches_hand_computed_softmax(scale, expected):
    """Oracle: hand computation. a1 = (1, 0), a2 = (0, 1), p1 = (1, 0), p2 = (0.6, 0.8):
        cos = [[1.0, 0.6],      row 1: −log(e^{s·1.0} / (e^{s·1.0} + e^{s·0.6})) = log(1 + e^{−0.4 s})
               [0.0, 0.8]]      row 2: −log(e^{s·0.8} / (e^{s·0.0} + e^{s·0.8})) = log(1 + e^{−0.8 s})
    loss = mean of the two rows."""
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    torch.testing.assert_close(mnr_scores(a, p, scale), scale * torch.tensor([[1.0, 0.6], [0.0, 0.8]]), rtol=0, atol=1e-6)
    loss = mnr_loss(a, p, scale)
    torch.testing.assert_close(loss, torch.tensor(expected), rtol=1e-5, atol=1e-7,
                               msg=f"{LOSS}(scale={scale}): expected {expected}, got {loss.item()}")


def test_mnr_loss_matches_cross_entropy_of_scaled_cosines():
    """Oracle: live torch. cross_entropy(20 · pairwise F.cosine_similarity, arange(B)) on random (B, C) = (8, 16)."""
    g = torch.Generator().manual_seed(1)
    a, p = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    S = 20.0 * F.cosine_similarity(a[:, None, :], p[None, :, :], dim=-1)  # (B, 1, C) vs (1, B, C) -> (B, B)
    expected = F.cross_entropy(S, torch.arange(8))
    torch.testing.assert_close(mnr_loss(a, p), expected, rtol=1e-5, atol=1e-6)


def test_mnr_loss_is_invariant_to_embedding_norm():
    """Oracle: property. Cosine ignores norms: rescaling each row of a and p leaves the loss unchanged."""
    g = torch.Generator().manual_seed(2)
    a, p = torch.randn(6, 16, generator=g), torch.randn(6, 16, generator=g)
    ra, rp = torch.rand(6, 1, generator=g) * 10 + 0.01, torch.rand(6, 1, generator=g) * 10 + 0.01
    torch.testing.assert_close(mnr_loss(ra * a, rp * p), mnr_loss(a, p), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("scale", [2.0, 5.0, 20.0, 100.0])
def test_mnr_loss_is_near_zero_for_orthogonal_unit_embeddings(scale):
    """Oracle: closed form. a_i = p_i = e_i: S = scale · I, each row's loss = log(1 + (B − 1) e^{−scale}),
    which is < 1e-6 from scale 20 on (fp32 rounds 1.4e-8 next to logits of 20 to exactly 0)."""
    B = 8
    e = torch.eye(B, 16)
    loss = mnr_loss(e, e, scale)
    torch.testing.assert_close(loss, torch.tensor(math.log1p((B - 1) * math.exp(-scale))), rtol=1e-5, atol=1e-6,
                               msg=f"{LOSS}: expected log(1 + (B - 1) e^-scale) for orthogonal a_i = p_i, got {loss.item()}")
    if scale >= 20:
        assert loss.item() < 1e-6, f"{LOSS}: expected ~0 for orthogonal a_i = p_i at scale {scale}, got {loss.item()}"


def test_mnr_loss_rejects_mismatched_shapes_and_half_texts():
    """Oracle: property. a, p must both be (B, C); texts come in pairs."""
    with pytest.raises(ValueError, match=r"\(B, C\)"):
        mnr_loss(torch.randn(3, 4), torch.randn(2, 4))
    with pytest.raises(ValueError, match="texts_a and texts_p"):
        mnr_loss(torch.randn(2, 4), torch.randn(2, 4), texts_a=["x", "y"])


# ---------------------------------------------------------------------------- duplicates
@pytest.mark.parametrize("texts_a, texts_p, expected", [
    # no shared texts: nothing masked
    (["q1", "q2", "q3"], ["r1", "r2", "r3"], [[0, 0, 0], [0, 0, 0], [0, 0, 0]]),
    # rule 1 (copy of the right answer, both rows 0 and 2) and rule 4 (row 1 sees r1 once)
    (["q1", "q2", "q3"], ["r1", "r2", "r1"], [[0, 0, 1], [0, 0, 1], [1, 0, 0]]),
    # rule 2: a symmetric Quora pair (x, y), (y, x): the other column is the anchor itself
    (["x", "y"], ["y", "x"], [[0, 1], [1, 0]]),
    # rule 3: the same anchor with two answers: each answer is right for both rows
    (["q", "q", "z"], ["r1", "r2", "r3"], [[0, 1, 0], [1, 0, 0], [0, 0, 0]]),
])
def test_duplicate_mask_follows_documented_rules(texts_a, texts_p, expected):
    """Oracle: hand-written masks for rules 1-4 of the minbert.methods.mnr docstring; the diagonal is always kept."""
    mask = duplicate_mask(texts_a, texts_p)
    assert mask.tolist() == torch.tensor(expected, dtype=torch.bool).tolist(), (
        f"minbert.methods.mnr.duplicate_mask({texts_a}, {texts_p}):\n got {mask.int().tolist()}\n expected {expected}")


def test_repeated_batch_gives_exactly_the_loss_of_the_batch():
    """Oracle: property. With texts, a batch repeated twice (every pair duplicated) has the same loss
    as the batch itself: the copies are neither false negatives nor counted twice. Without texts the
    copies act as negatives and the loss is higher."""
    ta, tp = ["q1", "q2", "q3", "q4"], ["r1", "r2", "r3", "r4"]
    a, p = embed(ta), embed(tp, seed=1)
    once = mnr_loss(a, p, texts_a=ta, texts_p=tp)
    twice = mnr_loss(torch.cat([a, a]), torch.cat([p, p]), texts_a=ta + ta, texts_p=tp + tp)
    torch.testing.assert_close(twice, once, rtol=1e-6, atol=1e-6,
                               msg=f"{LOSS}: a repeated batch must give the batch's loss, got {twice.item()} vs {once.item()}")
    unmasked = mnr_loss(torch.cat([a, a]), torch.cat([p, p]))
    assert unmasked > once + 0.1, "without texts the repeated positives should count as (false) negatives"


def test_repeated_positive_is_not_a_negative():
    """Oracle: property, per row. In [(q1, r1), (q2, r2), (q3, r1)] each row's loss equals its loss in a
    batch without the repeat: q1 and q2 rows as in [(q1, r1), (q2, r2)], the q3 row as in [(q3, r1), (q2, r2)]."""
    ta, tp = ["q1", "q2", "q3"], ["r1", "r2", "r1"]
    E = {t: v for t, v in zip(["q1", "q2", "q3", "r1", "r2"], embed(["q1", "q2", "q3", "r1", "r2"]))}
    emb = lambda texts: torch.stack([E[t] for t in texts])             # noqa: E731
    got = row_losses(emb(ta), emb(tp), ta, tp)
    first = row_losses(emb(["q1", "q2"]), emb(["r1", "r2"]))
    third = row_losses(emb(["q3", "q2"]), emb(["r1", "r2"]))
    expected = torch.stack([first[0], first[1], third[0]])
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def test_masked_scores_give_finite_gradients():
    """Oracle: property. −inf entries get zero probability; loss and gradients stay finite."""
    ta, tp = ["q", "q", "x", "r1"], ["r1", "r2", "q", "q"]
    a, p = embed(ta).requires_grad_(True), embed(tp, seed=3).requires_grad_(True)
    loss = mnr_loss(a, p, texts_a=ta, texts_p=tp)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(a.grad).all() and torch.isfinite(p.grad).all()


def test_token_keys_ignore_padding():
    """Oracle: property. Same tokens with different padding -> same key; different tokens -> different keys."""
    ids = torch.tensor([[101, 7, 8, 102, 0], [101, 7, 8, 102, 0], [101, 7, 9, 102, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 0]])
    keys = token_keys(ids, mask)
    assert keys[0] == keys[1] == (101, 7, 8, 102) and keys[0] != keys[2]
    assert token_keys(ids[:1, :4], mask[:1, :4]) == keys[:1], "padding width must not change the key"


# ---------------------------------------------------------------------------- positive pairs
def test_positive_pairs_mask_rule():
    """Oracle: definition. Quora: label 1 (float or long labels). STS: label ≥ 4. SST has no pairs."""
    assert positive_pairs_mask("para", torch.tensor([1, 0, 1])).tolist() == [True, False, True]
    assert positive_pairs_mask("para", torch.tensor([1.0, 0.0])).tolist() == [True, False]
    assert positive_pairs_mask("sts", torch.tensor([5.0, 4.0, 3.99, 0.0])).tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="pair tasks"):
        positive_pairs_mask("sst", torch.tensor([4]))


# ---------------------------------------------------------------------------- Benton's variant
def test_dot_product_scores_match_hand_computation():
    """Oracle: hand computation (Benton §4.2, D = M_x M_yᵀ, scale 1). a1 = (1, 0), a2 = (0, 1), p1 = (1, 0),
    p2 = (1.2, 1.6) (norm 2, so dot ≠ cosine): D = [[1, 1.2], [0, 1.6]];
    row 1: log(1 + e^{0.2}) = 0.798139, row 2: log(1 + e^{−1.6}) = 0.183901, mean 0.491020."""
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 0.0], [1.2, 1.6]])
    torch.testing.assert_close(mnr_scores(a, p, 1.0, score="dot"), torch.tensor([[1.0, 1.2], [0.0, 1.6]]), rtol=0, atol=1e-6,
                               msg="minbert.methods.mnr.mnr_scores(score='dot'): expected the raw dot products a_i · p_j")
    torch.testing.assert_close(mnr_loss(a, p, 1.0, score="dot"), torch.tensor(0.4910198), rtol=0, atol=1e-6,
                               msg=f"{LOSS}(score='dot', scale=1): expected 0.491020")
    assert abs(mnr_loss(a, 3 * p, 1.0, score="dot") - mnr_loss(a, p, 1.0, score="dot")) > 1e-2, \
        "dot-product MNR must depend on the embedding norm (the cosine version does not)"
    with pytest.raises(ValueError, match="score"):
        mnr_scores(a, p, score="euclid")


def sts_batch(labels):
    """A bi-encoder STS batch: distinct anchor/positive texts per row, given similarity labels."""
    B = len(labels)
    ids_a = torch.arange(B).unsqueeze(1) + 10          # (B, 1): distinct token ids per row
    return {"labels": torch.tensor(labels), "input_ids": ids_a, "attention_mask": torch.ones(B, 1),
            "input_ids_b": ids_a + 100, "attention_mask_b": torch.ones(B, 1)}


def test_first_half_schedule_uses_mnr_alone_then_the_task_loss():
    """Oracle: hand computation (Benton §4.2: MNR for the first half of the epochs, then cosine similarity).
    E = 4: epochs 1-2 return weight · MNR over the positives (STS ≥ 4: rows 0 and 2), epochs 3-4 the task loss."""
    u, v = embed(["x", "y", "z"]), embed(["p", "q", "r"], seed=1)
    batch = sts_batch([4.5, 1.0, 4.0])
    task = torch.tensor(7.0)
    obj = MNRObjective(weight=0.5, score="dot", schedule="first_half", num_epochs=4)
    expected = 0.5 * mnr_loss(u[[0, 2]], v[[0, 2]], 1.0, score="dot")
    for epoch, want in [(1, expected), (2, expected), (3, task), (4, task)]:
        obj.set_epoch(epoch)
        torch.testing.assert_close(obj.loss("sts", u, v, batch, task), want, rtol=0, atol=1e-6,
                                   msg=f"minbert.methods.mnr.MNRObjective.loss(first_half), epoch {epoch} of 4")
    odd = MNRObjective(schedule="first_half", num_epochs=5)
    assert [odd.set_epoch(e) or odd.mnr_epoch for e in range(1, 6)] == [True, True, False, False, False], \
        "MNRObjective(first_half): E = 5 -> MNR in epochs e <= 5 // 2 = 2"


def test_add_schedule_adds_weighted_mnr_every_epoch_and_skips_batches_without_positives():
    """Oracle: hand computation. add: task + weight · MNR (scale 20 cosine by default); < 2 positives -> the task
    loss alone (add) or a zero loss that keeps the graph (first_half)."""
    u, v = embed(["x", "y", "z"]), embed(["p", "q", "r"], seed=1)
    task = torch.tensor(7.0, requires_grad=True)
    obj = MNRObjective(weight=0.1, num_epochs=3)
    obj.set_epoch(3)
    torch.testing.assert_close(obj.loss("sts", u, v, sts_batch([4.5, 1.0, 4.0]), task),
                               task + 0.1 * mnr_loss(u[[0, 2]], v[[0, 2]], 20.0), rtol=0, atol=1e-6)
    assert obj.loss("sts", u, v, sts_batch([4.5, 1.0, 2.0]), task) is task
    zero = MNRObjective(schedule="first_half", num_epochs=2).loss("sts", u, v, sts_batch([4.5, 1.0, 2.0]), task)
    assert zero.item() == 0.0 and zero.requires_grad, "first_half, no MNR possible: expected 0 · task loss"


# ---------------------------------------------------------------------------- Benton's positives-only batches
def test_every_mnr_batch_holds_positive_pairs_only(tmp_path, monkeypatch):
    """Benton §4.2: MNR "operates on a batch of K positively labelled sentence pairs". Train with --mnr and
    bi-encoder heads; every batch the MNR loss sees must hold positives only (Quora duplicates, STS >= 4),
    and it must be a full batch of them (4 rows here, 3 negatives per row), not the ~1-2 positives of a mixed batch."""
    import minbert.methods.mnr as mnr_module
    from conftest import tiny_run_inputs
    from test_train_multitask import run
    data, model = tiny_run_inputs(tmp_path)
    rows, labels = [], []
    real_loss = mnr_module.mnr_loss

    def spy_loss(a, p, *args, **kwargs):
        rows.append(a.shape[0])
        return real_loss(a, p, *args, **kwargs)

    real_batch = getattr(mnr_module.MNRObjective, "mnr_batch", None)

    def spy_batch(self, task, batch):
        out = real_batch(self, task, batch)
        labels.append((task, out["labels"].tolist()))
        return out

    monkeypatch.setattr(mnr_module, "mnr_loss", spy_loss)
    monkeypatch.setattr(mnr_module.MNRObjective, "mnr_batch", spy_batch, raising=False)
    run((data, model), tmp_path, "--epochs", "1", "--mnr", "1", "--para_head", "cosine", "--sts_head", "cosine",
        "--schedule", "round_robin")
    assert rows, "train_multitask --mnr: the MNR loss was never computed"
    assert min(rows) == 4 and len(labels) == len(rows), (
        f"train_multitask --mnr: rows per MNR batch {rows}: Benton's MNR batches are batch_size (4) positive pairs")
    for task, ys in labels:
        positive = [y == 1 for y in ys] if task == "para" else [y >= 4 for y in ys]
        assert all(positive), f"train_multitask --mnr: an MNR batch of {task} held non-positive pairs {ys} (Benton §4.2)"


def test_positive_pairs_stream_covers_exactly_the_positives():
    from minbert.bert.tokenizer import Tokenizer
    from minbert.methods.mnr import PositivePairs
    from minbert.tasks.data import Example
    from minbert.tasks.sampling import TaskData
    examples = [Example(f"e{i}", f"first {i}", f"second {i}", float(i % 6)) for i in range(30)]
    data = TaskData(examples, Tokenizer.from_pretrained("minilm-l6"), 16, pair_mode="separate")
    positives = PositivePairs(data, "sts")
    seen = [i for b in positives.batches(4, shuffle=True, generator=torch.Generator().manual_seed(0)) for i in b["ids"]]
    expected = sorted(f"e{i}" for i in range(30) if i % 6 >= 4)
    assert sorted(seen) == expected, f"minbert.methods.mnr.PositivePairs: one pass must cover the STS >= 4 pairs once each, got {sorted(seen)}"


def test_positives_stream_resumes_exactly(tmp_path):
    """A Ctrl-C mid-epoch and --resume must give the uninterrupted run's dev scores: the positives-only MNR streams
    are part of the checkpoint (MNRObjective.state_dict), so the resumed run sees the same MNR batches."""
    import train_multitask
    from conftest import tiny_run_inputs
    from test_train_multitask import run, signal_on_call
    setup = tiny_run_inputs(tmp_path)
    flags = ("--mnr", "1", "--sts_head", "cosine", "--para_head", "cosine")
    full = run(setup, tmp_path / "full", *flags)
    with pytest.MonkeyPatch.context() as m:
        signal_on_call(m, train_multitask, "task_loss", 20)
        with pytest.raises(SystemExit):
            run(setup, tmp_path / "cut", *flags)
    resumed = run(setup, tmp_path / "cut", *flags, "--resume", str(tmp_path / "cut" / "run" / "interrupted.pt"))
    keys = ("sst_acc", "para_acc", "sts_pearson", "overall")
    got, want = [resumed[-1][k] for k in keys], [full[-1][k] for k in keys]
    assert got == want, f"train_multitask --mnr resume: dev scores {got} differ from the uninterrupted run's {want}"
