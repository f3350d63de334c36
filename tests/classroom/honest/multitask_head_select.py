# honest variant: multitask tasks/multitask.py 2: the module looked up once, the one-output tasks by select
module = self.heads[task]
logits = module(u) if v is None else module(u, v)
if task in ("para", "sts"):
    logits = logits.select(-1, 0)
return logits
