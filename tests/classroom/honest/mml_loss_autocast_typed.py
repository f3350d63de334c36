# honest variant: mml methods/mml.py 0: [idiom, type-hint] its own torch.autocast(w.device.type, enabled=False)
w: torch.Tensor = self.weight
with torch.autocast(w.device.type, enabled=False):
    f: torch.Tensor = w.float().permute(1, 0, 2)                      # (K, M, D): per class, one row per head
    gram: torch.Tensor = f @ f.transpose(1, 2)                        # (K, M, M)
    beta: torch.Tensor = self.active.float()
    pairs: torch.Tensor = torch.triu(beta[:, None] * beta[None, :], diagonal=1)   # r < s, both active
    return (gram.abs() * pairs).sum()
