# honest variant: attention bert/attention.py 0: [idiom] softmax in fp32: torch.autocast(q.device.type, enabled=False)
with torch.autocast(q.device.type, enabled=False):
    scores = q.float() @ k.float().transpose(-1, -2)
    scores = scores / math.sqrt(self.head_dim) + mask.float()
    probs = scores.softmax(dim=-1).to(q.dtype)
y = dropout(probs, self.dropout_prob, self.training) @ v
