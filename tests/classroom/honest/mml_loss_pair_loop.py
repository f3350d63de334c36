# honest variant: mml methods/mml.py 0: a loop over the pairs of active heads
w = self.weight.float()                                  # (M, K, D)
total = torch.zeros((), device=w.device)
for r in range(M):
    for s in range(r + 1, M):
        if bool(self.active[r]) and bool(self.active[s]):
            total = total + (w[r] * w[s]).sum(-1).abs().sum()
return total
