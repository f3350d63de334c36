# honest variant: adamw adamw.py 0: out-of-place torch functions, results written back with copy_
for i in range(len(params)):
    p, g = params[i], grads[i]
    m = torch.add(exp_avgs[i] * beta1, g, alpha=1 - beta1)
    v = torch.add(exp_avg_sqs[i] * beta2, torch.square(g), alpha=1 - beta2)
    exp_avgs[i].copy_(m)
    exp_avg_sqs[i].copy_(v)
    m_hat = m / (1 - beta1 ** steps[i])
    v_hat = v / (1 - beta2 ** steps[i])
    decayed = torch.mul(p, 1 - lr * wd)
    p.copy_(torch.addcdiv(decayed, m_hat, torch.sqrt(v_hat) + eps, value=-lr))
