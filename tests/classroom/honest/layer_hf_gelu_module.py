# honest variant: layer bert/layers.py 0: HF style, nn.GELU() as a module, F.dropout(p, training=self.training)
attention_output = self.attention_dense(self.self_attention(h, mask))
attention_output = F.dropout(attention_output, p=self.attention_dropout.p, training=self.training)
attention_output = self.attention_layer_norm(attention_output + h)
intermediate_output = nn.GELU()(self.interm_dense(attention_output))
layer_output = F.dropout(self.out_dense(intermediate_output), p=self.out_dropout.p, training=self.training)
if extra is not None:
    layer_output = layer_output + extra
return self.out_layer_norm(layer_output + attention_output)
