# honest variant: smart methods/smart.py 2: torch.lerp_ towards the student, parameters zipped in order
beta = self.current_beta
for t, s in zip(self.teacher.parameters(), self.model.parameters()):
    t.lerp_(s, 1.0 - beta)                                            # t + (1 - β)(s - t) = β t + (1 - β) s
for t, s in zip(self.teacher.buffers(), self.model.buffers()):
    t.copy_(s)
