"""Grades minbert.methods.simcse (SimCSE, Gao et al. 2021, arXiv:2104.08821) and minbert.tasks.embedding_eval.
The command around them (`python -m minbert simcse`) is graded by tests/tools/test_simcse_stage.py.

Oracles: (a) a NumPy float64 reference written from the paper's Eq. 4 (unsupervised) and Eq. 5
(supervised); (c) properties: identical embeddings give loss log N (every candidate is equally
likely); with dropout off the two views are bit-identical; the gradient reaches the encoder;
alignment/uniformity on hand-computed cases (Wang & Isola 2020, Eq. 4-5).
"""

import math

import numpy as np
import pytest
import torch

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.methods.simcse import TEMPERATURE, SimCSE, simcse_loss
from minbert.tasks.embedding_eval import alignment, uniformity


def reference_loss(h, h_pos, h_neg=None, tau=0.05):
    """Eq. 4 / Eq. 5 literally, in float64: a loop over anchors i and candidates j."""
    def sim(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    h, h_pos = np.asarray(h, np.float64), np.asarray(h_pos, np.float64)
    losses = []
    for i in range(len(h)):
        denom = sum(math.exp(sim(h[i], h_pos[j]) / tau) for j in range(len(h)))
        if h_neg is not None:
            denom += sum(math.exp(sim(h[i], np.float64(h_neg[j])) / tau) for j in range(len(h)))
        losses.append(-math.log(math.exp(sim(h[i], h_pos[i]) / tau) / denom))
    return float(np.mean(losses))


def test_simcse_loss_of_identical_embeddings_is_log_N():
    for N in (2, 5, 16):
        h = torch.randn(1, 8).expand(N, 8)    # every view of every sentence is the same vector
        got = simcse_loss(h, h.clone()).item()
        assert abs(got - math.log(N)) < 1e-5, f"minbert.methods.simcse.simcse_loss: identical embeddings, N={N}: expected log N = {math.log(N):.6f}, got {got:.6f}"


@pytest.mark.parametrize("tau", [0.05, 0.5])
def test_simcse_loss_matches_float64_reference_of_eq4_and_eq5(tau):
    g = torch.Generator().manual_seed(0)
    h, h_pos, h_neg = (torch.randn(6, 10, generator=g, dtype=torch.float64) for _ in range(3))
    # a positive close to its anchor, so the loss is far from log N and a wrong diagonal would show
    h_pos = h + 0.3 * h_pos
    unsup = simcse_loss(h, h_pos, temperature=tau).item()
    sup = simcse_loss(h, h_pos, h_neg, temperature=tau).item()
    ref_unsup, ref_sup = reference_loss(h, h_pos, tau=tau), reference_loss(h, h_pos, h_neg, tau=tau)
    assert abs(unsup - ref_unsup) < 1e-4 * max(1, ref_unsup), \
        f"minbert.methods.simcse.simcse_loss (unsupervised, Eq. 4, τ={tau}): expected {ref_unsup:.6f}, got {unsup:.6f}"
    assert abs(sup - ref_sup) < 1e-4 * max(1, ref_sup), \
        f"minbert.methods.simcse.simcse_loss (supervised, Eq. 5, τ={tau}): expected {ref_sup:.6f}, got {sup:.6f}"


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    tok = Tokenizer.from_pretrained("minilm-l6")
    return SimCSE(BertModel(BertConfig.tiny())), tok


def test_simcse_views_differ_only_by_dropout(tiny):
    model, tok = tiny
    batch = tok(["a good movie", "the plot was dull and the actors bored", "fun"])
    model.train()
    a, b = model(batch), model(batch)
    assert not torch.equal(a, b), "minbert.methods.simcse.SimCSE.forward: with dropout on, two passes of one batch must differ (dropout is the augmentation)"
    model.eval()   # dropout off: the two views are the same function of the same input
    a, b = model(batch), model(batch)
    assert torch.equal(a, b), "minbert.methods.simcse.SimCSE.forward: with dropout off the two views must be identical"
    same = tok(["the same sentence"] * 4)   # four copies: every candidate is equally similar
    got = model.loss(same).item()
    assert abs(got - math.log(4)) < 1e-4, f"minbert.methods.simcse.SimCSE.loss: dropout off, 4 copies of one sentence: expected log 4, got {got}"
    model.train()


def test_simcse_gradient_reaches_the_encoder(tiny):
    model, tok = tiny
    model.zero_grad()
    model.loss(tok(["a good movie", "a bad movie", "an awful film", "a fun story"])).backward()
    for name in ("embeddings.word_embedding.weight", "layers.0.self_attention.query.weight", "layers.1.out_dense.weight"):
        grad = model.encoder.get_parameter(name).grad
        assert grad is not None and grad.abs().sum() > 0, f"minbert.methods.simcse.SimCSE.loss: no gradient reached encoder.{name}"


def test_alignment_and_uniformity_match_hand_computation():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])            # unit directions e1, e2 (scale is ignored)
    assert alignment(x, x * 3) == pytest.approx(0.0, abs=1e-12), "minbert.tasks.embedding_eval.alignment: identical directions must give 0"
    # ||e1 - e2||² = 2 for the one pair -> align = 2; uniform = log exp(-2·2) = -4
    assert alignment(x[:1], x[1:]) == pytest.approx(2.0), "minbert.tasks.embedding_eval.alignment: e1 vs e2: expected 2"
    assert uniformity(x) == pytest.approx(-4.0), "minbert.tasks.embedding_eval.uniformity: {e1, e2}: expected -4"
    # three points: e1, e2, -e1: squared distances 2, 4, 2 -> log mean(e^-4, e^-8, e^-4)
    y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    expected = math.log((2 * math.exp(-4) + math.exp(-8)) / 3)
    assert uniformity(y) == pytest.approx(expected), f"minbert.tasks.embedding_eval.uniformity: expected {expected}"


