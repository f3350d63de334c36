# honest variant: embeddings bert/layers.py 0: [type-hint] every module and tensor named with its torch class
words: nn.Embedding = self.word_embedding
positions: nn.Embedding = self.pos_embedding
types: nn.Embedding = self.tk_type_embedding
norm: nn.LayerNorm = self.layer_norm
x: torch.Tensor = words(input_ids) if word_embeds is None else word_embeds
position_ids: torch.Tensor = torch.arange(T, device=input_ids.device)
type_ids: torch.Tensor = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
x = x + positions(position_ids)[None] + types(type_ids)
return self.dropout(norm(x))
