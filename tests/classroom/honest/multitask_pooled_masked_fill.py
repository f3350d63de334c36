# honest variant: multitask tasks/multitask.py 1: padding zeroed by masked_fill, the count as a float
hidden = out["last_hidden_state"]
padded = (attention_mask == 0).unsqueeze(-1)                     # (B, T, 1)
summed = hidden.masked_fill(padded, 0.0).sum(dim=1)              # (B, C)
count = attention_mask.sum(dim=1, keepdim=True).to(hidden.dtype)  # (B, 1)
return summed / count
