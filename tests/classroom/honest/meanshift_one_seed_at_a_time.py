# honest variant: meanshift methods/meanshift.py 1: each seed climbed alone, a namespace for the state
import types
state = types.SimpleNamespace(centers=x.copy(), intensity=np.zeros(x.size, dtype=np.int64))
stop_thresh = 1e-3 * bandwidth
for s in range(x.size):
    c = x[s]
    for it in range(max_iter + 1):
        inside = np.abs(x - c) <= bandwidth
        new = np.where(inside, x, 0.0).sum() / inside.sum()
        moved = abs(new - c)
        c = new
        if moved <= stop_thresh or it == max_iter:
            break
    state.centers[s] = c
    state.intensity[s] = int(inside.sum())
found = {}
for center, n_in in zip(state.centers.tolist(), state.intensity.tolist()):
    found[center] = n_in
ranked = sorted(found.items(), key=lambda item: (item[1], item[0]), reverse=True)
kept = []
for center, _ in ranked:
    if all(abs(center - other) > bandwidth for other in kept):
        kept.append(center)
kept = np.array(kept)
labels = np.abs(x[:, None] - kept[None, :]).argmin(axis=1)
return kept, labels
