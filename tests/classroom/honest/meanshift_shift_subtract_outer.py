# honest variant: meanshift methods/meanshift.py 1: np.subtract.outer for every window, a list of the seeds still moving
stop_thresh = 1e-3 * bandwidth
centers = x.copy()
counts = np.zeros(len(x), dtype=np.int64)
climbing = np.arange(len(x))
for it in range(max_iter + 1):
    inside = np.abs(np.subtract.outer(centers[climbing], x)) <= bandwidth     # (S, n)
    n_in = inside.sum(axis=1)
    new = (inside * x).sum(axis=1) / n_in
    shift = np.abs(new - centers[climbing])
    centers[climbing] = new
    counts[climbing] = n_in
    if it == max_iter:
        break
    climbing = climbing[shift > stop_thresh]
    if climbing.size == 0:
        break
# one entry per distinct centre (the last seed's count), ranked by (count, centre) descending
last = {}
for c, m in zip(centers.tolist(), counts.tolist()):
    last[c] = m
ranked = np.array(sorted(last, key=lambda c: (last[c], c), reverse=True))
suppressed = np.zeros(len(ranked), dtype=bool)
close = np.abs(np.subtract.outer(ranked, ranked)) <= bandwidth
for i in range(len(ranked)):
    if not suppressed[i]:
        suppressed[i + 1:] |= close[i, i + 1:]
kept = ranked[~suppressed]
labels = np.argmin(np.abs(np.subtract.outer(x, kept)), axis=1)
return kept, labels
