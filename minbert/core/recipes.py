"""Recipes and `--dry_run`: what a command will run with, and where each value came from.

A recipe is an argparse `@file` (minbert.core.flags.ArgumentParser): `python train_multitask.py
@recipes/pritsky-best.args --seed 2`, one `--flag value  # paper section` per line. Later arguments
override earlier ones (argparse's rule), so flags after the recipe change it for one run.

`--dry_run` (every entry point) prints the resolved configuration as JSON and exits with status 0
before any data, model or output folder is touched:

    {"entry": "train_multitask.py", "argv": [...], "recipes": ["recipes/x.args"],
     "flags": {"lr": {"value": 1e-05, "source": "recipe"}, "epochs": {"value": 10, "source": "default"}, ...}}

source is "default" (nobody set it), "recipe" (the last setting came from an @file) or
"command line". Values are what argparse parsed (types applied, bad values already rejected),
before the script derives anything from them (e.g. train_multitask.py's lr default per --option
stays null here: it is resolved at start and printed there).

Every `minbert.core.flags.ArgumentParser` has the flag, and its `parse(argv, ...)` calls
`dry_run(parser, argv, args)` right after parsing.
Left out: abbreviated flags (`--lr` given as `--l`) are attributed to the command line only when
written in full; recipes and the tests always write flags in full.
"""

import json
import os
import sys

from minbert.core.errors import UserError


def expand(parser, argv: list[str], source: str = "command line", seen=()) -> list[tuple[str, str]]:
    """argv with every @file replaced by its arguments: [(token, source)], source 'recipe' for tokens
    that came from a file (nested @files included)."""
    out = []
    for token in argv:
        if token.startswith("@") and "@" in (parser.fromfile_prefix_chars or ""):
            path = token[1:]
            if path in seen:
                raise UserError(f"{path}: a recipe includes itself")
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except OSError as e:
                raise UserError(f"@{path}: cannot read the recipe ({e.strerror or e})") from None
            tokens = [t for line in lines for t in parser.convert_arg_line_to_args(line)]
            out += expand(parser, tokens, "recipe", (*seen, path))
        else:
            out.append((token, source))
    return out


def sources(parser, argv: list[str]) -> dict[str, str]:
    """dest -> 'default' | 'recipe' | 'command line': where each flag's final value came from."""
    by_option = {o: a for a in parser._actions for o in a.option_strings}
    result = {a.dest: "default" for a in parser._actions if a.dest != "help"}
    positional_source = None
    for token, source in expand(parser, argv):
        name = token.split("=", 1)[0]
        if name in by_option:
            result[by_option[name].dest] = source
        elif not token.startswith("-") and positional_source is None:
            positional_source = source
    for a in parser._actions:
        if not a.option_strings and a.dest != "help" and positional_source:
            result[a.dest] = positional_source
    return result


def configuration(parser, argv: list[str], args) -> dict:
    src = sources(parser, argv)
    recipes = [t[1:] for t in argv if t.startswith("@")]
    values = {k: v for k, v in vars(args).items() if k != "dry_run"}
    return {"entry": parser.prog, "argv": list(argv), "recipes": recipes,
            "flags": {k: {"value": v, "source": src.get(k, "default")} for k, v in sorted(values.items())}}


def dry_run(parser, argv, args) -> None:
    """With --dry_run: print the configuration (JSON) and exit 0. Otherwise nothing."""
    if not getattr(args, "dry_run", False):
        return
    argv = list(sys.argv[1:] if argv is None else argv)
    print(json.dumps(configuration(parser, argv, args), indent=1, default=str))
    raise SystemExit(0)


RECIPE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "recipes")
