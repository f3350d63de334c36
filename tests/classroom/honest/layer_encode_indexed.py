# honest variant: layer bert/model.py 0: the layers by index, the mask from ones_like
if attention_mask is None:
    attention_mask = torch.ones_like(x[..., 0], dtype=torch.long)
mask = extended_attention_mask(attention_mask, x.dtype)
h = x
for i in range(len(self.layers)):
    h = self.layers[i](h, mask, layer_extra(i, h, mask) if layer_extra is not None else None)
return {"last_hidden_state": h, "pooler_output": self.pooler(h)}
