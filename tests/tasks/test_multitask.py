"""Grades the multitask heads and losses of minbert.tasks.multitask (assignment 5).

Oracles: (a) hand computation in NumPy float64 for the three losses (cross-entropy from
log-sum-exp, binary cross-entropy from the sigmoid, squared error) and for mean pooling;
(c) properties: head shapes per task, padding never changes a mean-pooled vector.
The encoder is replaced by a stand-in where the pooling is graded, so these tests do not
depend on assignments 1-3. Shapes: B batch, T tokens, C hidden.
"""

import numpy as np
import pytest
import torch
from torch import nn

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.tasks.multitask import MultitaskBert, make_head, task_loss

C = 16


def model(**kw):
    torch.manual_seed(0)
    return MultitaskBert(BertModel(BertConfig.tiny(hidden_size=C, intermediate_size=32)), **kw).eval()


@pytest.mark.parametrize("kind, layers", [("linear", [nn.Dropout, nn.Linear]),
                                          ("mlp", [nn.Dropout, nn.Linear, nn.GELU, nn.Dropout, nn.Linear])])
def test_heads_have_the_documented_layers(kind, layers):
    head = make_head(kind, C, 5, 0.3)
    got = [type(m) for m in head]
    assert got == layers, f"minbert.tasks.multitask.make_head({kind!r}): expected layers {[t.__name__ for t in layers]}, got {[t.__name__ for t in got]}"
    linears = [m for m in head if isinstance(m, nn.Linear)]
    assert linears[-1].out_features == 5 and linears[0].in_features == C, (
        f"minbert.tasks.multitask.make_head({kind!r}): the head maps (B, C) = (B, {C}) to (B, out) = (B, 5)")
    assert all(m.p == 0.3 for m in head if isinstance(m, nn.Dropout)), f"minbert.tasks.multitask.make_head({kind!r}): use the given dropout rate"


def test_head_output_shapes_per_task():
    m = model()
    u = torch.randn(4, C, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        shapes = {t: tuple(m.head(t, u).shape) for t in ("sst", "para", "sts")}
        linear = m.heads["para"][-1]
        para = (u @ linear.weight.T + linear.bias).squeeze(-1)
        got = m.head("para", u)
    expected = {"sst": (4, 5), "para": (4,), "sts": (4,)}
    assert shapes == expected, (f"minbert.tasks.multitask.MultitaskBert.head: expected shapes {expected}, got {shapes} "
                                "(hint: the one-output heads return (B,), not (B, 1): squeeze the last dimension)")
    assert torch.allclose(got, para, atol=1e-6), "minbert.tasks.multitask.MultitaskBert.head: para must be the head's raw logit (no sigmoid)"


def numpy_losses(logits, labels, logit, binary, score, target):
    z = logits.double().numpy()
    log_softmax = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    ce = -log_softmax[np.arange(len(z)), labels.numpy()].mean()
    s = 1 / (1 + np.exp(-logit.double().numpy()))
    y = binary.double().numpy()
    bce = -(y * np.log(s) + (1 - y) * np.log(1 - s)).mean()
    mse = ((score.double().numpy() - target.double().numpy()) ** 2).mean()
    return {"sst": ce, "para": bce, "sts": mse}


def test_task_losses_match_hand_computation():
    g = torch.Generator().manual_seed(2)
    logits, labels = torch.randn(6, 5, generator=g), torch.randint(0, 5, (6,), generator=g)
    logit, binary = torch.randn(6, generator=g), torch.randint(0, 2, (6,), generator=g)      # para labels may be ints
    score, target = torch.randn(6, generator=g) * 2 + 2.5, torch.rand(6, generator=g) * 5
    want = numpy_losses(logits, labels, logit, binary, score, target)
    args = {"sst": (logits, labels), "para": (logit, binary), "sts": (score, target)}
    hints = {"sst": "cross-entropy takes the raw logits (it applies log-softmax itself)",
             "para": "binary cross-entropy WITH logits on one logit per pair, labels as floats",
             "sts": "mean squared error between the score and the similarity label"}
    for task, (out, lab) in args.items():
        got = task_loss(task, out, lab)
        assert got.dim() == 0 and got.dtype == torch.float32, (
            f"minbert.tasks.multitask.task_loss({task!r}): expected a float32 scalar (mean over the batch), got {got.dtype} {tuple(got.shape)}")
        assert abs(got.item() - want[task]) <= 1e-5, (
            f"minbert.tasks.multitask.task_loss({task!r}): expected {want[task]:.6f}, got {got.item():.6f} (hint: {hints[task]})")
    under_autocast = task_loss("sst", logits.bfloat16(), labels)
    assert under_autocast.dtype == torch.float32, "minbert.tasks.multitask.task_loss: compute in fp32 even for bf16 outputs"


def test_mean_pooling_ignores_padding():
    m = model(pooling="mean")
    m.encoder.encode = lambda x, attention_mask, layer_extra=None: {"last_hidden_state": x, "pooler_output": x[:, 0]}
    g = torch.Generator().manual_seed(3)
    x, am = torch.randn(3, 7, C, generator=g), torch.ones(3, 7, dtype=torch.long)
    am[1, 4:], am[2, 1:] = 0, 0
    got = m.pooled("sst", x, am)
    want = torch.stack([x[i, am[i].bool()].double().mean(0) for i in range(3)]).float()
    assert got.shape == (3, C), f"minbert.tasks.multitask.MultitaskBert.pooled: expected (B, C) = (3, {C}), got {tuple(got.shape)}"
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5, msg=lambda msg:
        "minbert.tasks.multitask.MultitaskBert.pooled (mean): expected the mean of last_hidden_state over the REAL "
        f"tokens (attention_mask 1), not over all T\n{msg}")
    x2 = x.clone()
    x2[am == 0] = 100.0
    assert torch.allclose(m.pooled("sst", x2, am), got, atol=1e-6), "minbert.tasks.multitask.MultitaskBert.pooled: padded tokens changed the mean"


