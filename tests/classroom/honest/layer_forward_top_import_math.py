# honest variant: layer bert/layers.py 0: [top-import] `import math` at the file's top, GELU by erf(x/√2)
# file top: import math
attended = self.attention_dense(self.self_attention(h, mask))
a = self.attention_layer_norm(h + self.attention_dropout(attended))
u = self.interm_dense(a)
u = u * 0.5 * (1.0 + torch.erf(u / math.sqrt(2.0)))
out = a + self.out_dropout(self.out_dense(u))
if extra is not None:
    out += extra
return self.out_layer_norm(out)
