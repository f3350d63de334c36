# honest variant: multitask tasks/multitask.py 0: [type-hint] list[nn.Module], nn.Linear locals annotated
layers: list[nn.Module] = []
width: int = C_in
if kind == "mlp":
    for _ in range(hidden_layers):
        hidden: nn.Linear = nn.Linear(width, C)
        layers += [nn.Dropout(dropout), hidden, HEAD_ACTIVATIONS[activation]()]
        width = C
final: nn.Linear = nn.Linear(width, out)
layers += [nn.Dropout(dropout), final]
return nn.Sequential(*layers)
