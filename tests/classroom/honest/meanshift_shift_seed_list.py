# honest variant: meanshift methods/meanshift.py 1: a helper that climbs one seed, np.mean of the window, plain lists
def climb(seed):
    """Move one seed to the mean of its window until it moves by <= 1e-3 * bandwidth; (centre, points in window)."""
    c = seed
    for it in range(max_iter + 1):
        window = x[np.abs(x - c) <= bandwidth]
        new = float(np.mean(window))
        done = abs(new - c) <= 1e-3 * bandwidth or it == max_iter
        c = new
        if done:
            return c, len(window)
    return c, len(window)
modes = {}
for seed in x.tolist():
    c, n_in = climb(seed)
    modes[c] = n_in
ranked = sorted(modes.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
kept = []
for c, _ in ranked:
    if not any(abs(c - other) <= bandwidth for other in kept):
        kept.append(c)
kept = np.asarray(kept, dtype=np.float64)
labels = np.array([int(np.argmin(np.abs(kept - v))) for v in x], dtype=np.int64)
return kept, labels
