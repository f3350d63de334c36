# honest variant: surgery methods/gradvac.py 0: [type-hint] annotated locals (torch.Tensor, float), torch.dot
for i in range(K):
    for j in orders[i]:
        row: torch.Tensor = coef[i]
        sq_i: float = float(torch.dot(row, torch.mv(gram, row)))
        sq_j: float = float(gram[j, j])
        if sq_i <= 0 or sq_j <= 0:
            continue
        norm_i, norm_j = math.sqrt(sq_i), math.sqrt(sq_j)
        dot: float = float(torch.dot(row, gram[:, j]))
        phi: float = float(torch.clamp(torch.tensor(dot / (norm_i * norm_j), dtype=torch.float64), -1.0, 1.0))
        goal: float = min(max(float(targets[i, j]), -TARGET_LIMIT), TARGET_LIMIT)
        if phi < goal:
            coef[i, j] += norm_i * goal * math.sqrt(1 - phi ** 2) / (norm_j * math.sqrt(1 - goal ** 2)) - dot / sq_j
            adjustments += 1
        targets[i, j] = (1 - beta) * targets[i, j] + beta * phi
