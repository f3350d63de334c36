"""Pair heads: score a sentence pair, from two pooled vectors u, v (B, C) or one joint vector.

A cross-encoder (minbert.tasks.multitask) reads "[CLS] a [SEP] b [SEP]" as one sequence, so attention
compares the two sentences token by token. A bi-encoder encodes a and b *separately*
(TaskData(..., pair_mode="separate")) and a small head compares the two vectors afterwards:

    u = pooled(a) (B, C),   v = pooled(b) (B, C),   score = head(u, v) (B, 1) or (B, out)

This is weaker for paraphrase and similarity, but every sentence gets one reusable embedding,
which is what retrieval and the MNR loss (minbert.methods.mnr) need. Bi-encoder heads:

- CosineHead: cos(u, v), no hidden layer. Sentence-BERT's regression objective
  (Reimers & Gurevych 2019, arXiv:1908.10084, §3, "Regression Objective Function"); Benton's
  "CoSim" STS head (CS224N report, §4.2).
- DotHead: u · v, no parameters. Benton's baseline STS head (CS224N report, §4.1: "the dot
  product of the resulting pooled embeddings", trained with MSE on the 0-5 label). His §4.2
  describes the baseline differently (a linear layer, then the cosine); we follow §4.1.
- ConcatHead: [u; v] (B, 2C) -> any head (linear or MLP, built by multitask.make_head). The
  "concatenated embeddings" head of Song, Hu & Pan (CS224N report, §3.1) and Pritsky et al.'s
  "concat embed." (CS224N report, Table 2). Order-sensitive; no |u − v| or u ⊙ v features.
- SiameseHead: features [u, v, |u − v|, u ⊙ v] (B, 4C) -> MLP. The feature combination is
  InferSent's (Conneau et al. 2017, arXiv:1705.02364, §3.1); Sentence-BERT's classification
  objective uses (u, v, |u − v|) with one linear layer (arXiv:1908.10084, §3 and Table 6).

And one cross-encoder head:
- TanhScaledHead: tanh of a head's single output, mapped onto the label range. Benton's STS
  concatenation head (CS224N report, §4.2: "We apply tanh to the logit ... so that we can scale
  it when computing the loss"). We scale the prediction (lo + (hi − lo)(tanh + 1)/2), so the
  MSE is in label units; scaling the label onto [−1, 1] instead divides the loss by
  ((hi − lo)/2)² = 6.25 for STS, the same minimiser.

All return (B, out), like the cross-encoder heads of minbert.tasks.multitask, so a caller squeezes
the last dim for "para" and "sts" exactly as MultitaskBert.forward does.

Symmetry (tested): CosineHead and DotHead are symmetric in (u, v). SiameseHead's |u − v| and
u ⊙ v blocks are symmetric under swapping u and v, but [u, v] is not, so SiameseHead (and
ConcatHead) are order-sensitive. u − v itself is antisymmetric; the absolute value makes that
block symmetric.

Deliberately left out: mean pooling over tokens (we reuse the pooled vector), the symmetrised
Siamese head f(u, v) + f(v, u), and softmax classifiers over two logits.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


class CosineHead(nn.Module):
    """cos(u, v), mapped to a score or a logit. Reimers & Gurevych 2019 (Sentence-BERT,
    arXiv:1908.10084), regression objective.

    scale_to=(lo, hi), for STS: a fixed linear map of cos ∈ [−1, 1] onto [lo, hi],

        score = lo + (hi − lo) · (cos + 1) / 2        e.g. [0, 5]: score = 2.5 · (cos + 1),

    so identical directions give hi, opposite directions lo, orthogonal ones the middle. No
    parameters: the encoder alone must learn the geometry. (Sentence-BERT's CosineSimilarityLoss
    instead regresses cos directly onto label / 5 ∈ [0, 1]; Pearson r is the same for any
    increasing linear map, so the two differ only in which cosine the MSE asks for.)

    scale_to=None, for paraphrase: a logit for BCE-with-logits,

        logit = s · cos + b,   s = exp(log_s) > 0 and b learned,

    so `logit > 0` (paraphrase) means cos > −b / s: the head learns a threshold on the cosine.
    s is kept positive (learned in log space, like CLIP's logit scale, arXiv:2103.00020) so that a larger cosine always
    means "more paraphrase". |cos| ≤ 1 caps |logit − b| at s, hence a large init (5 -> σ(5) = 0.993).
    """

    def __init__(self, scale_to: tuple[float, float] | None = None, init_scale: float = 5.0,
                 init_bias: float = 0.0):
        super().__init__()
        self.scale_to = scale_to
        if scale_to is not None:
            lo, hi = scale_to
            if not lo < hi:
                raise ValueError(f"CosineHead: scale_to must be (lo, hi) with lo < hi, got {scale_to}")
        else:
            self.log_scale = nn.Parameter(torch.tensor(math.log(init_scale)))
            self.bias = nn.Parameter(torch.tensor(float(init_bias)))

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(B, C), (B, C) -> (B, 1) scores (scale_to given) or logits (scale_to=None)."""
        # cos = u·v / (|u| |v|); the norms are clamped at 1e-8, so a zero vector gives cos = 0
        cos = F.cosine_similarity(u, v, dim=-1, eps=1e-8).unsqueeze(-1)    # (B, 1)
        if self.scale_to is not None:
            lo, hi = self.scale_to
            return lo + (hi - lo) * (cos + 1) / 2                          # [−1, 1] -> [lo, hi]
        return self.log_scale.exp() * cos + self.bias                      # (B, 1) logits


class SiameseHead(nn.Module):
    """MLP on [u, v, |u − v|, u ⊙ v]. Features from Conneau et al. 2017 (InferSent,
    arXiv:1705.02364, §3.1), used for pair classification by Reimers & Gurevych 2019
    (Sentence-BERT, arXiv:1908.10084, §3; they keep (u, v, |u − v|), their Table 6).

    |u − v| shows where the sentences differ, u ⊙ v where they agree (a cosine before the sum);
    [u, v] shows the sentences themselves, at the price of order sensitivity.

        Linear(4C, C) -> GELU -> Dropout -> Linear(C, out)
    """

    def __init__(self, C: int, out: int, dropout: float = 0.1):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(4 * C, C), nn.GELU(), nn.Dropout(dropout), nn.Linear(C, out))

    @staticmethod
    def features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(B, C), (B, C) -> (B, 4C), blocks in the order [u, v, |u − v|, u ⊙ v]."""
        return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(B, C), (B, C) -> (B, out)."""
        return self.mlp(self.features(u, v))                                # (B, 4C) -> (B, out)


