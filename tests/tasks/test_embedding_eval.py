"""Grades minbert.tasks.embedding_eval: pool, alignment and sts_report (the STS / alignment / uniformity
report of a frozen encoder; alignment and uniformity themselves also in tests/methods/test_simcse.py).

Oracles: (a) hand-worked examples of the pooling and of Wang & Isola's alignment (arXiv:2005.10242, Eq. 4);
(b) live — sts_report against a reference built another way: each sentence encoded ALONE (batch of one, so
no padding), cosines in NumPy float64, Pearson r and Spearman ρ from scipy.stats, alignment and uniformity
(Eq. 4-5) as explicit loops over pairs, the positive pairs being those with gold >= 4 (SimCSE §5).

Run: python -m pytest -q tests/tasks/test_embedding_eval.py   (offline, CPU, a few seconds)
"""

import itertools
import math

import numpy as np
import pytest
import scipy  # scipy.stats loads at its first use, not while pytest collects (seconds on a busy CPU)
import torch

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.tasks.data import Example
from minbert.tasks.embedding_eval import alignment, pool, sts_report

# ---------------------------------------------------------------------------- pool
# (B, T, C) = (2, 3, 2); the second sequence has one pad token, whose state (100, 100) must be ignored
H = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]],
                  [[-1.0, 0.0], [3.0, 2.0], [100.0, 100.0]]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])


def test_cls_pooling_is_the_first_token_state():
    """Oracle: hand. 'cls' -> h[:, 0]: (1, 2) and (−1, 0)."""
    torch.testing.assert_close(pool(H, MASK, "cls"), torch.tensor([[1.0, 2.0], [-1.0, 0.0]]), rtol=0, atol=0,
                               msg="minbert.tasks.embedding_eval.pool('cls'): expected the [CLS] (first) token's state")


def test_mean_pooling_averages_the_real_tokens_only():
    """Oracle: hand. 'mean' -> ((1+3+5)/3, (2+4+9)/3) = (3, 5) and, over the 2 real tokens, ((−1+3)/2, (0+2)/2) = (1, 1)."""
    torch.testing.assert_close(pool(H, MASK, "mean"), torch.tensor([[3.0, 5.0], [1.0, 1.0]]), rtol=0, atol=1e-6,
                               msg="minbert.tasks.embedding_eval.pool('mean'): expected the mean over tokens with "
                                   "attention_mask 1 (pads excluded from the sum and the count)")


def test_pool_rejects_an_unknown_pooling_by_name():
    with pytest.raises(ValueError, match=r"pooling must be one of .*'cls'.*'mean'.*got 'max'"):
        pool(H, MASK, "max")


# ---------------------------------------------------------------------------- alignment
def test_alignment_normalises_each_row_and_averages_over_pairs():
    """Oracle: hand (Wang & Isola Eq. 4, α = 2). x = ((3, 4), (0, 2)) -> unit rows (.6, .8), (0, 1);
    y = ((4, 3), (5, 0)) -> (.8, .6), (1, 0). Squared distances .08 and 2: align = (0.08 + 2) / 2 = 1.04."""
    x, y = torch.tensor([[3.0, 4.0], [0.0, 2.0]]), torch.tensor([[4.0, 3.0], [5.0, 0.0]])
    got = alignment(x, y)
    assert got == pytest.approx(1.04, abs=1e-12), \
        f"minbert.tasks.embedding_eval.alignment: expected the MEAN over pairs of ||x_i/|x_i| − y_i/|y_i|||² = 1.04, got {got}"


# ---------------------------------------------------------------------------- sts_report
PAIRS = [Example(str(i), a, b, label) for i, (a, b, label) in enumerate([
    ("a good movie", "a great film", 4.0),                # exactly 4: a positive pair (gold >= 4)
    ("the plot was dull", "a boring story", 4.5),
    ("fun", "the actors were smart", 1.0),
    ("an awful film", "a bad movie", 5.0),
    ("nice", "the story was nice and the plot was smart", 2.5),
    ("dull actors", "great fun", 0.0),
    ("a smart plot", "a smart story", 3.5),
])]


