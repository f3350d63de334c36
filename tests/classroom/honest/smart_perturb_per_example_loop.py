# honest variant: smart methods/smart.py 1: one example at a time, a zero gradient left as it is
steps = []
for b in range(g.shape[0]):
    largest = g[b].abs().max()
    gb = g[b] / largest if largest > 0 else g[b]
    steps.append(gb)
g = torch.stack(steps)
delta = torch.minimum(torch.maximum(delta + self.eta * g, torch.full_like(g, -self.epsilon)),
                      torch.full_like(g, self.epsilon)).detach()
