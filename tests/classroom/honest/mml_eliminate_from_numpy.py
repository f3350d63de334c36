# honest variant: mml methods/mml.py 3: [numpy, top-import] `import numpy as np`, np.copy, torch.from_numpy
# file top: import numpy as np
bandwidth = max(float(estimate_bandwidth(np.copy(avgs), self.quantile)), self.min_bandwidth)
centers, labels = mean_shift(avgs, bandwidth)
if len(centers) < 2:
    return None
lowest = int(np.argmin(centers))
keep = torch.from_numpy(np.copy(labels == lowest))
kept, eliminated = ids[keep], ids[~keep]
self.heads.active[eliminated] = False
