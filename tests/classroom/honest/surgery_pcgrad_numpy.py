# honest variant: surgery methods/pcgrad.py 0: [numpy, top-import] `import numpy as np`, numpy arrays, from_numpy
# file top: import numpy as np
G = gram.numpy()
c = np.copy(coef.numpy())
for i in range(K):
    for j in orders[i]:
        if not G[j, j] > 0:
            continue
        d = float(np.dot(c[i], G[:, j]))
        if d < 0:
            c[i, j] -= d / G[j, j]
            projections += 1
coef = torch.from_numpy(c)
