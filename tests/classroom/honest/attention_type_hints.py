# honest variant: attention bert/attention.py 0: [type-hint] annotated locals (torch.Tensor, float), torch.softmax
scale: float = 1.0 / math.sqrt(self.head_dim)
scores: torch.Tensor = torch.matmul(q, k.transpose(-2, -1)) * scale
scores = scores + mask                                              # (B, H, T, T) + (B, 1, 1, T)
probs: torch.Tensor = torch.softmax(scores, dim=-1)
probs = dropout(probs, self.dropout_prob, self.training)
y: torch.Tensor = torch.matmul(probs, v)
