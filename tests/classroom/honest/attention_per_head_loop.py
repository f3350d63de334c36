# honest variant: attention bert/attention.py 0: a helper function, one head at a time
def attend(qh, kh, vh):
    """One head: (B, T, D) each -> its probabilities (B, T, T) and values."""
    s = qh.bmm(kh.transpose(1, 2)) / math.sqrt(qh.shape[-1])
    return F.softmax(s + mask[:, 0], dim=-1), vh
heads = []
for h in range(q.shape[1]):
    p, vh = attend(q[:, h], k[:, h], v[:, h])
    heads.append(dropout(p, self.dropout_prob, self.training).bmm(vh))
y = torch.stack(heads, dim=1)
