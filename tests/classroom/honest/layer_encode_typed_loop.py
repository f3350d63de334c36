# honest variant: layer bert/model.py 0: [type-hint] annotated locals and loop state (torch.Tensor, BertLayer)
attention_mask = attention_mask if attention_mask is not None else torch.ones(x.shape[:2], device=x.device)
mask: torch.Tensor = extended_attention_mask(attention_mask, x.dtype)
hidden: torch.Tensor = x
for index, block in enumerate(self.layers):
    layer: BertLayer = block
    term: torch.Tensor | None = None if layer_extra is None else layer_extra(index, hidden, mask)
    hidden = layer(hidden, mask, term)
return {"last_hidden_state": hidden, "pooler_output": self.pooler(hidden)}
