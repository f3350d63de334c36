# honest variant: pals methods/pals.py 0: [idiom] a width check whose message names type(self).__name__, then F.gelu
projected = V_E(h)
if projected.shape[-1] != self.size:
    raise ValueError(f"{type(self).__name__}: V_E gives width {projected.shape[-1]}, expected {self.size}")
return F.gelu(V_D(g(projected, mask)))
