# honest variant: layer bert/layers.py 0: one expression per add & norm, F.gelu, the extra term folded into a sum
a = self.attention_layer_norm(self.attention_dropout(self.attention_dense(self.self_attention(h, mask))) + h)
terms = [a, self.out_dropout(self.out_dense(F.gelu(self.interm_dense(a))))]
if extra is not None:
    terms.append(extra)
return self.out_layer_norm(sum(terms))
