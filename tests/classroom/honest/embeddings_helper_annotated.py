# honest variant: embeddings bert/layers.py 0: [type-hint] an annotated lookup helper (table: nn.Embedding), F.embedding
def lookup(table: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    """(B, T) ids -> (B, T, C) rows of the table."""
    return F.embedding(ids, table.weight)
if token_type_ids is None:
    token_type_ids = input_ids.new_zeros(B, T)
summed = lookup(self.word_embedding, input_ids) if word_embeds is None else word_embeds
summed = summed + lookup(self.pos_embedding, torch.arange(T, device=input_ids.device).expand(B, T))
summed = summed + lookup(self.tk_type_embedding, token_type_ids)
return self.dropout(self.layer_norm(summed))
