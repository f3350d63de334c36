# honest variant: multitask tasks/multitask.py 3: [loss-module, idiom] loss modules under autocast off
criteria = {"sst": nn.CrossEntropyLoss(reduction="mean"), "para": nn.BCEWithLogitsLoss(reduction="mean"),
            "sts": nn.MSELoss(reduction="mean")}
with torch.autocast(output.device.type, enabled=False):
    target = labels.long() if task == "sst" else labels.float()
    return criteria[task](output.float(), target)
