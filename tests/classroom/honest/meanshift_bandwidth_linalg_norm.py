# honest variant: meanshift methods/meanshift.py 0: [numpy] distances by np.linalg.norm, np.partition
points = x.reshape(-1, 1)                                 # (n, 1): n points in one dimension
dist = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=-1)   # (n, n)
k = max(1, int(len(points) * quantile))
return float(np.partition(dist, k - 1, axis=1)[:, k - 1].mean())
