"""`python -m minbert <command> [flags]`: one entry point for the commands around training.

Training itself is `python train_multitask.py` and `python train_mml.py` at the repository root.
`python -m minbert <command> --help` gives a command's flags.
"""

import importlib
import importlib.util
import sys

COMMANDS = {                # command: (module with main(argv), one line for --help)
    "download": ("minbert.tools.download",
                 "fetch the datasets (cs224n, glue); checkpoints download on first use (--model)"),
    "ensemble": ("minbert.tools.ensemble", "combine finished train_multitask.py runs and score the ensemble"),
    "simcse": ("minbert.tools.simcse_stage",
               "unsupervised SimCSE: contrastive sentence embeddings, before fine-tuning"),
    "predict": ("minbert.tools.predict", "a finished run's heads on your sentences: SST, paraphrase, STS, a GLUE task"),
    "export-hf": ("minbert.tools.export_hf",
                  "a run's task head as a Hugging Face BertForSequenceClassification folder"),
    "export-st": ("minbert.tools.export_st", "a mean-pooled run's encoder as a sentence-transformers folder"),
    "classroom": ("minbert.classroom.cli", "instructor: student copy, grade, Gradescope autograder, check"),
}


def available(module: str) -> bool:
    """False for the classroom command in the student copy, which has no minbert/classroom/."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def usage() -> str:
    lines = [__doc__.split("\n")[0], "", "commands:"]
    for name, (module, line) in COMMANDS.items():
        if available(module):
            lines.append(f"  {name:<10} {line}")
    return "\n".join(lines + ["", "training: python train_multitask.py --help, python train_mml.py --help"])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS or not available(COMMANDS[name][0]):
        from minbert.core.flags import unknown
        print(f"error: {unknown('command', name, [c for c in COMMANDS if available(COMMANDS[c][0])])} "
              f"(python -m minbert --help)", file=sys.stderr)
        return 2
    importlib.import_module(COMMANDS[name][0]).main(rest)   # what main returns is for callers, not the exit status
    return 0


if __name__ == "__main__":
    from minbert.core.errors import cli
    sys.exit(cli(main))
