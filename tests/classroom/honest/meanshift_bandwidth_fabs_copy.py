# honest variant: meanshift methods/meanshift.py 0: [numpy] np.fabs, np.copy and np.sort on the distance matrix
n = x.size
k = max(1, int(n * quantile))
dist = np.fabs(np.subtract.outer(x, x))                   # (n, n)
ordered = np.sort(np.copy(dist), axis=1)                  # each row ascending; column 0 is the point itself
return float(np.mean(ordered[:, k - 1]))
