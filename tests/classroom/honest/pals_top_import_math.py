# honest variant: pals methods/pals.py 0: [top-import] `import math` at the file's top, GELU by erf and math.sqrt
# file top: import math
s = g(V_E(h), mask)
z = V_D(s)
return z * 0.5 * (1.0 + torch.erf(z / math.sqrt(2.0)))
