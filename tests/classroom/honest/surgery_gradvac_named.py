# honest variant: surgery methods/gradvac.py 0: a row view, clamps written with min/max
for i in range(K):
    for j in orders[i]:
        ci = coef[i]
        norm_i = math.sqrt(max(float(ci @ gram @ ci), 0.0))
        norm_j = math.sqrt(max(float(gram[j, j]), 0.0))
        if norm_i == 0 or norm_j == 0:
            continue
        dot = float((ci * gram[:, j]).sum())
        phi = max(-1.0, min(1.0, dot / (norm_i * norm_j)))
        target = max(-TARGET_LIMIT, min(TARGET_LIMIT, float(targets[i, j])))
        if phi < target:
            a = norm_i * target * math.sqrt(1 - phi * phi) / (norm_j * math.sqrt(1 - target * target))
            coef[i, j] += a - dot / float(gram[j, j])
            adjustments += 1
        targets[i, j] = (1 - beta) * targets[i, j] + beta * phi
