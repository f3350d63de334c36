# honest variant: surgery methods/pcgrad.py 0: [member] torch.Tensor.dot and torch.Tensor.item called through the class
for i in range(K):
    for j in orders[i]:
        g_jj = torch.Tensor.item(gram[j, j])
        if g_jj <= 0:
            continue
        dot = torch.Tensor.item(torch.Tensor.dot(coef[i], gram[:, j]))
        if dot < 0:
            coef[i, j] -= dot / g_jj
            projections += 1
