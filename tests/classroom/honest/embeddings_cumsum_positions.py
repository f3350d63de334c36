# honest variant: embeddings bert/layers.py 0: positions by cumsum of ones, the three terms summed with torch.stack
position_ids = torch.ones_like(input_ids).cumsum(dim=1) - 1              # (B, T): 0..T-1 in every row
if token_type_ids is None:
    token_type_ids = torch.full_like(input_ids, 0)
if word_embeds is None:
    word_embeds = self.word_embedding(input_ids)
terms = torch.stack([word_embeds, self.pos_embedding(position_ids), self.tk_type_embedding(token_type_ids)])
return self.dropout(self.layer_norm(terms.sum(dim=0)))
