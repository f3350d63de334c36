"""Recipes and `--dry_run`: what a command will run with, and where each value came from (what a user sees, the
recipe format and `--dry_run json`'s fields: docs/methods.md).

`dry_run` prints the flags changed from their defaults, grouped by argument group (`changed_flags`), the model
(`model_note`) and the rows the parsing modules add through a `describe(args)` function, then exits with status 0
before any data, model or output folder is touched; `--dry_run json` prints {"entry", "argv", "recipes", "flags":
{name: {"value", "source"}}}, source "default", "recipe" or "command line". Left out: abbreviated flags (`--l`
for `--lr`) count as the command line's only when written in full.
"""

import json
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


DRY_RUN = ("table", "json")   # --dry_run's formats; a bare --dry_run is the table


def dry_run(parser, argv, args, modules=()) -> None:
    """With --dry_run: print the table (or, with --dry_run json, the configuration as JSON) and exit 0; `modules`
    with a describe(args) add their rows to the table. Without --dry_run: nothing."""
    if not getattr(args, "dry_run", None):
        return
    argv = list(sys.argv[1:] if argv is None else argv)
    config = configuration(parser, argv, args)
    if args.dry_run == "json":
        print(json.dumps(config, indent=1, default=str))
    else:
        rows = [(f"{config['entry']} --dry_run", "nothing written; --dry_run json: every flag, its value and source")]
        if isinstance(getattr(args, "model", None), str):
            rows.append(("model", model_note(args.model)))
        changed = changed_flags(parser, config)
        rows += [("changed" if i == 0 else "", f"{group}: {', '.join(items)}") for i, (group, items)
                 in enumerate(changed.items())] or [("changed", "nothing: every flag at its default")]
        for module in modules:
            rows += module.describe(args) if hasattr(module, "describe") else []
        width = max(len(label) for label, _ in rows)
        print("\n".join(f"{label:<{width}}  {text}" for label, text in rows))
    raise SystemExit(0)


def changed_flags(parser, config: dict) -> dict[str, list[str]]:
    """{argument group's short title: ["--lr 2e-05 (recipe)", "--pals", ...]}: the flags whose value differs from
    the parser's default, grouped as --help groups them (one group per method)."""
    changed = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            flag = config["flags"].get(action.dest)
            if flag is None or flag["value"] == action.default or action.dest == "dry_run":
                continue
            name = action.option_strings[-1] if action.option_strings else action.dest
            value = flag["value"]
            text = " ".join(map(str, value)) if isinstance(value, list) else value
            shown = name if value is True else f"{name} {text}"
            changed.setdefault(group.title.split(" (")[0], []).append(
                shown + (" (recipe)" if flag["source"] == "recipe" else ""))
    return changed


def model_note(name: str) -> str:
    """The model a run loads, and whether it must be downloaded first (minbert/core/hub.py; nothing is fetched)."""
    from minbert.core import hub
    try:
        found = hub.resolve(name, download=False)
    except UserError as e:   # a bad path or a missing package: what the run itself would say
        return f"{name}: the run would stop: {str(e).splitlines()[0]}"
    if found is not None:
        return f"{name} ({found})"
    if hub.offline():
        return f"{name}: NOT downloaded, and HF_HUB_OFFLINE is set: the run would stop; run once online first"
    size = " (about 440 MB)" if "bert-base" in name else " (about 1.3 GB)" if "bert-large" in name else ""
    return f"{name}: NOT downloaded yet: the run downloads it first{size} into {hub.cache_dir()}"
