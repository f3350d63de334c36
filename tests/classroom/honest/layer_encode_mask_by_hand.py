# honest variant: layer bert/model.py 0: the additive mask written out, a zip over the layers
B, T = x.shape[0], x.shape[1]
keep = x.new_ones(B, T) if attention_mask is None else attention_mask.to(x.dtype)
mask = (1.0 - keep[:, None, None, :]) * -10000.0               # (B, 1, 1, T)
hidden = x
for i, layer in zip(range(len(self.layers)), self.layers):
    extra = layer_extra(i, hidden, mask) if layer_extra else None
    hidden = layer(hidden, mask, extra=extra)
pooled = self.pooler(hidden)
return dict(last_hidden_state=hidden, pooler_output=pooled)
