# honest variant: smart methods/smart.py 1: [top-import] `import math` at the file's top, ord=math.inf
# file top: import math
norms = torch.linalg.vector_norm(g, ord=math.inf, dim=(-2, -1), keepdim=True)     # (B, 1, 1)
g = torch.where(norms > 0, g / norms, torch.zeros_like(g))
delta = torch.clamp(delta + self.eta * g, -self.epsilon, self.epsilon).detach()
