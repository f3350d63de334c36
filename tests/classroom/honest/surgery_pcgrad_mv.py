# honest variant: surgery methods/pcgrad.py 0: all dots of the row at once with torch.mv (the Gram is symmetric)
for i, order in enumerate(orders):
    for j in order:
        if float(gram[j, j]) > 0.0:
            dots = torch.mv(gram, coef[i])           # (K,): (c_i G)_m for every m
            if float(dots[j]) < 0.0:
                coef[i, j] = coef[i, j] - dots[j] / gram[j, j]
                projections += 1
