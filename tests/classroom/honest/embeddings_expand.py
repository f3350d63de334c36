# honest variant: embeddings bert/layers.py 0: positions expanded to (B, T), one sum
x = self.word_embedding(input_ids) if word_embeds is None else word_embeds
pos = torch.arange(T, device=input_ids.device).unsqueeze(0).expand(B, T)
types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
x = x + self.pos_embedding(pos) + self.tk_type_embedding(types)
return self.dropout(self.layer_norm(x))
