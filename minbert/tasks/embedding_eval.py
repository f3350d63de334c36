"""Judging a frozen sentence encoder: STS correlation of cosine similarities, alignment, uniformity.

STS: embed both sentences of every pair with the frozen encoder, score the pair by the cosine of
the two vectors, correlate with the gold 0-5 scores. Pearson r is the CS224N handout's STS
metric; Spearman ρ is what SimCSE (Gao et al. 2021, arXiv:2104.08821, §4) reports.

Alignment and uniformity (Wang & Isola 2020, "Understanding Contrastive Representation Learning
through Alignment and Uniformity on the Hypersphere", arXiv:2005.10242, Eq. 4-5), on
L2-normalised embeddings f(x):

    align   = E_{(x, y) ~ positive pairs} ||f(x) - f(y)||²              (α = 2; lower is better)
    uniform = log E_{x, y ~ data, iid} exp(-2 ||f(x) - f(y)||²)         (t = 2; lower is better)

As SimCSE §5 does, positive pairs are the STS pairs with gold score >= 4 and uniformity is over
all sentences of the STS set (every unordered pair of distinct rows).

Pooling: "cls" is the last layer's [CLS] vector with no MLP (SimCSE's test-time choice for
unsupervised SimCSE); "mean" averages the real tokens (what all-MiniLM-L6-v2 was trained for).
Deliberately left out: SentEval's transfer tasks and STS12-16.
"""

import torch
import torch.nn.functional as F

from minbert.tasks.metrics import pearson, spearman

POOLINGS = ("cls", "mean")


def pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, T, C) token states -> (B, C) sentence vectors."""
    if pooling == "cls":
        return last_hidden_state[:, 0]                                        # (B, C)
    if pooling == "mean":
        keep = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)     # (B, T, 1)
        return (last_hidden_state * keep).sum(1) / keep.sum(1)              # (B, C)
    raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")


@torch.inference_mode()
def embed(encoder, tokenizer, sentences: list[str], pooling: str = "cls", batch_size: int = 128,
          max_length: int = 128, device="cpu") -> torch.Tensor:
    """(N, C) fp32 sentence vectors of a frozen encoder, in eval mode (no dropout)."""
    was_training = encoder.training
    encoder.eval()
    out = []
    for i in range(0, len(sentences), batch_size):
        batch = tokenizer(sentences[i:i + batch_size], max_length=max_length)
        batch = {k: v.to(device) for k, v in batch.items()}
        h = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"]
        out.append(pool(h, batch["attention_mask"], pooling).float().cpu())
    encoder.train(was_training)
    return torch.cat(out) if out else torch.empty(0, encoder.config.hidden_size)


def alignment(x: torch.Tensor, y: torch.Tensor) -> float:
    """Wang & Isola's align (α = 2) of positive pairs (x_i, y_i): x, y (N, C), any scale."""
    x, y = F.normalize(x.double(), dim=-1), F.normalize(y.double(), dim=-1)
    return float((x - y).norm(dim=-1).pow(2).mean())


def uniformity(x: torch.Tensor) -> float:
    """Wang & Isola's uniform (t = 2) over all unordered pairs of distinct rows of x (N, C)."""
    x = F.normalize(x.double(), dim=-1)
    sq = torch.pdist(x).pow(2)                 # (N(N-1)/2,) squared distances
    return float(sq.mul(-2).exp().mean().log())


def sts_report(encoder, tokenizer, pairs: list, pooling: str = "cls", device="cpu") -> dict:
    """pairs: Examples with text, text2 and a 0-5 label. Returns Pearson r and Spearman ρ of the
    cosine similarities, alignment over pairs with label >= 4, uniformity over all sentences."""
    a = embed(encoder, tokenizer, [e.text for e in pairs], pooling, device=device)    # (N, C)
    b = embed(encoder, tokenizer, [e.text2 for e in pairs], pooling, device=device)   # (N, C)
    cos = F.cosine_similarity(a, b, dim=-1).tolist()
    gold = [float(e.label) for e in pairs]
    positive = torch.tensor([g >= 4 for g in gold])
    return {"pooling": pooling, "sts_pearson": pearson(cos, gold), "sts_spearman": spearman(cos, gold),
            "alignment": alignment(a[positive], b[positive]) if positive.any() else float("nan"),
            "uniformity": uniformity(torch.cat([a, b]))}
