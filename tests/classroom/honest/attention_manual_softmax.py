# honest variant: attention bert/attention.py 0: the softmax written out (max subtracted), an assert naming the file
scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / self.head_dim ** 0.5) + mask
scores = scores - scores.amax(dim=-1, keepdim=True)
weights = scores.exp()
probs = weights / weights.sum(dim=-1, keepdim=True)
assert probs.shape[-1] == k.shape[-2], f"softmax over {probs.shape[-1]} keys in minbert/bert/attention.py, expected {k.shape[-2]}"
y = dropout(probs, self.dropout_prob, self.training) @ v
