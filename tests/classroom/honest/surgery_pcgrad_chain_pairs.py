# honest variant: surgery methods/pcgrad.py 0: [member, top-import] `import itertools`, chain.from_iterable
# file top: import itertools
visits = itertools.chain.from_iterable([(i, j) for j in order] for i, order in enumerate(orders))
for i, j in visits:
    norm_sq = float(gram[j, j])
    if norm_sq > 0:
        dot = float(coef[i] @ gram[:, j])
        if dot < 0:
            coef[i, j] = coef[i, j] - dot / norm_sq
            projections += 1
