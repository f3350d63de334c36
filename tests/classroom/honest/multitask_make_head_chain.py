# honest variant: multitask tasks/multitask.py 0: [member, top-import] `import itertools`, chain.from_iterable
# file top: import itertools
act = HEAD_ACTIVATIONS[activation]
n_hidden = hidden_layers if kind == "mlp" else 0
widths = [C_in] + [C] * n_hidden
blocks = ([nn.Dropout(dropout), nn.Linear(widths[i], C), act()] for i in range(n_hidden))
return nn.Sequential(*itertools.chain.from_iterable(blocks), nn.Dropout(dropout), nn.Linear(widths[-1], out))
