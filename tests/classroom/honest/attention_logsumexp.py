# honest variant: attention bert/attention.py 0: the softmax through logsumexp, the scale folded into q
scaled_q = q * self.head_dim ** -0.5
logits = scaled_q @ k.transpose(-2, -1) + mask
probs = torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))
y = dropout(probs, self.dropout_prob, self.training) @ v
