# honest variant: meanshift methods/meanshift.py 0: np.subtract.outer for the distances, np.partition for the k-th
k = max(1, int(len(x) * quantile))
distances = np.abs(np.subtract.outer(x, x))                  # (n, n), 0 on the diagonal
kth = np.partition(distances, k - 1, axis=1)[:, k - 1]       # the k-th smallest per row, self first
return float(np.mean(kth))
