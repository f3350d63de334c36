# honest variant: layer bert/model.py 0: the mask with torch.where, a helper for one layer, a while loop
if attention_mask is None:
    attention_mask = torch.ones(x.shape[0], x.shape[1], dtype=torch.long, device=x.device)
real = attention_mask.unsqueeze(1).unsqueeze(2) > 0
mask = torch.where(real, 0.0, -10000.0).to(x.dtype)
def step(i, h):
    extra = None if layer_extra is None else layer_extra(i, h, mask)
    return self.layers[i](h, mask, extra)
i = 0
while i < len(self.layers):
    x = step(i, x)
    i += 1
return {"last_hidden_state": x, "pooler_output": self.pooler(x)}
