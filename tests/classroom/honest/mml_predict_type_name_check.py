# honest variant: mml methods/mml.py 1: [idiom] no active head: type(self).__name__ in the message
n_active = int(self.active.sum())
if n_active == 0:
    raise RuntimeError(f"{type(self).__name__}.predict: every head is eliminated")
y_hat = outputs.float()[:, self.active].sum(dim=1) / n_active            # (B, K)
return y_hat[:, 0] if self.num_outputs == 1 else torch.softmax(y_hat, dim=-1)
