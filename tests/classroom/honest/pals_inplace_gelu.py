# honest variant: pals methods/pals.py 0: GELU in place on a copy (div, erf_, add_, mul_)
up = V_D(g(V_E(h), mask))
phi = up.div(2 ** 0.5).erf_().add_(1.0).mul_(0.5)
return phi.mul_(up)
