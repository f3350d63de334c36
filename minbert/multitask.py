"""One shared BERT encoder, three task heads: the CS224N multitask model.

Tasks (names used everywhere: "sst", "para", "sts"):
  sst   SST-5 sentiment      5-way classification   cross-entropy            metric: accuracy
  para  Quora paraphrase     one logit per pair     BCE with logits          metric: accuracy of logit > 0
  sts   SemEval STS          one score per pair     MSE on float32 labels    metric: Pearson r

Every head reads the pooled vector h = pooler_output = tanh(W·h_[CLS] + b) (B, C) of one
sequence; pairs are one cross-encoder sequence "[CLS] a [SEP] b [SEP]" with token types, so
the encoder attends across the two sentences (the handout encoded them separately, which
is much weaker for paraphrase and similarity). Head architectures (`head`):
  linear   Dropout -> Linear(C, out)
  mlp      Dropout -> Linear(C, C) -> GELU -> Dropout -> Linear(C, out)   (one hidden layer)
The paraphrase head returns one logit per pair (not two), so the handout's
`logits.sigmoid().round()` evaluation works; its loss is BCE-with-logits on float labels.
The STS head predicts the raw score; Pearson r ignores scale and offset, so no squashing.

`frozen_encoder=True` (train_multitask.py --option pretrain) runs the encoder under
no_grad: nothing of it trains and no activations are kept for backward, so a step costs
little more than a forward.

Deliberately left out (see the multitask methods issues): bi-encoder pair heads, PALs.
"""

import torch
import torch.nn.functional as F
from torch import nn

from .model import BertModel

TASKS = ("sst", "para", "sts")
NUM_OUTPUTS = {"sst": 5, "para": 1, "sts": 1}


def make_head(kind: str, C: int, out: int, dropout: float) -> nn.Sequential:
    if kind == "linear":
        return nn.Sequential(nn.Dropout(dropout), nn.Linear(C, out))
    if kind == "mlp":
        return nn.Sequential(nn.Dropout(dropout), nn.Linear(C, C), nn.GELU(), nn.Dropout(dropout), nn.Linear(C, out))
    raise ValueError(f"head must be 'linear' or 'mlp', got {kind!r}")


class MultitaskBert(nn.Module):
    def __init__(self, encoder: BertModel, head: str = "linear", dropout: float = 0.1,
                 frozen_encoder: bool = False):
        super().__init__()
        self.encoder = encoder
        self.frozen_encoder = frozen_encoder
        encoder.requires_grad_(not frozen_encoder)
        C = encoder.config.hidden_size
        self.heads = nn.ModuleDict({t: make_head(head, C, NUM_OUTPUTS[t], dropout) for t in TASKS})

    def pooled(self, batch: dict) -> torch.Tensor:
        """(B, T) ids of one batch -> (B, C) pooled vectors."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.frozen_encoder):
            out = self.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        return out["pooler_output"]

    def forward(self, task: str, batch: dict) -> torch.Tensor:
        """Raw head outputs: sst (B, 5) logits; para (B,) logits; sts (B,) scores."""
        out = self.heads[task](self.pooled(batch))   # (B, 5) or (B, 1)
        return out if task == "sst" else out.squeeze(-1)

    # The handout's method names, so course code keeps working.
    def predict_sentiment(self, batch):
        return self("sst", batch)

    def predict_paraphrase(self, batch):
        return self("para", batch)

    def predict_similarity(self, batch):
        return self("sts", batch)


def task_loss(task: str, output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean loss of one batch, computed in fp32 even under autocast (losses are reductions)."""
    output = output.float()
    if task == "sst":
        return F.cross_entropy(output, labels.long())
    if task == "para":
        return F.binary_cross_entropy_with_logits(output, labels.float())
    return F.mse_loss(output, labels.float())


def predictions(task: str, output: torch.Tensor) -> list:
    """Head outputs -> the values written to prediction files (ints for sst/para, floats for sts)."""
    if task == "sst":
        return output.argmax(-1).tolist()
    if task == "para":
        return (output > 0).long().tolist()
    return output.float().tolist()
