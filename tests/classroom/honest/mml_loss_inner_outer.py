# honest variant: mml methods/mml.py 0: per class torch.inner for the Gram, torch.outer of beta for the pair mask
beta = self.active.float()
pair_mask = torch.outer(beta, beta).triu(diagonal=1)           # (M, M): 1 where r < s, both active
total = torch.zeros((), dtype=torch.float32, device=beta.device)
for k in range(self.weight.shape[1]):
    f_k = self.weight[:, k, :].float()                         # (M, D)
    total = total + (torch.inner(f_k, f_k).abs() * pair_mask).sum()
return total
