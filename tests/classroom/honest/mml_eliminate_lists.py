# honest variant: mml methods/mml.py 3: the lowest centre by min over indices, the keep mask from a list
bandwidth = estimate_bandwidth(avgs, quantile=self.quantile)
if bandwidth < self.min_bandwidth:
    bandwidth = self.min_bandwidth
centers, labels = mean_shift(avgs, bandwidth)
if len(centers) < 2:
    return None
lowest = min(range(len(centers)), key=lambda c: centers[c])
keep = torch.tensor([int(label) == lowest for label in labels], dtype=torch.bool)
kept = ids[keep]
eliminated = ids[~keep]
for j in eliminated.tolist():
    active[j] = False
