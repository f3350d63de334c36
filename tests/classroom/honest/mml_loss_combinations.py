# honest variant: mml methods/mml.py 0: the pairs r < s from torch.combinations, both heads active
w = self.weight.float()                                        # (M, K, D)
pairs = torch.combinations(torch.arange(M, device=w.device), r=2)   # (M(M-1)/2, 2), r < s
both = self.active[pairs[:, 0]] & self.active[pairs[:, 1]]
r, s = pairs[both, 0], pairs[both, 1]
return (w[r] * w[s]).sum(dim=-1).abs().sum()                   # |f_k^r . f_k^s| over pairs and classes
