# honest variant: surgery methods/gradvac.py 0: [numpy, top-import] `import numpy as np`: np.sqrt, np.clip, from_numpy
# file top: import numpy as np
G = gram.numpy()
c = np.copy(coef.numpy())
phi_hat = np.copy(targets.numpy())
for i in range(K):
    for j in orders[i]:
        norm_i = float(np.sqrt(max(c[i] @ G @ c[i], 0.0)))
        norm_j = float(np.sqrt(max(G[j, j], 0.0)))
        if norm_i == 0 or norm_j == 0:
            continue
        dot = float(c[i] @ G[:, j])
        phi = float(np.clip(dot / (norm_i * norm_j), -1.0, 1.0))
        target = float(np.clip(phi_hat[i, j], -TARGET_LIMIT, TARGET_LIMIT))
        if phi < target:
            c[i, j] += norm_i * target * np.sqrt(1 - phi ** 2) / (norm_j * np.sqrt(1 - target ** 2)) - dot / G[j, j]
            adjustments += 1
        phi_hat[i, j] = (1 - beta) * phi_hat[i, j] + beta * phi
coef = torch.from_numpy(c)
targets.copy_(torch.from_numpy(phi_hat))
