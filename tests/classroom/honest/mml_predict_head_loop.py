# honest variant: mml methods/mml.py 1: a loop over the active heads, softmax through logsumexp
B, M, K = outputs.shape
acc = torch.zeros(B, K, dtype=torch.float32, device=outputs.device)
n_active = 0
for j in range(M):
    if self.active[j]:
        acc += outputs[:, j, :].float()
        n_active += 1
y_hat = acc / n_active
if K == 1:
    return y_hat[:, 0]
return torch.exp(y_hat - torch.logsumexp(y_hat, dim=-1, keepdim=True))
