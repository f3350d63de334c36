# honest variant: meanshift methods/meanshift.py 0: np.argpartition and np.take_along_axis
n = x.shape[0]
k = max(1, int(n * quantile))
dist = np.abs(x.reshape(n, 1) - x.reshape(1, n))
order = np.argpartition(dist, k - 1, axis=1)[:, k - 1:k]     # (n, 1) index of the k-th nearest
kth = np.take_along_axis(dist, order, axis=1)[:, 0]
return float(kth.sum() / n)
