# honest variant: multitask tasks/multitask.py 0: the layers appended one by one, nn.GELU() or nn.ReLU() by name
modules = []
width = C_in
for _ in range(hidden_layers if kind == "mlp" else 0):
    modules.append(nn.Dropout(p=dropout))
    modules.append(nn.Linear(width, C))
    modules.append(nn.GELU() if activation == "gelu" else nn.ReLU())
    width = C
modules.extend([nn.Dropout(p=dropout), nn.Linear(width, out)])
return nn.Sequential(*modules)
