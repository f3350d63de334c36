# honest variant: embeddings bert/layers.py 0: HF style, F.embedding, F.layer_norm, F.dropout(p, training=self.training)
if word_embeds is None:
    word_embeds = F.embedding(input_ids, self.word_embedding.weight, padding_idx=self.word_embedding.padding_idx)
position_ids = torch.arange(T, dtype=torch.long, device=input_ids.device)[None, :]
if token_type_ids is None:
    token_type_ids = torch.zeros(B, T, dtype=torch.long, device=input_ids.device)
embeddings = word_embeds + F.embedding(position_ids, self.pos_embedding.weight)
embeddings = embeddings + F.embedding(token_type_ids, self.tk_type_embedding.weight)
embeddings = F.layer_norm(embeddings, (embeddings.shape[-1],), self.layer_norm.weight, self.layer_norm.bias,
                          self.layer_norm.eps)
return F.dropout(embeddings, p=self.dropout.p, training=self.training)
