# honest variant: smart methods/smart.py 0: mt-dnn style, F.kl_div both ways with log targets, F.logsigmoid, F.mse_loss
p, q = p.float(), q.float()
if task == "sts":
    return F.mse_loss(p, q)
if task == "para":
    log_p = torch.stack([F.logsigmoid(-p), F.logsigmoid(p)], dim=-1)   # log [1 - sigmoid, sigmoid]
    log_q = torch.stack([F.logsigmoid(-q), F.logsigmoid(q)], dim=-1)
elif task == "sst":
    log_p, log_q = F.log_softmax(p, dim=-1), F.log_softmax(q, dim=-1)
else:
    raise ValueError(f"unknown task {task!r}")
kl_pq = F.kl_div(log_q, log_p, reduction="batchmean", log_target=True)   # KL(P || Q)
kl_qp = F.kl_div(log_p, log_q, reduction="batchmean", log_target=True)   # KL(Q || P)
return kl_pq + kl_qp
