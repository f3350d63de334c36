# honest variant: pals methods/pals.py 0: HF style, nn.GELU() as a module around the up-projection
projected = V_E(h)
context = g(projected, mask)
return nn.GELU()(V_D(context))
