# honest variant: smart methods/smart.py 2: mul_ and add_ for the average, buffers zipped
beta = self.current_beta
params = dict(self.model.named_parameters())
for name, t in self.teacher.named_parameters():
    t.mul_(beta).add_(params[name], alpha=1 - beta)
for (name, t), (_, s) in zip(self.teacher.named_buffers(), self.model.named_buffers()):
    t.copy_(s)
