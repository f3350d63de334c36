# honest variant: adamw adamw.py 0: [foreach] torch's foreach layout: step sizes and √(1 − β2^t) as lists
torch._foreach_mul_(params, 1 - lr * wd)
torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
torch._foreach_mul_(exp_avg_sqs, beta2)
torch._foreach_addcmul_(exp_avg_sqs, grads, grads, value=1 - beta2)
step_size = [lr / (1 - beta1 ** t) for t in steps]
root_correction = [(1 - beta2 ** t) ** 0.5 for t in steps]
denom = torch._foreach_sqrt(exp_avg_sqs)
torch._foreach_div_(denom, root_correction)
torch._foreach_add_(denom, eps)
update = torch._foreach_div(exp_avgs, denom)
torch._foreach_mul_(update, step_size)
torch._foreach_sub_(params, update)
