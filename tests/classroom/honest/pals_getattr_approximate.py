# honest variant: pals methods/pals.py 0: [idiom] F.gelu(approximate=getattr(self, "approximate", "none"))
approximate = getattr(self, "approximate", "none")
return F.gelu(V_D(g(V_E(h), mask)), approximate=approximate)
