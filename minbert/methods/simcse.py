"""SimCSE: contrastive learning of sentence embeddings, with dropout as the only augmentation.

Gao, Yao & Chen 2021, "SimCSE: Simple Contrastive Learning of Sentence Embeddings", arXiv:2104.08821.
Used before multitask fine-tuning by Song, Hu & Pan (CS224N report, §3.2). The command that trains
an encoder with it and writes the folder the next stage loads is minbert/tools/simcse_stage.py
(`python -m minbert simcse`); this file is the method: the loss and the training-time head.

Unsupervised (§3, Eq. 4): the same batch of N sentences passes the encoder twice; the two passes
draw independent dropout masks, so h_i and h_i⁺ are two noisy views of sentence i (simcse_loss).
Supervised (§4, Eq. 5): an NLI file gives each premise an entailment h_i⁺ and a contradiction h_i⁻
(a hard negative), as extra columns of the same softmax.

Representation (§3 and Appendix A, the paper's choice): the last layer's [CLS] vector followed by
an MLP (Linear(C, C) + tanh, freshly initialised) during training. At test time (App. A, Table 6)
unsupervised SimCSE drops the MLP; supervised SimCSE keeps it, exported as the encoder's pooler
(Linear + tanh of [CLS], the same function; SimCSE's simcse_to_huggingface.py renames mlp.* to
pooler.* the same way). Mean pooling (all-MiniLM-L6-v2's) has no pooler to hold an MLP, so there
the MLP is always dropped.

Variant chosen: one forward pass per view (the reference code concatenates the two copies into one
batch of 2N: the same distribution of masks). Left out: the MLM auxiliary loss, the Song/Hu/Pan
report's Eq. 1 variant (its denominator also holds same-view terms sim(h_i, h_j)), multi-GPU gathering.
Shapes: N sentences, C hidden.
"""

import torch
import torch.nn.functional as F
from torch import nn

from minbert.bert.model import BertModel
from minbert.tasks.embedding_eval import POOLINGS, pool

TEMPERATURE = 0.05   # τ, the paper's value for every setting (Appendix A)


def simcse_loss(h: torch.Tensor, h_pos: torch.Tensor, h_neg: torch.Tensor | None = None,
                temperature: float = TEMPERATURE) -> torch.Tensor:
    """Mean ℓ_i over the batch. h, h_pos, h_neg: (N, C) views of sentence i, of its positive
    (the second dropout view, or the entailment), of its hard negative (supervised only)."""
    # Eq. 4 (unsupervised):  ℓ_i = −log  e^{sim(h_i, h_i⁺)/τ} / Σ_{j=1..N} e^{sim(h_i, h_j⁺)/τ}
    # Eq. 5 (supervised):    ℓ_i = −log  e^{sim(h_i, h_i⁺)/τ} / Σ_j (e^{sim(h_i, h_j⁺)/τ} + e^{sim(h_i, h_j⁻)/τ})
    # sim = cosine: cross-entropy over the (N, N) or (N, 2N) matrix sim/τ with target j = i.
    # 1) cosine similarity of every anchor with every candidate: normalise, then dot products
    h, h_pos = F.normalize(h.float(), dim=-1), F.normalize(h_pos.float(), dim=-1)
    logits = h @ h_pos.T                                                    # (N, C) @ (C, N) -> (N, N)
    if h_neg is not None:
        # 2) supervised: the hard negatives of every sentence are extra columns
        logits = torch.cat([logits, h @ F.normalize(h_neg.float(), dim=-1).T], dim=1)   # (N, 2N)
    # 3) -log softmax at the diagonal: the positive of anchor i is column i
    target = torch.arange(h.shape[0], device=h.device)
    return F.cross_entropy(logits / temperature, target)


class SimCSE(nn.Module):
    """The encoder with SimCSE's training-time head: pooled [CLS] (or mean) -> Linear + tanh."""

    def __init__(self, encoder: BertModel, pooling: str = "cls", temperature: float = TEMPERATURE):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"minbert.methods.simcse.SimCSE: pooling must be one of {POOLINGS}, got {pooling!r}")
        if not temperature > 0:
            raise ValueError(f"minbert.methods.simcse.SimCSE: temperature must be > 0, got {temperature!r}")
        self.encoder, self.pooling, self.temperature = encoder, pooling, temperature
        C = encoder.config.hidden_size
        self.mlp = nn.Sequential(nn.Linear(C, C), nn.Tanh())   # training; at test time only if kept (keep_mlp)
        nn.init.normal_(self.mlp[0].weight, std=encoder.config.initializer_range)
        nn.init.zeros_(self.mlp[0].bias)

    def forward(self, batch: dict) -> torch.Tensor:
        """(B, T) token ids -> (B, C) training representation MLP(pool(h))."""
        h = self.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"]
        return self.mlp(pool(h, batch["attention_mask"], self.pooling))

    def loss(self, batch: dict, positive: dict | None = None, negative: dict | None = None) -> torch.Tensor:
        """Unsupervised when `positive` is None: the same batch twice, two dropout masks."""
        h = self(batch)                                                     # (N, C)
        h_pos = self(batch if positive is None else positive)               # (N, C)
        h_neg = None if negative is None else self(negative)                # (N, C)
        return simcse_loss(h, h_pos, h_neg, temperature=self.temperature)

    def keep_mlp(self) -> None:
        """Make the MLP part of the test-time encoder: copy it into the encoder's pooler, the same
        Linear(C, C) + tanh of the [CLS] vector (supervised SimCSE, App. A)."""
        if self.pooling != "cls":
            raise ValueError("minbert.methods.simcse.SimCSE.keep_mlp: the pooler reads [CLS]; an MLP on mean "
                             "pooling cannot be kept")
        with torch.no_grad():
            self.encoder.pooler.dense.weight.copy_(self.mlp[0].weight)
            self.encoder.pooler.dense.bias.copy_(self.mlp[0].bias)


def keeps_mlp(test_mlp: str, supervised: bool, pooling: str) -> bool:
    """Whether the MLP is used at test time: auto = the paper's choice (supervised keeps it, App. A)."""
    if pooling != "cls":
        return False
    return supervised if test_mlp == "auto" else test_mlp == "keep"
