# honest variant: layer bert/layers.py 0: F.linear and F.layer_norm on the weights, GELU as x·Φ(x) with ndtr
def add_norm(x, residual, norm):
    return F.layer_norm(x + residual, x.shape[-1:], norm.weight, norm.bias, norm.eps)
att = F.linear(self.self_attention(h, mask), self.attention_dense.weight, self.attention_dense.bias)
a = add_norm(self.attention_dropout(att), h, self.attention_layer_norm)
u = F.linear(a, self.interm_dense.weight, self.interm_dense.bias)
u = u * torch.special.ndtr(u)                                   # GELU(u) = u·Φ(u)
f = self.out_dropout(F.linear(u, self.out_dense.weight, self.out_dense.bias))
return add_norm(f if extra is None else f + extra, a, self.out_layer_norm)
