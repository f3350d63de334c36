"""Command-line checks that run before any work starts: a bad value stops at parse time, exit status 2.

`between`, `at_least` and `positive` are argparse `type=` functions; `BriefParser` prints two lines instead of the
usage block, naming the closest known flag or choice, or minbert's name for Hugging Face's spelling (`HF_SPELLINGS`);
`writable_dir`/`writable_file` create a scratch file where the output will go (catching a read-only disk, a parent
that is a file). `ArgumentParser` adds recipe files (`@recipes/x.args`) and `--dry_run` (minbert/core/recipes.py).
"""

import argparse
import difflib
import inspect
import math
import os
import re
import sys
import tempfile

from minbert.core import recipes
from minbert.core.errors import UserError


# Hugging Face's spellings (Trainer's TrainingArguments, the run_glue.py example's arguments) of flags that minbert
# spells otherwise: named in the error for an unknown flag, where the parser has minbert's flag
HF_SPELLINGS = {
    "--learning_rate": "--lr", "--output_dir": "--out_dir", "--overwrite_output_dir": "--overwrite",
    "--num_train_epochs": "--epochs", "--per_device_train_batch_size": "--batch_size",
    "--per_gpu_train_batch_size": "--batch_size", "--train_batch_size": "--batch_size",
    "--gradient_accumulation_steps": "--grad_accum", "--warmup_ratio": "--warmup", "--max_seq_length": "--max_seq_len",
    "--model_name_or_path": "--model", "--resume_from_checkpoint": "--resume", "--max_train_samples": "--limit",
    "--logging_steps": "--log_every", "--torch_compile": "--compile", "--fp16": "--amp fp16", "--bf16": "--amp bf16",
    "--use_cpu": "--device cpu", "--no_cuda": "--device cpu",
}


class BriefParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose errors are two lines (its sub-parsers are BriefParsers too)."""

    def error(self, message: str):
        """A bad flag or value: one line naming it and what was expected, one pointing to --help, exit 2 (argparse's
        own error() prints the whole usage first, which pushes the line that matters off the screen)."""
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):   # minbert's name, or else the closest known flag, for each unknown one
            known = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            message += "".join(hugging_face(t.split("=")[0], known) or suggest(t.split("=")[0], known)
                               for t in message[len(prefix):].split() if t.startswith("--"))
        self.exit(2, f"{self.prog}: error: {message}\n{self.prog}: --help for all flags\n")

    def _check_value(self, action, value):
        """argparse's choices check, with the closest choice named."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, "invalid choice: "
                                                 f"{value!r}{suggest(str(value), action.choices, repr)} "
                                                 f"(choose from {choices})")


def hugging_face(flag: str, known) -> str:
    """'; did you mean --lr? (--learning_rate is Hugging Face's spelling)' where `flag` is Hugging Face's name of a
    flag in `known`, else ''."""
    ours = HF_SPELLINGS.get(flag)
    if ours is None or ours.split()[0] not in known:
        return ""
    return f"; did you mean {ours}? ({flag} is Hugging Face's spelling)"


