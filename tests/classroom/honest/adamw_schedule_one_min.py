# honest variant: adamw adamw.py 1: the two lines as one min (the rise is below the fall before warmup ends)
rise = step / warmup_steps if warmup_steps > 0 else 1.0
fall = (total_steps - step) / max(1, total_steps - warmup_steps)
return max(0.0, min(rise, fall))
