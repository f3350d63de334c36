# honest variant: attention bert/attention.py 0: einsum for both products, torch.softmax
scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.head_dim)
probs = torch.softmax(scores + mask, dim=-1)
probs = dropout(probs, self.dropout_prob, self.training)
y = torch.einsum("bhqk,bhkd->bhqd", probs, v)
