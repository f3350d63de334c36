# honest variant: adamw adamw.py 0: [type-hint] annotated locals (torch.Tensor, float), torch functions out of place
for p, g, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
    decay: float = 1.0 - lr * wd
    new_m: torch.Tensor = torch.lerp(m, g, 1.0 - beta1)
    new_v: torch.Tensor = beta2 * v + (1.0 - beta2) * g * g
    m.copy_(new_m)
    v.copy_(new_v)
    m_hat: torch.Tensor = new_m / (1.0 - beta1 ** t)
    v_hat: torch.Tensor = new_v / (1.0 - beta2 ** t)
    p.copy_(p * decay - lr * m_hat / (torch.sqrt(v_hat) + eps))
