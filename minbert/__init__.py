"""minbert: a BERT written out by hand, the optimizer and the fine-tuning methods of nine papers.

The folders are the layers, bottom to top; a folder imports only from folders below it
(tests/test_imports.py checks it, and that no import circle exists):

    core/       what everything stands on: errors, atomic files, flags and recipes, devices, progress
    bert/       the model: config, attention, dropout, layers, BertModel, tokenizer
    adamw.py    the optimizer, written out
    tasks/      the datasets, their heads, sampling between them, metrics
    methods/    one paper per file: PALs, SMART, R3F, PCGrad, GradVac, ..., MML, MeanShift, SimCSE
    run/        a training run's machinery: checkpoints, run folders, DDP, fast paths, stages
    tools/      commands around runs: download, studies, ensembles
    classroom/  the student copy and the grader (instructor-only)

`python -m minbert --help` lists the commands; training is `python train_multitask.py` and `python train_mml.py`.
"""


def load_run(path, device: str = "auto", amp: str = "auto", batch_size: int = 64):
    """A finished train_multitask.py or train_mml.py run, ready for new sentences:
    `run = minbert.load_run("runs/quickstart"); run.sentiment(["A gorgeous film."])` (minbert/run/trained.py;
    torch is imported here, on the first call, so `import minbert` stays instant)."""
    from minbert.run.trained import load_run as load
    return load(path, device=device, amp=amp, batch_size=batch_size)
