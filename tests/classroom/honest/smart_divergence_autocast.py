# honest variant: smart methods/smart.py 0: [idiom] fp32 under torch.autocast(p.device.type, enabled=False)
with torch.autocast(p.device.type, enabled=False):
    p, q = p.float(), q.float()
    if task == "sts":
        return (p - q).pow(2).mean()
    if task == "para":
        zeros = torch.zeros_like(p).unsqueeze(-1)
        p = torch.cat([zeros, p.unsqueeze(-1)], dim=-1)                      # softmax([0, z]) = [1 - sigmoid, sigmoid]
        q = torch.cat([zeros, q.unsqueeze(-1)], dim=-1)
    lp, lq = torch.log_softmax(p, dim=-1), torch.log_softmax(q, dim=-1)
    return ((lp.exp() - lq.exp()) * (lp - lq)).sum(dim=-1).mean()
