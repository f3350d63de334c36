# honest variant: surgery methods/gradvac.py 0: |g_i'|^2 through torch.outer, the roots in place (clamp_, sqrt_)
for i in range(K):
    for j in orders[i]:
        norm_i = (torch.outer(coef[i], coef[i]) * gram).sum().clamp_(min=0.0).sqrt_().item()
        norm_j = gram[j, j].clone().clamp_(min=0.0).sqrt_().item()
        if norm_i == 0.0 or norm_j == 0.0:
            continue
        dot = (coef[i] * gram[j]).sum().item()
        phi = torch.tensor(dot / (norm_i * norm_j), dtype=torch.float64).clamp_(-1.0, 1.0).item()
        target = torch.clamp(targets[i, j], -TARGET_LIMIT, TARGET_LIMIT).item()
        if phi < target:
            lift = norm_i * target * math.sqrt(1.0 - phi ** 2) / (norm_j * math.sqrt(1.0 - target ** 2))
            coef[i, j] += lift - dot / gram[j, j].item()
            adjustments += 1
        targets[i, j] = (1.0 - beta) * targets[i, j] + beta * phi
