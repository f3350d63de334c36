# honest variant: pals methods/pals.py 0: [type-hint] an annotated helper (nn.Linear, SelfAttention, torch.Tensor)
def task_specific(x: torch.Tensor, encode: nn.Linear, attend: SelfAttention, decode: nn.Linear) -> torch.Tensor:
    """TS(x) = GELU(V_D g(V_E x)): (B, T, C) -> (B, T, C)."""
    small: torch.Tensor = encode(x)                                    # (B, T, S)
    return F.gelu(decode(attend(small, mask)))
return task_specific(h, V_E, g, V_D)