def test_task_scores_sts_pearson_matches_metrics_pearson_and_scipy():
    """Oracle: (b) scipy.stats.pearsonr and minbert.tasks.metrics.pearson on the SAME pairs (prediction i with the
    gold score of the example it belongs to). run_heads returns outputs in length-sorted order with each
    example's position in the split (`index`), so the gold scores must be looked up by that index."""
    from types import SimpleNamespace
    from minbert.tasks.metrics import pearson
    from minbert.tasks.multitask import task_scores
    g = torch.Generator().manual_seed(5)
    n = 40
    gold = {"sst": torch.randint(0, 5, (n,), generator=g), "para": torch.randint(0, 2, (n,), generator=g).float(),
            "sts": torch.rand(n, generator=g) * 5}
    index = torch.randperm(n, generator=g)                        # the order run_heads visited the examples
    # STS outputs: noisy, non-linear in the gold score (so Pearson differs from Spearman), in visiting order
    sts_out = gold["sts"][index] ** 2 / 5 + torch.randn(n, generator=g)
    sst_out = torch.nn.functional.one_hot(gold["sst"][index], 5).float() * 3 + torch.randn(n, 5, generator=g)
    para_out = (gold["para"][index] * 2 - 1) * 2 + torch.randn(n, generator=g) * 2
    results = {t: ([f"{t}{i}" for i in index.tolist()], index, out) for t, out in
               (("sst", sst_out), ("para", para_out), ("sts", sts_out))}
    splits = {t: SimpleNamespace(labels=labels) for t, labels in gold.items()}
    scores = task_scores(results, splits)
    pairs = (sts_out.double().numpy(), gold["sts"][index].double().numpy())
    want = pearson(*pairs)
    scipy_stats = pytest.importorskip("scipy.stats")
    assert abs(want - scipy_stats.pearsonr(*pairs)[0]) < 1e-12, "minbert.tasks.metrics.pearson disagrees with scipy"
    assert abs(scores["sts_pearson"] - want) < 1e-6, (
        f"minbert.tasks.multitask.task_scores: sts_pearson {scores['sts_pearson']:.6f}, expected Pearson r {want:.6f} of the "
        "outputs against the gold scores of the same examples (hint: gold = labels[index], and Pearson, not Spearman)")
    sst_acc = (sst_out.argmax(-1) == gold["sst"][index]).double().mean().item()
    para_acc = ((para_out > 0).float() == gold["para"][index]).double().mean().item()
    got = (scores["sst_acc"], scores["para_acc"])
    assert abs(got[0] - sst_acc) < 1e-12 and abs(got[1] - para_acc) < 1e-12, \
        f"minbert.tasks.multitask.task_scores: accuracies (sst, para) {got}, expected {(sst_acc, para_acc)}"
    overall = (sst_acc + para_acc + (want + 1) / 2) / 3         # the CS224N handout's overall score
    assert abs(scores["overall"] - overall) < 1e-6, f"task_scores: overall {scores['overall']}, expected {overall}"
