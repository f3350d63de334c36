# honest variant: adamw adamw.py 0: HF-style loop, the denominator in place (clone, div_, sqrt_, add_)
for p, grad, exp_avg, exp_avg_sq, step in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
    if wd > 0.0:
        p.mul_(1.0 - lr * wd)
    exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    bias_correction1 = 1.0 - beta1 ** step
    bias_correction2 = 1.0 - beta2 ** step
    denom = exp_avg_sq.clone().div_(bias_correction2).sqrt_().add_(eps)
    p.addcdiv_(exp_avg, denom, value=-lr / bias_correction1)
