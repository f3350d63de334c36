# honest variant: surgery methods/pcgrad.py 0: torch.inner for the dot, 0-dim tensors kept as tensors
for i in range(K):
    for j in orders[i]:
        norm_sq = gram[j, j]
        if not norm_sq > 0:
            continue
        dot = torch.inner(coef[i], gram[:, j])
        if dot < 0:
            coef[i, j] -= dot / norm_sq
            projections += 1
