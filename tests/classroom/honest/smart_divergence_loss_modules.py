# honest variant: smart methods/smart.py 0: [loss-module] torch.nn.KLDivLoss both ways, torch.nn.MSELoss
p, q = p.float(), q.float()
if task == "sts":
    return torch.nn.MSELoss()(p, q)
if task == "para":
    log_p = torch.stack([F.logsigmoid(-p), F.logsigmoid(p)], dim=-1)    # log [1 - sigmoid(z), sigmoid(z)]
    log_q = torch.stack([F.logsigmoid(-q), F.logsigmoid(q)], dim=-1)
else:
    log_p, log_q = F.log_softmax(p, dim=-1), F.log_softmax(q, dim=-1)
kl = torch.nn.KLDivLoss(reduction="batchmean", log_target=True)
return kl(log_q, log_p) + kl(log_p, log_q)                             # KL(P || Q) + KL(Q || P)
