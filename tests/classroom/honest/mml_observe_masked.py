# honest variant: mml methods/mml.py 2: the first call apart, a boolean-mask assignment
if int(self.num_observed) == 0:
    new = loss.clone()
else:
    new = self.momentum * self.moving_avg + (1 - self.momentum) * loss
self.moving_avg[self.heads.active] = new[self.heads.active]
