# honest variant: meanshift methods/meanshift.py 1: [member] dict.fromkeys for the ends, np.ndarray.argmin
ends, sizes = [], []
for seed in x.tolist():
    c = seed
    for it in range(max_iter + 1):
        inside = np.abs(x - c) <= bandwidth
        new = float(x[inside].mean())
        done = abs(new - c) <= 1e-3 * bandwidth or it == max_iter
        c = new
        if done:
            break
    ends.append(c)
    sizes.append(int(inside.sum()))
intensity = dict.fromkeys(ends, 0)
for c, size in zip(ends, sizes):
    intensity[c] = size                                   # a later seed ending on the same centre: its count
kept = []
for c in sorted(intensity, key=lambda v: (intensity[v], v), reverse=True):
    if not any(abs(c - other) <= bandwidth for other in kept):
        kept.append(c)
centers = np.asarray(kept, dtype=np.float64)
return centers, np.ndarray.argmin(np.abs(x[:, None] - centers[None, :]), axis=1)
