# honest variant: pals methods/pals.py 0: [member] nn.Linear.forward and nn.GELU.forward called through the classes
down = nn.Linear.forward(V_E, h)
up = nn.Linear.forward(V_D, g(down, mask))
return nn.GELU.forward(nn.GELU(), up)
