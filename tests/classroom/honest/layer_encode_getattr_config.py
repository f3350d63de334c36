# honest variant: layer bert/model.py 0: [idiom] getattr(obj, "name", default) for the count and the dtype
n_layers = getattr(self.config, "num_hidden_layers", len(self.layers))
dtype = getattr(x, "dtype", torch.float32)
if attention_mask is None:
    attention_mask = torch.ones(x.shape[0], x.shape[1], dtype=torch.long, device=x.device)
mask = extended_attention_mask(attention_mask, dtype)
h = x
for i in range(n_layers):
    extra = layer_extra(i, h, mask) if layer_extra is not None else None
    h = self.layers[i](h, mask, extra)
return {"last_hidden_state": h, "pooler_output": self.pooler(h)}
