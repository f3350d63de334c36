# honest variant: adamw adamw.py 1: the schedule with named pieces
if warmup_steps > 0 and step < warmup_steps:
    return float(step) / float(warmup_steps)
remaining = total_steps - step
span = max(1, total_steps - warmup_steps)
return max(0.0, remaining / span)