def closest(word: str, choices):
    """The choice closest to `word` (difflib's ratio >= 0.6, ignoring case), else None."""
    by_lower = {str(c).lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def suggest(word: str, choices, show=str) -> str:
    """'; did you mean X?' for the choice closest to `word`, else ''."""
    close = closest(word, choices)
    return "" if close is None else f"; did you mean {show(close)}?"


def unknown(what: str, value: str, choices) -> str:
    """The one line for a value outside a fixed vocabulary:
    "unknown task 'RTF'; did you mean RTE? Choose from CoLA, SST-2, ..." (no guess when none is close)."""
    close = closest(value, choices)
    then = "; choose from" if close is None else f"; did you mean {close}? Choose from"
    return f"unknown {what} {value!r}{then} {', '.join(map(str, choices))}"


class ArgumentParser(BriefParser):
    """BriefParser that also reads `@file` arguments: `--flag value  # comment` per line."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("fromfile_prefix_chars", "@")
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.add_argument("--dry_run", nargs="?", const="table", choices=recipes.DRY_RUN, default=None,
                          help="print what would run and exit: a short table (the flags changed from their defaults, "
                               "the model and whether it must be downloaded, data sizes, steps); --dry_run json: "
                               "every flag, its value and source")

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, but a bare --dry_run never takes the next word as its format unless it is one (table,
        json): `python -m minbert ensemble --dry_run runs/a` keeps runs/a a run folder."""
        args = list(sys.argv[1:] if args is None else args)
        args = [a + "=table" if a == "--dry_run" and (i + 1 == len(args) or args[i + 1] not in recipes.DRY_RUN)
                else a for i, a in enumerate(args)]
        return super().parse_known_args(args, namespace)

    def parse(self, argv=None, *modules):
        """parse_args; with --dry_run print what would run and exit (minbert/core/recipes.py; the modules'
        describe(args) add rows); then each module's combination rules (check_args)."""
        args = self.parse_args(argv)
        recipes.dry_run(self, argv, args, modules)
        for module in modules:
            if hasattr(module, "check_args"):
                module.check_args(args, self)
        return args

    def convert_arg_line_to_args(self, line: str) -> list:
        """A `#` at the start or after a space begins a comment; inside a value (`runs/#3`) it is kept."""
        return re.split(r"(?:^|\s)#", line, maxsplit=1)[0].split()


def defaults(fn) -> dict:
    """{name: default} of fn's keyword parameters (for a class, its __init__'s). A method's defaults
    are written once, in its signature; its add_args reads them from there."""
    # a class: its __init__, or the first in its MRO with keyword defaults (a subclass may take *args, **kwargs)
    for f in [k.__init__ for k in fn.__mro__] if inspect.isclass(fn) else [fn]:
        found = {k: p.default for k, p in inspect.signature(f).parameters.items() if p.default is not p.empty}
        if found:
            return found
    return {}


def between(lo, hi=math.inf, kind=float, open_lo=False):
    """type= for a number in [lo, hi] ((lo, hi] with open_lo); without hi, a number >= lo (> lo with open_lo)."""
    what = "an integer" if kind is int else "a number"
    want = (f"{what} {'>' if open_lo else '>='} {lo}" if hi == math.inf else
            f"a number in {'(' if open_lo else '['}{lo}, {hi}]")

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if not lo <= value <= hi or (open_lo and value == lo):
            raise argparse.ArgumentTypeError(f"expected {want}, got {text}")
        return value
    return parse


def at_least(lo, kind=int):
    """type= for a number >= lo (int by default)."""
    return between(lo, kind=kind)


positive = between(0, open_lo=True)   # type= for a float > 0 (learning rates, epsilons, temperatures)


def _try_write(folder: str, what: str) -> None:
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as e:
        raise UserError(f"{what}: cannot write there ({e.strerror or e}); choose a writable folder") from None


def writable_dir(path: str, flag: str) -> None:
    """Raise a UserError naming `flag` unless files can be created in `path` (created if missing)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{flag} {path}: is a file, expected a folder")
    _try_write(path, f"{flag} {path}")


def writable_file(path: str, flag: str) -> None:
    """Raise a UserError naming `flag` unless `path` can be written (its folder is created if missing)."""
    if os.path.isdir(path):
        raise UserError(f"{flag} {path}: is a folder, expected a file path")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UserError(f"{flag} {path}: the file exists and is read-only")
    _try_write(os.path.dirname(path) or ".", f"{flag} {path}")


def check_outputs(args, files: list[str]) -> None:
    """--out_dir and each --KEY_out path of `files` writable, before any data or model loads
    (a KEY whose input flag is 'none', e.g. --para_test none, writes nothing)."""
    writable_dir(args.out_dir, "--out_dir")
    for key in files:
        if getattr(args, key, None) != "none":
            writable_file(getattr(args, f"{key}_out"), f"--{key}_out")
