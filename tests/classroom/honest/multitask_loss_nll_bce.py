# honest variant: multitask tasks/multitask.py 3: F.nll_loss on log_softmax, F.binary_cross_entropy on sigmoid, mse_loss
logits = output.float()
if task == "sst":
    return F.nll_loss(F.log_softmax(logits, dim=-1), labels.long())
if task == "para":
    probs = torch.sigmoid(logits.double())          # float64: 1 - sigmoid(z) keeps its digits for large z
    return F.binary_cross_entropy(probs, labels.double()).float()
return F.mse_loss(logits, labels.float())
