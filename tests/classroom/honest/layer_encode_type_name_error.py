# honest variant: layer bert/model.py 0: [idiom] a shape check whose message names type(self).__name__
if x.dim() != 3:
    raise ValueError(f"{type(self).__name__}.encode: expected x of shape (B, T, C), got {tuple(x.shape)}")
B, T, _ = x.shape
if attention_mask is None:
    attention_mask = x.new_ones(B, T)
mask = extended_attention_mask(attention_mask, x.dtype)
for i, layer in enumerate(self.layers):
    x = layer(x, mask, None if layer_extra is None else layer_extra(i, x, mask))
return {"last_hidden_state": x, "pooler_output": self.pooler(x)}
