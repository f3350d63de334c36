# honest variant: adamw adamw.py 0: [top-import] `import math` at the file's top, √(1 − β2^t) by math.sqrt
# file top: import math
for p, g, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
    p.mul_(1 - lr * wd)
    m.mul_(beta1).add_(g, alpha=1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    bias_correction1 = 1 - beta1 ** t
    bias_correction2_sqrt = math.sqrt(1 - beta2 ** t)
    denom = (v.sqrt() / bias_correction2_sqrt).add_(eps)
    p.addcdiv_(m, denom, value=-lr / bias_correction1)
