# honest variant: meanshift methods/meanshift.py 1: [type-hint] one seed at a time, annotated locals (np.ndarray)
stop: float = 1e-3 * bandwidth
found: dict[float, int] = {}
for seed in x:
    c: float = float(seed)
    for it in range(max_iter + 1):
        window: np.ndarray = x[np.abs(x - c) <= bandwidth]
        new: float = float(np.mean(window))
        moved: float = abs(new - c)
        c = new
        if moved <= stop or it == max_iter:
            break
    found[c] = len(window)
ranked = sorted(found.items(), key=lambda item: (item[1], item[0]), reverse=True)
kept: list[float] = []
for c, _ in ranked:
    if all(abs(c - other) > bandwidth for other in kept):
        kept.append(c)
centers: np.ndarray = np.array(kept)
labels: np.ndarray = np.argmin(np.abs(x[:, None] - centers[None, :]), axis=1)
return centers, labels
