# honest variant: embeddings bert/layers.py 0: lookups as one-hot rows times the weight matrices
def rows(table, ids):
    onehot = F.one_hot(ids, num_classes=table.weight.shape[0]).to(table.weight.dtype)   # (B, T, V)
    return onehot @ table.weight                                                         # (B, T, C)
x = rows(self.word_embedding, input_ids) if word_embeds is None else word_embeds
x = x + rows(self.pos_embedding, torch.arange(T, device=input_ids.device))
tt = input_ids * 0 if token_type_ids is None else token_type_ids
x = x + rows(self.tk_type_embedding, tt)
return self.dropout(self.layer_norm(x))
