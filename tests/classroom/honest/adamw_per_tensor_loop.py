# honest variant: adamw adamw.py 0: a plain loop over the tensors, bias-corrected m and v as tensors
for p, g, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
    p.mul_(1 - lr * wd)
    m.mul_(beta1).add_(g, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    m_hat = m / (1 - beta1 ** t)
    v_hat = v / (1 - beta2 ** t)
    p.sub_(lr * m_hat / (v_hat.sqrt() + eps))
