# honest variant: pals methods/pals.py 0: named steps, GELU with erf
down = V_E(h)
attended = g(down, mask)
up = V_D(attended)
return 0.5 * up * (1 + torch.erf(up * 0.7071067811865476))
