# honest variant: multitask tasks/multitask.py 3: binary cross-entropy and squared error written out
if task == "sst":
    return F.cross_entropy(output.float(), labels.long(), reduction="mean")
if task == "para":
    z, y = output.float(), labels.float()
    return (torch.clamp(z, min=0) - z * y + torch.log1p(torch.exp(-z.abs()))).mean()
return ((output.float() - labels.float()) ** 2).mean()
