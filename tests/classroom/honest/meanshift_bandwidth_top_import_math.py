# honest variant: meanshift methods/meanshift.py 0: [top-import] `import math`: math.floor, math.fsum
# file top: import math
n = len(x)
k = max(1, math.floor(n * quantile))
kth = [sorted(abs(a - b) for b in x)[k - 1] for a in x]
return float(math.fsum(kth) / n)
