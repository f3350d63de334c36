# honest variant: multitask tasks/multitask.py 2: [idiom] an unknown task: type(self).__name__ in the message
if task not in self.heads:
    raise KeyError(f"{type(self).__name__}.head: unknown task {task!r}; expected one of {list(self.heads)}")
if self.bi_encoder(task):
    result = self.heads[task](u, v)
else:
    result = self.heads[task](u)
return result if task == "sst" else result.flatten()
