"""minbert: a BERT written out by hand, the optimizer and the fine-tuning methods of nine papers.

The folders are the layers, bottom to top; a folder imports only from folders below it
(tests/test_imports.py checks it, and that no import circle exists):

    core/       what everything stands on: errors, atomic files, flags and recipes, devices, the training log
    bert/       the model: config, attention, dropout, layers, BertModel, tokenizer
    adamw.py    the optimizer, written out
    tasks/      the datasets, their heads, sampling between them, metrics
    methods/    one paper per file: PALs, SMART, R3F, PCGrad, GradVac, ..., MML, MeanShift, SimCSE, ensembles
    run/        a training run's machinery: checkpoints, run folders, DDP, the optimizer step, fast paths, stages
    tools/      commands around runs: download, SimCSE, ensembles, a finished run in use (load_run, predict)
    classroom/  the student copy and the grader (instructor-only)

`python -m minbert --help` (__main__.py) lists the commands; training is `python train_multitask.py` and
`python train_mml.py`.
"""


def load_run(path, device: str = "auto", amp: str = "auto", batch_size: int | None = None):
    """A finished train_multitask.py or train_mml.py run, ready for new sentences:
    `run = minbert.load_run("runs/quickstart"); run.sentiment(["A gorgeous film."])` (minbert/tools/trained_run.py).
    batch_size: inputs per forward pass (default: the scripts' evaluation batch, so the same numbers)."""
    # Imported by name at the first call: `import minbert`, which every module of the package runs, stays as light
    # as this file (no torch), and the classroom grader's import graph of an assignment does not grow by the package.
    import importlib
    trained_run = importlib.import_module("minbert.tools.trained_run")
    return trained_run.load_run(path, device=device, amp=amp, batch_size=batch_size)
