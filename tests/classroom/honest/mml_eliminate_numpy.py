# honest variant: mml methods/mml.py 3: numpy for the cluster choice (np.argmin, np.equal), torch.as_tensor for the mask
import numpy as np
bandwidth = float(np.maximum(estimate_bandwidth(avgs, self.quantile), self.min_bandwidth))
centers, labels = mean_shift(avgs, bandwidth)
if np.size(centers) < 2:
    return None
keep = torch.as_tensor(np.equal(labels, np.argmin(centers)))
kept, eliminated = ids[keep], ids[~keep]
active[eliminated] = False
