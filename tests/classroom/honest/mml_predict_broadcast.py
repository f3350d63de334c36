# honest variant: mml methods/mml.py 1: the weighted mean by broadcasting
beta = self.active.float()
y_hat = (outputs.float() * beta[None, :, None]).sum(1) / beta.sum()
if self.num_outputs == 1:
    return y_hat.squeeze(-1)
return F.softmax(y_hat, dim=-1)
