# honest variant: multitask tasks/multitask.py 1: [type-hint] annotated tensors, the sum and count by matmul
hidden: torch.Tensor = out["last_hidden_state"]                      # (B, T, C)
weights: torch.Tensor = attention_mask.to(hidden.dtype)              # (B, T)
total: torch.Tensor = torch.bmm(weights.unsqueeze(1), hidden).squeeze(1)   # (B, C)
count: torch.Tensor = weights.sum(dim=1, keepdim=True)               # (B, 1)
return total / count
