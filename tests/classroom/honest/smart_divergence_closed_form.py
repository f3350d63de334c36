# honest variant: smart methods/smart.py 0: the Bernoulli closed form, the two KLs apart, a raise with a message
p, q = p.float(), q.float()
if task == "sts":
    return ((p - q) ** 2).mean()
if task == "para":
    sp, sq = torch.sigmoid(p), torch.sigmoid(q)
    return ((sp - sq) * (p - q)).mean()
if task != "sst":
    raise ValueError(f"divergence: unknown task {task!r} (see minbert/methods/smart.py)")
lp, lq = torch.log_softmax(p, dim=-1), torch.log_softmax(q, dim=-1)
kl_pq = (lp.exp() * (lp - lq)).sum(-1)
kl_qp = (lq.exp() * (lq - lp)).sum(-1)
return (kl_pq + kl_qp).mean()
