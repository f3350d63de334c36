# honest variant: smart methods/smart.py 1: the inf-norm by torch.linalg.vector_norm, the projection by clamp_
inf_norm = torch.linalg.vector_norm(g, ord=float("inf"), dim=(1, 2), keepdim=True)   # (B, 1, 1)
g = g / inf_norm.clamp(min=torch.finfo(g.dtype).tiny)
delta = (delta + self.eta * g).clamp_(-self.epsilon, self.epsilon).detach()
