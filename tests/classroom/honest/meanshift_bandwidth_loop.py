# honest variant: meanshift methods/meanshift.py 0: one point at a time
n = x.size
k = max(1, int(n * quantile))
kth = []
for i in range(n):
    d = np.sort(np.abs(x - x[i]))
    kth.append(d[k - 1])
return float(np.mean(kth))
