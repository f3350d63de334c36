# honest variant: layer bert/layers.py 0: GELU written with erf, the residual added first
a = self.attention_dense(self.self_attention(h, mask))
a = self.attention_layer_norm(self.attention_dropout(a) + h)
hidden = self.interm_dense(a)
hidden = 0.5 * hidden * (1.0 + torch.erf(hidden / 2.0 ** 0.5))   # exact GELU
out = self.out_dropout(self.out_dense(hidden)) + a
if extra is not None:
    out = out + extra
return self.out_layer_norm(out)
