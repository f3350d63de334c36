# honest variant: smart methods/smart.py 2: through the state dicts (shared storage): params averaged, buffers copied
beta = self.current_beta
teacher_state = self.teacher.state_dict()
names = {name for name, _ in self.teacher.named_parameters()}
for name, value in self.model.state_dict().items():
    if name in names:
        teacher_state[name].mul_(beta).add_((1.0 - beta) * value)
    else:
        teacher_state[name].copy_(value)
