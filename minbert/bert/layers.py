"""The pieces of BERT around attention: embeddings, the post-LN transformer layer, the pooler.

Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding", arXiv:1810.04805, §3 and Figure 2; the layer is the original Transformer
encoder layer (Vaswani et al. 2017, arXiv:1706.03762, §3.1) with GELU instead of ReLU.

  embeddings:  x = Dropout(LayerNorm(word[ids] + position[0..T-1] + token_type[types]))
  layer:       a = LayerNorm(h + Dropout(attention_dense(SelfAttention(h))))      # add & norm 1
               h' = LayerNorm(a + Dropout(out_dense(GELU(interm_dense(a)))))   # add & norm 2
               (+ an optional `extra` term inside that LayerNorm: PALs' TS(h), see pals.py)
  pooler:      tanh(pooler_dense(h[:, 0]))                                     # the [CLS] vector

Variant notes: post-LN (LayerNorm after each residual add), as in BERT, not the pre-LN of later
models. GELU is the exact erf form (`F.gelu`), which is what the checkpoints were trained with.
Token types are used (the CS224N handout silently fed zeros, so sentence pairs lost their
segment information).

Shapes: B batch, T tokens, C hidden, F = intermediate (FFN) width. Parameter names are graded
and mapped onto checkpoint names in model.py: do not rename them.
"""

import torch
import torch.nn.functional as F
from torch import nn

from minbert.bert.attention import SelfAttention
from minbert.bert.config import BertConfig
from minbert.bert.dropout import Dropout


class Embeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        C = config.hidden_size
        self.word_embedding = nn.Embedding(config.vocab_size, C, padding_idx=config.pad_token_id)
        self.pos_embedding = nn.Embedding(config.max_position_embeddings, C)
        self.tk_type_embedding = nn.Embedding(config.type_vocab_size, C)
        self.layer_norm = nn.LayerNorm(C, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        self.max_positions = config.max_position_embeddings

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                word_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """input_ids (B, T) -> (B, T, C).

        `word_embeds` (B, T, C), when given, replaces the word-embedding lookup: R3F adds its
        noise there, before positions and LayerNorm."""
        B, T = input_ids.shape
        if T > self.max_positions:
            raise ValueError(f"sequence length {T} exceeds max_position_embeddings "
                             f"{self.max_positions}; truncate inputs (e.g. --max_seq_len)")
        # Hint: look up the word vectors (unless word_embeds is given), add the position vectors of
        # 0..T-1 and the token-type vectors (all type 0 when token_type_ids is None), then
        # LayerNorm, then dropout. Every term is (B, T, C) or broadcasts to it.
        ### BEGIN SOLUTION embeddings
        if word_embeds is None:
            word_embeds = self.word_embedding(input_ids)                 # (B, T, C)
        positions = torch.arange(T, device=input_ids.device)            # (T,)
        x = word_embeds + self.pos_embedding(positions)                 # (B, T, C) + (T, C)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = x + self.tk_type_embedding(token_type_ids)                  # (B, T, C)
        return self.dropout(self.layer_norm(x))
        ### END SOLUTION


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        C, F_ = config.hidden_size, config.intermediate_size
        self.self_attention = SelfAttention(config)
        # add & norm 1: project the merged heads, drop, add the residual, normalise.
        self.attention_dense = nn.Linear(C, C)
        self.attention_dropout = Dropout(config.hidden_dropout_prob)
        self.attention_layer_norm = nn.LayerNorm(C, eps=config.layer_norm_eps)
        # feed-forward: C -> F (GELU) -> C, then add & norm 2.
        self.interm_dense = nn.Linear(C, F_)
        self.out_dense = nn.Linear(F_, C)
        self.out_dropout = Dropout(config.hidden_dropout_prob)
        self.out_layer_norm = nn.LayerNorm(C, eps=config.layer_norm_eps)

    def forward(self, h: torch.Tensor, mask: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        """h: (B, T, C), mask: additive (B, 1, 1, T) -> (B, T, C).

        `extra` (B, T, C), when given, is added into the second residual, before LayerNorm 2:
        PALs (pals.py) put their task-specific term TS(h) there."""
        # Hint: the two "add & norm" steps of the module docstring: attention -> attention_dense ->
        # dropout -> + h -> LayerNorm 1 gives a; then interm_dense -> GELU -> out_dense -> dropout
        # -> + a (+ extra when given, no dropout) -> LayerNorm 2.
        ### BEGIN SOLUTION layer
        attn = self.attention_dense(self.self_attention(h, mask))       # (B, T, C)
        a = self.attention_layer_norm(h + self.attention_dropout(attn)) # (B, T, C)
        f = F.gelu(self.interm_dense(a))                                # (B, T, F)
        f = self.out_dense(f)                                           # (B, T, C)
        r = a + self.out_dropout(f)                                     # (B, T, C)
        if extra is not None:
            r = r + extra                                               # (B, T, C), no dropout (as the PALs code)
        return self.out_layer_norm(r)                                   # (B, T, C)
        ### END SOLUTION


class Pooler(nn.Module):
    """BERT's sentence vector: the final [CLS] state through a dense + tanh layer, which
    pre-training trained for next-sentence prediction (so some checkpoints, e.g. MiniLM, lack it)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(h[:, 0]))                          # (B, T, C) -> (B, C)
