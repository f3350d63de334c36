# honest variant: surgery methods/gradvac.py 0: a helper for the two norms and the dot (torch.inner), early skips
def measure(i, j):
    """(|g_i'|, |g_j|, g_i'.g_j) from the Gram matrix, with g_i' = coef[i] . g."""
    c = coef[i]
    sq = float(torch.inner(c, torch.mv(gram, c)))
    return math.sqrt(max(sq, 0.0)), math.sqrt(max(float(gram[j, j]), 0.0)), float(torch.inner(c, gram[:, j]))
for i in range(K):
    for j in orders[i]:
        n_i, n_j, d = measure(i, j)
        if n_i == 0 or n_j == 0:
            continue
        cos = d / (n_i * n_j)
        cos = 1.0 if cos > 1.0 else (-1.0 if cos < -1.0 else cos)
        goal = float(targets[i, j])
        goal = TARGET_LIMIT if goal > TARGET_LIMIT else (-TARGET_LIMIT if goal < -TARGET_LIMIT else goal)
        if cos < goal:
            lift = n_i * goal * math.sqrt(1 - cos ** 2) / (n_j * math.sqrt(1 - goal ** 2))
            coef[i, j] += lift - d / float(gram[j, j])
            adjustments += 1
        targets[i, j] = (1 - beta) * targets[i, j] + beta * cos
