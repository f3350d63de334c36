# honest variant: meanshift methods/meanshift.py 1: [numpy] all seeds at once: np.fabs, np.copy, np.flatnonzero
means = np.copy(x)
counts = np.zeros(x.size, dtype=np.int64)
moving = np.ones(x.size, dtype=bool)
for it in range(max_iter + 1):
    idx = np.flatnonzero(moving)
    if idx.size == 0:
        break
    window = np.fabs(x[None, :] - means[idx, None]) <= bandwidth           # (m, n)
    counts[idx] = window.sum(axis=1)
    new = np.array([np.mean(x[row]) for row in window])
    shift = np.fabs(new - means[idx])
    means[idx] = new
    moving[idx[(shift <= 1e-3 * bandwidth) | (it == max_iter)]] = False
best = {}
for c, n_in in zip(means.tolist(), counts.tolist()):
    best[c] = n_in
kept = []
for c, _ in sorted(best.items(), key=lambda cv: (cv[1], cv[0]), reverse=True):
    if all(np.fabs(c - other) > bandwidth for other in kept):
        kept.append(c)
centers = np.array(kept)
return centers, np.argmin(np.fabs(x[:, None] - centers[None, :]), axis=1)
