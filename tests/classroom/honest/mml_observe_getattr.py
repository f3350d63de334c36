# honest variant: mml methods/mml.py 2: [idiom] γ by getattr(self, "momentum", 0.99), torch.where
gamma = getattr(self, "momentum", 0.99)
active = self.heads.active
if self.num_observed.item() == 0:
    updated = loss
else:
    updated = gamma * self.moving_avg + (1.0 - gamma) * loss
self.moving_avg.copy_(torch.where(active, updated, self.moving_avg))
