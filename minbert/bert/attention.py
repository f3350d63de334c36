"""Multi-head self-attention, written out (Vaswani et al. 2017, "Attention Is All You Need",
arXiv:1706.03762, Eq. 1 and §3.2.2), as BERT uses it (Devlin et al. 2019, arXiv:1810.04805).

    Attention(Q, K, V) = softmax(Q Kᵀ / √D + M) V

computed independently in H heads of width D = C / H and concatenated. The output projection
(`attention_dense`) belongs to the layer in minbert, as in the CS224N handout, so this module
returns the concatenated heads.

Shape letters, used in comments across the repository:
    B batch, T tokens, C hidden size (H·D), H heads, D head dim.

Mask convention (one for the whole repository): an *additive* float mask of shape (B, 1, 1, T),
0.0 at real tokens and -10000.0 at padding, built once per batch by `extended_attention_mask`.
It broadcasts over heads and query positions, so padded *keys* get ~zero probability
(exp(-10000) underflows to exactly 0 in fp32, bf16 and fp16). Padded *queries* still produce
values; nobody reads them. -10000 (the original BERT's value) rather than -inf or finfo.min
keeps the mask finite in fp16 and avoids NaN rows.

Two paths, chosen by `BertConfig.fast_attention`:
  - explicit (default, the graded path): the four lines of maths below;
  - fast: `torch.nn.functional.scaled_dot_product_attention`, which may use a fused kernel.
Both are tested to agree (tests/bert/test_attention.py).

Deliberately left out: cross-attention, KV caches, head masks, relative positions.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from minbert.bert.config import BertConfig
from minbert.bert.dropout import dropout

MASK_VALUE = -10000.0


def extended_attention_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, T) with 1 = real token, 0 = padding  ->  additive (B, 1, 1, T) in `dtype`."""
    keep = attention_mask[:, None, None, :].to(dtype)   # (B, 1, 1, T)
    return (1.0 - keep) * MASK_VALUE


class SelfAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        C = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = C // config.num_attention_heads
        # Parameter names are graded and mapped to checkpoints by name: do not rename.
        self.query = nn.Linear(C, C)
        self.key = nn.Linear(C, C)
        self.value = nn.Linear(C, C)
        self.dropout_prob = config.attention_probs_dropout_prob
        self.fast = config.fast_attention

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        # (B, T, C) -> (B, T, H, D) -> (B, H, T, D): each head attends over its own D-slice.
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x: (B, T, C) token vectors; mask: additive (B, 1, 1, T). Returns (B, T, C)."""
        B, T, C = x.shape
        q = self.split_heads(self.query(x))   # (B, H, T, D)
        k = self.split_heads(self.key(x))     # (B, H, T, D)
        v = self.split_heads(self.value(x))   # (B, H, T, D)

        if self.fast:
            # Same maths in one call; under autocast q may be bf16/fp16, and the mask must match it.
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype),
                                               dropout_p=self.dropout_prob if self.training else 0.0)
        else:
            # Hint: scores = Q Kᵀ/√D, plus the additive mask, softmax over the KEYS (last dim),
            # dropout on the probabilities (`dropout(probs, p, self.training)`), times V.
            ### BEGIN SOLUTION attention
            # 1) similarity of every query with every key, scaled by 1/√D so the logits' variance
            #    does not grow with the head width (which would saturate the softmax).
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, D) @ (B, H, D, T) -> (B, H, T, T)
            # 2) padded keys get -10000 added, i.e. zero probability after the softmax.
            scores = scores + mask                                        # (B, H, T, T) + (B, 1, 1, T)
            # 3) each query's weights over the keys sum to 1.
            #    Softmax in fp32 (autocast does that), then back to the compute dtype, so under
            #    bf16 the dropout and the next matmul move half the bytes (HF does the same).
            probs = F.softmax(scores, dim=-1).to(v.dtype)                 # (B, H, T, T)
            # 4) BERT drops whole attention links during training (attention_probs_dropout_prob).
            probs = dropout(probs, self.dropout_prob, self.training)  # (B, H, T, T)
            # 5) weighted average of the values.
            y = probs @ v                                                 # (B, H, T, T) @ (B, H, T, D) -> (B, H, T, D)
            ### END SOLUTION

        # Merge heads back: (B, H, T, D) -> (B, T, H, D) -> (B, T, C).
        return y.transpose(1, 2).reshape(B, T, C)
