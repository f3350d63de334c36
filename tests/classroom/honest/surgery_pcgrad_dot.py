# honest variant: surgery methods/pcgrad.py 0: torch.dot and Python floats
for i in range(K):
    for j in orders[i]:
        g_jj = gram[j, j].item()
        if not g_jj > 0:
            continue
        dot = torch.dot(coef[i], gram[:, j]).item()
        if dot < 0:
            coef[i, j] = coef[i, j] - dot / g_jj
            projections = projections + 1