def test_model_temperature_is_the_loss_temperature(tiny):
    model, tok = tiny
    model.eval()
    batch = tok(["a good movie", "a bad movie", "an awful film"])
    h = model(batch)
    for tau in (0.05, 0.1, 0.7):
        model.temperature = tau
        torch.testing.assert_close(model.loss(batch), simcse_loss(h, h, temperature=tau),
                                   msg=f"minbert.methods.simcse.SimCSE.loss must use its temperature {tau} (Eq. 4)")
    model.temperature = TEMPERATURE
    model.train()


def test_keep_mlp_makes_the_pooler_the_training_representation(tiny):
    """SimCSE App. A: supervised SimCSE keeps the MLP at test time; here it becomes the pooler."""
    model, tok = tiny
    model.eval()
    batch = tok(["a good movie", "the plot was dull"])
    model.keep_mlp()
    pooled = model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]
    torch.testing.assert_close(pooled, model(batch), msg="minbert.methods.simcse.SimCSE.keep_mlp: the pooler output must equal MLP([CLS])")
    model.train()


# ---------------------------------------------------------------------------- the module, against torch by hand
def cls_reference(model, batch):
    """SimCSE §3 / App. A written out with torch: tanh(W·h_[CLS] + b) of the last layer's [CLS] state."""
    h = model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"]
    return torch.tanh(h[:, 0] @ model.mlp[0].weight.T + model.mlp[0].bias)


def test_forward_is_tanh_of_a_linear_map_of_the_cls_state_with_the_batch_segments(tiny):
    """Oracle: App. A's training head, MLP = Linear(C, C) + tanh, computed here with torch; the batch's token types
    (a sentence pair, segment 1 after its [SEP]) reach the encoder, so [CLS] sees them."""
    model, tok = tiny
    model.eval()
    batch = tok(["a good movie", "the plot was dull"], ["it was fun", "bored"])
    assert batch["token_type_ids"].any(), "test setup: the pair batch should have segment-1 tokens"
    torch.testing.assert_close(model(batch), cls_reference(model, batch), rtol=0, atol=1e-6,
                               msg="minbert.methods.simcse.SimCSE.forward: expected tanh(Linear([CLS])) of the encoder run "
                                   "on the batch's input_ids, attention_mask AND token_type_ids")
    model.train()


def test_mean_pooling_averages_the_real_tokens_only():
    """Oracle: the masked mean written with torch: Σ_t mask_t·h_t / Σ_t mask_t on a padded batch (padding must not
    change a sentence's vector), then the MLP."""
    torch.manual_seed(0)
    model, tok = SimCSE(BertModel(BertConfig.tiny()), pooling="mean").eval(), Tokenizer.from_pretrained("minilm-l6")
    batch = tok(["fun", "the plot was dull and the actors bored"])
    assert not batch["attention_mask"].all(), "test setup: the batch should be padded"
    h = model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"]
    m = batch["attention_mask"].unsqueeze(-1).float()
    mean = (h * m).sum(1) / m.sum(1)
    torch.testing.assert_close(model(batch), torch.tanh(mean @ model.mlp[0].weight.T + model.mlp[0].bias), rtol=0, atol=1e-6,
                               msg="minbert.methods.simcse.SimCSE.forward(pooling='mean'): expected the mean over real tokens (mask 1) only")


