# honest variant: smart methods/smart.py 0: Bernoulli KL as cross-entropy minus entropy (F.binary_cross_entropy), fp64
if task == "sts":
    return (p.float() - q.float()).square().mean()
if task == "para":
    sp, sq = torch.sigmoid(p.double()), torch.sigmoid(q.double())
    kl_pq = F.binary_cross_entropy(sq, sp) - F.binary_cross_entropy(sp, sp)   # CE(P, Q) - H(P)
    kl_qp = F.binary_cross_entropy(sp, sq) - F.binary_cross_entropy(sq, sq)
    return (kl_pq + kl_qp).float()
P, Q = F.softmax(p.float(), dim=-1), F.softmax(q.float(), dim=-1)
log_ratio = F.log_softmax(p.float(), dim=-1) - F.log_softmax(q.float(), dim=-1)
return ((P - Q) * log_ratio).sum(dim=-1).mean()
