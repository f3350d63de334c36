# honest variant: smart methods/smart.py 1: [idiom] a shape check naming type(self).__name__, amax and torch.where
if g.shape != delta.shape:
    raise RuntimeError(f"{type(self).__name__}.perturb: gradient {tuple(g.shape)} differs from δ {tuple(delta.shape)}")
largest = g.abs().amax(dim=(1, 2), keepdim=True)
g = torch.where(largest > 0, g / largest, g)
delta = (delta + self.eta * g).clamp(min=-self.epsilon, max=self.epsilon).detach()
