# honest variant: multitask tasks/multitask.py 2: [idiom] getattr(self, "pair_heads", default) for the head kind
kinds = getattr(self, "pair_heads", {})
module = self.heads[task]
logits = module(u) if kinds.get(task, "cross") in CROSS_HEADS else module(u, v)
return logits if task == "sst" else logits.view(-1)
