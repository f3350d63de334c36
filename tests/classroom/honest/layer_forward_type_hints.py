# honest variant: layer bert/layers.py 0: [type-hint] sublayers as annotated locals (SelfAttention, nn.Linear)
attend: SelfAttention = self.self_attention
up: nn.Linear = self.interm_dense
down: nn.Linear = self.out_dense
norm1: nn.LayerNorm = self.attention_layer_norm
norm2: nn.LayerNorm = self.out_layer_norm
a: torch.Tensor = norm1(h + self.attention_dropout(self.attention_dense(attend(h, mask))))
ffn: torch.Tensor = self.out_dropout(down(F.gelu(up(a))))
residual: torch.Tensor = a + ffn if extra is None else a + ffn + extra
return norm2(residual)
