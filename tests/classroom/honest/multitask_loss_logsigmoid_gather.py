# honest variant: multitask tasks/multitask.py 3: log-likelihoods picked with gather, BCE through F.logsigmoid
z = output.float()
if task == "sst":
    log_probs = torch.log_softmax(z, dim=1)
    return -log_probs.gather(1, labels.long().unsqueeze(1)).mean()
y = labels.float()
if task == "para":
    return -(y * F.logsigmoid(z) + (1 - y) * F.logsigmoid(-z)).mean()
return torch.mean(torch.square(z - y))
