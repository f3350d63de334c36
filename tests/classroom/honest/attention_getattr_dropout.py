# honest variant: attention bert/attention.py 0: [idiom] options read with getattr(self, "name", default), F.dropout
p_drop = getattr(self, "dropout_prob", 0.0)
scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
probs = F.softmax(scores + mask, dim=-1)
probs = F.dropout(probs, p=p_drop, training=getattr(self, "training", False))
y = probs @ v
