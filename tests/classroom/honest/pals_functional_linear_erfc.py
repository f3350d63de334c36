# honest variant: pals methods/pals.py 0: F.linear on the projections' weights, GELU through erfc
down = F.linear(h, V_E.weight, V_E.bias)
up = F.linear(g(down, mask), V_D.weight, V_D.bias)
return 0.5 * up * torch.erfc(-up / 2 ** 0.5)
