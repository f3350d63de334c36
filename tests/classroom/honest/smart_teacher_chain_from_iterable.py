# honest variant: smart methods/smart.py 2: [member] the student's tensors by itertools.chain.from_iterable
import itertools
beta = self.current_beta
student = dict(itertools.chain.from_iterable([self.model.named_parameters(), self.model.named_buffers()]))
for name, t in self.teacher.named_parameters():
    t.mul_(beta).add_((1 - beta) * student[name])
for name, b in self.teacher.named_buffers():
    b.copy_(student[name])
