# honest variant: embeddings bert/layers.py 0: LayerNorm written out with in-place ops (sub_, add_, sqrt_, div_, mul_)
words = self.word_embedding(input_ids) if word_embeds is None else word_embeds
types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
x = words + self.pos_embedding(torch.arange(T, device=input_ids.device)) + self.tk_type_embedding(types)
mean = x.mean(dim=-1, keepdim=True)
var = x.var(dim=-1, keepdim=True, unbiased=False)
x.sub_(mean).div_(var.add_(self.layer_norm.eps).sqrt_())
x.mul_(self.layer_norm.weight).add_(self.layer_norm.bias)
return self.dropout(x)
