# honest variant: adamw adamw.py 1: the warm-up branch first, the fall clamped at 0 with max
if step < warmup_steps:
    return step / warmup_steps
if total_steps <= warmup_steps:
    return 0.0
return max(0.0, (total_steps - step) / (total_steps - warmup_steps))
