# honest variant: embeddings bert/layers.py 0: a lookup helper with index_select, positions by narrow
def lookup(table, ids):
    """Rows of table.weight (V, C) at ids (B, T) -> (B, T, C)."""
    rows = torch.index_select(table.weight, 0, ids.reshape(-1))
    return rows.view(*ids.shape, table.weight.shape[1])
total = lookup(self.word_embedding, input_ids) if word_embeds is None else word_embeds
total = total + self.pos_embedding.weight.narrow(0, 0, T)
if token_type_ids is not None:
    total = total + lookup(self.tk_type_embedding, token_type_ids)
else:
    total = total + self.tk_type_embedding.weight[0]
return self.dropout(self.layer_norm(total))
