# honest variant: embeddings bert/layers.py 0: [idiom] F.layer_norm with getattr(ln, "eps", 1e-12)
ln = self.layer_norm
eps = getattr(ln, "eps", 1e-12)
x = word_embeds if word_embeds is not None else self.word_embedding(input_ids)
x = x + self.pos_embedding.weight[:T].unsqueeze(0)
if token_type_ids is not None:
    x = x + self.tk_type_embedding(token_type_ids)
else:
    x = x + self.tk_type_embedding.weight[0]
x = F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, eps)
return self.dropout(x)
