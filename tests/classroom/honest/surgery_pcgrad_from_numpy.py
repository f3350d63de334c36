# honest variant: surgery methods/pcgrad.py 0: [numpy] numpy imported in the block: np.copy, np.dot, then torch.from_numpy
import numpy as np
G = np.copy(gram.numpy())
c = np.copy(coef.numpy())
for i in range(K):
    for j in orders[i]:
        if G[j, j] > 0:
            d = np.dot(c[i], G[:, j])
            if d < 0:
                c[i, j] = c[i, j] - d / G[j, j]
                projections += 1
coef = torch.from_numpy(c)