class DotHead(nn.Module):
    """u · v, a score (STS) or a logit (paraphrase); no parameters. Benton's baseline STS head.
    Unlike the cosine, the length of the embeddings counts (his §4.2 discusses the trade-off)."""

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(B, C), (B, C) -> (B, 1)."""
        return (u * v).sum(-1, keepdim=True)                                # (B, C) -> (B, 1)


class ConcatHead(nn.Module):
    """head([u; v]): plain concatenation of the two pooled vectors (Song, Hu & Pan; Pritsky et al.).
    `head` maps (B, 2C) -> (B, out), e.g. multitask.make_head(kind, C, out, dropout, C_in=2 * C)."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head

    def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """(B, C), (B, C) -> (B, 2C) -> (B, out)."""
        return self.head(torch.cat([u, v], dim=-1))


class TanhScaledHead(nn.Module):
    """lo + (hi − lo)·(tanh(head(x)) + 1)/2: a cross-encoder score bounded to (lo, hi) (Benton's
    STS concatenation head). `head` maps (B, C) -> (B, 1)."""

    def __init__(self, head: nn.Module, scale_to: tuple[float, float] = (0.0, 5.0)):
        super().__init__()
        lo, hi = scale_to
        if not lo < hi:
            raise ValueError(f"TanhScaledHead: scale_to must be (lo, hi) with lo < hi, got {scale_to}")
        self.head, self.scale_to = head, scale_to

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C) -> (B, 1) in (lo, hi)."""
        lo, hi = self.scale_to
        return lo + (hi - lo) * (torch.tanh(self.head(x)) + 1) / 2         # (−1, 1) -> (lo, hi)
