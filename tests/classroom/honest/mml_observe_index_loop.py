# honest variant: mml methods/mml.py 2: one head at a time, Python numbers for the rule
first = self.num_observed.item() == 0
gamma = self.momentum
for j in range(loss.shape[0]):
    if not self.heads.active[j]:
        continue                                               # eliminated: keep its last average
    if first:
        self.moving_avg[j] = loss[j]
    else:
        self.moving_avg[j] = gamma * self.moving_avg[j] + (1 - gamma) * loss[j]