@pytest.fixture(scope="module")
def encoder_and_tokenizer():
    # init std 0.5, not BERT's 0.02: a random tiny BERT at 0.02 maps every sentence to nearly the same [CLS]
    # direction (all cosines 1.0000), where float32 rounding alone would move Pearson r by 1e-3
    torch.manual_seed(0)
    return BertModel(BertConfig.tiny(initializer_range=0.5)).eval(), Tokenizer.from_pretrained("minilm-l6")


def reference_report(encoder, tok, pairs, pooling):
    """Each sentence alone (no padding), then float64 NumPy/scipy and explicit loops."""
    def vec(text):
        batch = tok([text])
        with torch.no_grad():
            h = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"][0]
        return (h[0] if pooling == "cls" else h.mean(0)).double().numpy()   # (C,)

    def unit(v):
        return v / np.linalg.norm(v)
    a, b = [vec(e.text) for e in pairs], [vec(e.text2) for e in pairs]
    cos = [float(unit(x) @ unit(y)) for x, y in zip(a, b)]
    gold = [e.label for e in pairs]
    positives = [i for i, g in enumerate(gold) if g >= 4]
    rows = [unit(v) for v in a + b]
    pairs_ij = list(itertools.combinations(range(len(rows)), 2))
    return {"sts_pearson": scipy.stats.pearsonr(cos, gold).statistic,
            "sts_spearman": scipy.stats.spearmanr(cos, gold).statistic,
            "alignment": (float(np.mean([np.sum((unit(a[i]) - unit(b[i])) ** 2) for i in positives]))
                          if positives else math.nan),
            "uniformity": math.log(np.mean([math.exp(-2 * np.sum((rows[i] - rows[j]) ** 2)) for i, j in pairs_ij]))}


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_sts_report_matches_a_per_sentence_scipy_reference(encoder_and_tokenizer, pooling):
    encoder, tok = encoder_and_tokenizer
    got = sts_report(encoder, tok, PAIRS, pooling=pooling)
    want = reference_report(encoder, tok, PAIRS, pooling)
    assert got["pooling"] == pooling, f"minbert.tasks.embedding_eval.sts_report: 'pooling' must name the pooling, got {got}"
    assert not math.isnan(want["alignment"]), "test premise: PAIRS has pairs with gold >= 4"
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-5), \
            (f"minbert.tasks.embedding_eval.sts_report({pooling!r})[{key!r}]: expected {value:.6f} (each sentence encoded "
             f"alone; scipy; alignment over the pairs with gold >= 4), got {got[key]!r}")


def test_sts_report_defaults_to_cls_pooling_on_the_cpu(encoder_and_tokenizer):
    """Oracle: the docstring (SimCSE's test-time choice: [CLS] without the MLP)."""
    encoder, tok = encoder_and_tokenizer
    got, want = sts_report(encoder, tok, PAIRS), reference_report(encoder, tok, PAIRS, "cls")
    assert got["pooling"] == "cls" and got["sts_pearson"] == pytest.approx(want["sts_pearson"], abs=1e-5), \
        f"minbert.tasks.embedding_eval.sts_report: the default pooling must be 'cls', got {got}"


def test_sts_report_alignment_is_nan_without_positive_pairs(encoder_and_tokenizer):
    """Oracle: property. No pair has gold >= 4: alignment (a mean over no pairs) is NaN, not an error or a number;
    the correlations and uniformity are still reported."""
    encoder, tok = encoder_and_tokenizer
    low = [e for e in PAIRS if e.label < 4]
    got = sts_report(encoder, tok, low)
    assert math.isnan(got["alignment"]), f"minbert.tasks.embedding_eval.sts_report: no gold >= 4 pair: alignment must be NaN, got {got}"
    want = reference_report(encoder, tok, low, "cls")
    assert got["uniformity"] == pytest.approx(want["uniformity"], abs=1e-5)
