# honest variant: attention bert/attention.py 0: heads folded into the batch, the mask added by baddbmm
B, H, T, D = q.shape
qf, kf, vf = (t.reshape(B * H, T, D) for t in (q, k, v))
bias = mask.expand(B, H, T, T).reshape(B * H, T, T)
scores = torch.baddbmm(bias, qf, kf.transpose(1, 2), alpha=D ** -0.5)
probs = dropout(scores.softmax(-1), self.dropout_prob, self.training)
y = torch.bmm(probs, vf).view(B, H, T, D)
