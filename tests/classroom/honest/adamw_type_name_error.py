# honest variant: adamw adamw.py 0: [idiom] a check whose message names type(self).__name__, as the given errors do
for i, p in enumerate(params):
    g, m, v = grads[i], exp_avgs[i], exp_avg_sqs[i]
    if g.shape != p.shape:
        raise RuntimeError(f"{type(self).__name__}: gradient {tuple(g.shape)} does not fit parameter {tuple(p.shape)}")
    p.mul_(1 - lr * wd)
    m.mul_(beta1).add_((1 - beta1) * g)
    v.mul_(beta2).add_((1 - beta2) * g.square())
    m_hat = m / (1 - beta1 ** steps[i])
    v_hat = v / (1 - beta2 ** steps[i])
    p.add_(-lr * m_hat / (v_hat.sqrt() + eps))
