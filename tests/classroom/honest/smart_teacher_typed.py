# honest variant: smart methods/smart.py 2: [type-hint] annotated dicts (torch.nn.Parameter, torch.Tensor)
beta: float = self.current_beta
student_params: dict[str, torch.nn.Parameter] = dict(self.model.named_parameters())
student_buffers: dict[str, torch.Tensor] = dict(self.model.named_buffers())
for name, param in self.teacher.named_parameters():
    param.mul_(beta).add_(student_params[name], alpha=1.0 - beta)
for name, buf in self.teacher.named_buffers():
    buf.copy_(student_buffers[name])
