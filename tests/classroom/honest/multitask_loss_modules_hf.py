# honest variant: multitask tasks/multitask.py 3: [loss-module] the losses as modules, as HF's BERT writes them
logits = output.float()
if task == "sst":
    loss_fct = nn.CrossEntropyLoss()
    return loss_fct(logits.view(-1, logits.shape[-1]), labels.view(-1).long())
if task == "para":
    loss_fct = nn.BCEWithLogitsLoss()
    return loss_fct(logits.view(-1), labels.view(-1).float())
loss_fct = nn.MSELoss()
return loss_fct(logits.view(-1), labels.view(-1).float())
