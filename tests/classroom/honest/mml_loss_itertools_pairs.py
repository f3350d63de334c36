# honest variant: mml methods/mml.py 0: [top-import] `import itertools` at the top, itertools.combinations
# file top: import itertools
w = self.weight.float()                                              # (M, K, D)
total = w.new_zeros(())
for r, s in itertools.combinations(range(M), 2):
    if self.active[r] and self.active[s]:
        total = total + torch.abs((w[r] * w[s]).sum(dim=-1)).sum()
return total