def test_mlp_weight_starts_at_bert_init_std_and_zero_bias():
    """Oracle: BERT's initialiser N(0, initializer_range²) = N(0, 0.02²), bias 0 (as every BERT Linear). 1,024 draws:
    the sample std of N(0, 0.02²) lies in [0.018, 0.022] with overwhelming probability; N(0, 1) would give ~1."""
    torch.manual_seed(0)
    model = SimCSE(BertModel(BertConfig.tiny()))
    std = model.mlp[0].weight.std().item()
    assert 0.018 < std < 0.022, f"minbert.methods.simcse.SimCSE.__init__: the MLP weight should be drawn with std " \
                                f"config.initializer_range = 0.02, got sample std {std:.4f}"
    assert not model.mlp[0].bias.any(), "minbert.methods.simcse.SimCSE.__init__: the MLP bias should start at 0"


def test_supervised_loss_uses_the_given_positive_and_hard_negative(tiny):
    """Oracle: Eq. 5 via the float64 loop above (reference_loss) on the three views computed here with torch;
    also Eq. 4 with a given positive (no negative)."""
    model, tok = tiny
    model.eval()
    anchor, positive, negative = (tok(s) for s in (["a good movie", "a bad movie", "an awful film"],
                                                   ["a fine film", "a poor film", "a terrible movie"],
                                                   ["a bad movie", "a great movie", "a wonderful film"]))
    h, hp, hn = (cls_reference(model, b).detach().double() for b in (anchor, positive, negative))
    for tau in (0.05, 0.5):
        model.temperature = tau
        sup = model.loss(anchor, positive, negative).item()
        unsup = model.loss(anchor, positive).item()
        assert abs(sup - reference_loss(h, hp, hn, tau)) < 1e-4, \
            f"minbert.methods.simcse.SimCSE.loss(batch, positive, negative), τ={tau}: expected Eq. 5 {reference_loss(h, hp, hn, tau):.6f}, got {sup:.6f}"
        assert abs(unsup - reference_loss(h, hp, tau=tau)) < 1e-4, \
            f"minbert.methods.simcse.SimCSE.loss(batch, positive), τ={tau}: expected Eq. 4 {reference_loss(h, hp, tau=tau):.6f}, got {unsup:.6f}"
    model.temperature = TEMPERATURE
    model.train()


def test_bad_pooling_temperature_or_keep_mlp_on_mean_say_what_is_wrong():
    """Oracle: the documented errors: a pooling outside POOLINGS, τ ≤ 0 (τ = 0 divides by zero in Eq. 4), and
    keep_mlp with mean pooling (the pooler reads [CLS])."""
    encoder = BertModel(BertConfig.tiny())
    with pytest.raises(ValueError, match=r"^minbert\.methods\.simcse\.SimCSE: pooling must be one of \('cls', 'mean'\), got 'max'$"):
        SimCSE(encoder, pooling="max")
    for tau in (0.0, -0.05):
        with pytest.raises(ValueError, match=rf"^minbert\.methods\.simcse\.SimCSE: temperature must be > 0, got {tau}$"):
            SimCSE(encoder, temperature=tau)
    with pytest.raises(ValueError, match=r"^minbert\.methods\.simcse\.SimCSE\.keep_mlp: the pooler reads \[CLS\]; "
                                         r"an MLP on mean pooling cannot be kept$"):
        SimCSE(encoder, pooling="mean").keep_mlp()


@pytest.mark.parametrize("test_mlp, supervised, pooling, kept", [
    ("auto", True, "cls", True), ("auto", False, "cls", False),      # App. A: supervised keeps it, unsupervised drops it
    ("keep", False, "cls", True), ("keep", True, "cls", True),
    ("drop", True, "cls", False), ("drop", False, "cls", False),
    ("auto", True, "mean", False), ("keep", True, "mean", False),     # mean pooling has no pooler to hold the MLP
])
def test_keeps_mlp_follows_appendix_a_unless_overridden(test_mlp, supervised, pooling, kept):
    """Oracle: SimCSE App. A (Table 6): the MLP is kept at test time for supervised SimCSE only; keep/drop override."""
    from minbert.methods.simcse import keeps_mlp
    assert keeps_mlp(test_mlp, supervised, pooling) is kept, \
        f"minbert.methods.simcse.keeps_mlp({test_mlp!r}, supervised={supervised}, {pooling!r}): expected {kept}"
