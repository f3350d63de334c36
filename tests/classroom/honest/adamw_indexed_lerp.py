# honest variant: adamw adamw.py 0: by index, lerp for m, addcdiv for the step
for i, p in enumerate(params):
    t = steps[i]
    if wd:
        p.data.mul_(1.0 - lr * wd)
    exp_avgs[i].lerp_(grads[i], 1.0 - beta1)
    exp_avg_sqs[i].mul_(beta2).add_((1.0 - beta2) * grads[i] * grads[i])
    denom = (exp_avg_sqs[i] / (1.0 - beta2 ** t)).sqrt().add_(eps)
    p.addcdiv_(exp_avgs[i], denom, value=-lr / (1.0 - beta1 ** t))
