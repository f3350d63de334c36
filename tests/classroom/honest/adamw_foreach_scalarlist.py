# honest variant: adamw adamw.py 0: [foreach] torch._foreach_ ops over the group, bias corrections as per-tensor lists
torch._foreach_mul_(params, 1.0 - lr * wd)
torch._foreach_lerp_(exp_avgs, grads, 1.0 - beta1)
torch._foreach_mul_(exp_avg_sqs, beta2)
torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1.0 - beta2)
bias_correction1 = [1.0 - beta1 ** t for t in steps]
bias_correction2_sqrt = [(1.0 - beta2 ** t) ** 0.5 for t in steps]
denom = torch._foreach_sqrt(exp_avg_sqs)
torch._foreach_div_(denom, bias_correction2_sqrt)
torch._foreach_add_(denom, eps)
step_sizes = [-lr / bc for bc in bias_correction1]
torch._foreach_addcdiv_(params, exp_avgs, denom, step_sizes)
