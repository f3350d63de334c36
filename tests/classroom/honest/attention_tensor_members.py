# honest variant: attention bert/attention.py 0: [member] torch.Tensor's methods called through the class, k.mT
scores = torch.Tensor.matmul(q, k.mT)
scores = torch.Tensor.mul(scores, self.head_dim ** -0.5)
probs = torch.Tensor.softmax(torch.Tensor.add(scores, mask), -1)
y = torch.Tensor.matmul(dropout(probs, self.dropout_prob, self.training), v)
