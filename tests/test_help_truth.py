"""What the help, the README and the docs tell a user to type is accepted as typed.

Walks every command line shown in `--help` (python -m minbert, each of its commands, both training scripts),
in the command modules' docstrings, in recipes/*.sh, in README.md and in docs/*.md: `python train_multitask.py
...` and `python train_mml.py ...` (also under torchrun) must parse with `--dry_run` (every flag, value and
@recipe file read; nothing trains), and `python -m minbert <command> ...` must get through the command's parser
(parsing only: nothing downloads or runs). Each `download` choice the top-level help offers must be a dataset
`download` accepts, and the `--lr` advice for MiniLM must be the rates the README's MiniLM commands use.

Oracle: the entry points' own argparse parsers, run on the text as a user would copy it.
"""

import argparse
import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

import minbert.__main__ as entry
import train_mml
import train_multitask

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {"train_multitask.py": train_multitask, "train_mml.py": train_mml}
FENCE = re.compile(r"^\s*(```|~~~)")
# a command: `[python] train_*.py ...`, `torchrun [flags] train_*.py ...` or `python -m minbert ...`
COMMAND = re.compile(r"((?:torchrun(?:\s+--?[\w-]+(?:\s+\d+)?)*\s+|python\s+)?(?:train_multitask|train_mml)\.py(?:\s.*|$)"
                     r"|python\s+-m\s+minbert(?:\s.*|$))")
HELP_START = r"^\s*(?:Usage:\s+)?"   # in help text an example is a line of its own (prose mentions are not)


class Parsed(Exception):
    """Raised by the patched parse_args once a command's flags parsed: stops the command before it runs."""


def code_text(markdown):
    """(line, code) for each line of a fenced block and each inline code span (spans may wrap lines)."""
    fence, paragraph = None, []
    lines = markdown.splitlines() + [""]
    for n, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None and (m or not line.strip()):
            text = " ".join(t for _, t in paragraph)
            yield from ((paragraph[0][0], c.group(2)) for c in re.finditer(r"(`+)(.+?)\1", text))
            paragraph = []
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
        elif fence is not None:
            yield n, line
        elif line.strip():
            paragraph.append((n, line))


def commands(lines, start=r"(?:^|[\s(])", gap_ends=False):
    """(line, argv) of each command in (line, text) pairs: continuation lines joined, comments, `&&`/`;`/`|`
    chains, redirections and prose after the command (after a `word:`, `...`, a closing parenthesis) cut off.
    `start`: what may come before a command (in Markdown code, anything; in help text, HELP_START);
    `gap_ends`: two spaces end the command (help text: "python -m minbert classroom check   leak scan, ..."), as
    they do a script named without `python` (a file tree: "train_mml.py      MML and its baselines ...")."""
    pending = None
    for n, text in lines:
        if pending is not None:
            n, text = pending[0], pending[1] + " " + text.strip()
        pending = (n, text.rstrip()[:-1].rstrip()) if text.rstrip().endswith("\\") else None
        if pending:
            continue
        text = re.split(r"(?:^|\s)#", text.replace("\\|", "|"))[0]
        for part in re.split(r"&&|;|\||,\s+(?=python\s)", text):
            m = re.search(start + COMMAND.pattern, part.strip())
            command = m.group(1) if m else ""
            if gap_ends or not command.startswith(("python", "torchrun")):   # a file tree: "train_mml.py   MML ..."
                command = re.split(r"\s{2,}", command)[0]
            if not command:
                continue
            try:
                tokens = shlex.split(command)
            except ValueError:                   # an apostrophe in prose after the command ("mml-study's")
                tokens = command.split()
            argv = []
            for token in tokens:
                if token in ("...", "...:") or token.startswith(("<", "[", "$")) or re.match(r"\d*>|&$", token):
                    break
                if token.endswith(":"):                                         # "mml-study: the grid ..."
                    argv.append(token[:-1])
                    break
                if token.endswith(")") and token.count(")") > token.count("("):   # "(python ... cs224n)"
                    argv.append(token.rstrip(")"))
                    break
                argv.append(token)
            yield n, argv


def entry_point(argv):
    """('script', module, flags) or ('command', None, [name, flags...]) of a command line's argv."""
    for i, token in enumerate(argv):
        if token in SCRIPTS:
            return "script", SCRIPTS[token], argv[i + 1:]
    return "command", None, argv[argv.index("minbert") + 1:]


def help_texts():
    """{'python -m minbert <name> --help': its text} for the top level, each command and both scripts; each
    command module's docstring; the recipes' shell scripts."""
    texts = {"python -m minbert --help": entry.usage()}
    for name, (module, _) in entry.COMMANDS.items():
        if entry.available(module):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
                entry.main([name, "--help"])
            assert e.value.code == 0, f"`python -m minbert {name} --help` exits {e.value.code}, expected 0"
            texts[f"python -m minbert {name} --help"] = out.getvalue()
    for name, module in SCRIPTS.items():
        texts[f"python {name} --help"] = module.parser().format_help()
    for name, (module, _) in entry.COMMANDS.items():     # their docstrings' usage lines (download's examples)
        if entry.available(module):
            texts[f"{module.replace('.', '/')}.py docstring"] = importlib.import_module(module).__doc__ or ""
    for script in sorted((ROOT / "recipes").glob("*.sh")):
        texts[f"recipes/{script.name}"] = script.read_text(encoding="utf-8")
    return texts


def shown_commands():
    """(where, argv) of every command line help, README.md and docs/*.md show."""
    found = []
    for source, text in help_texts().items():
        text = re.sub(r"^usage:.*?(\n\n|$)", "", text, flags=re.S)       # argparse's synopsis, not a command
        found += [(f"{source}, line {n}", argv)                  # examples: a line of its own, or after "Usage:"
                  for n, argv in commands(enumerate(text.splitlines(), 1), start=HELP_START, gap_ends=True)]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        found += [(f"{page.relative_to(ROOT)}:{n}", argv) for n, argv in commands(code_text(text))]
    return found


def parses(argv, monkeypatch):
    """None if the command line is accepted, else what its parser said."""
    kind, module, flags = entry_point(argv)
    if not flags or kind == "command" and len(flags) == 1 and flags[0] in entry.COMMANDS:
        return None          # `python train_mml.py`, `python bench/study.py`: a name, whose --help is walked
    err = io.StringIO()
    if kind == "script":
        flags = flags if {"-h", "--help"} & set(flags) else flags + ["--dry_run"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), \
                pytest.raises(SystemExit) as e:
            module.main(flags)
        return None if e.value.code == 0 else err.getvalue().strip() or f"exit {e.value.code}"
    for name in ("parse_args", "parse_intermixed_args"):   # predict takes flags between its sentences (intermixed)
        def parse_then_stop(self, args=None, namespace=None, parse=getattr(argparse.ArgumentParser, name)):
            parse(self, args, namespace)
            raise Parsed
        monkeypatch.setattr(argparse.ArgumentParser, name, parse_then_stop)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status = entry.main(flags)
    except Parsed:
        return None
    except SystemExit as e:
        status = e.code
    finally:
        monkeypatch.undo()
    return None if status == 0 else err.getvalue().strip() or f"exit {status}"


def test_the_walk_finds_the_readme_commands():
    """Property: the walk sees the README's quick start and MML line, wrapped and chained commands, and
    reads a command inside prose parentheses only up to them (else the test below would check nothing)."""
    shown = [" ".join(argv) for _, argv in shown_commands()]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = re.search(r"^python train_multitask\.py .*--out_dir runs/quickstart$", readme, re.M).group(0)
    assert quick in shown, f"the walk misses the README's quick start `{quick}`"
    assert any(s.startswith("python train_mml.py --task MRPC --method mml") for s in shown)
    page = "x (`python -m minbert download cs224n && python\ntrain_multitask.py --lr 1e-4`) and\n" \
           "```\npython -m minbert download glue \\\n  --tasks RTE   # fast\n```\n"
    assert [a for _, a in commands(code_text(page))] == [
        ["python", "-m", "minbert", "download", "cs224n"], ["python", "train_multitask.py", "--lr", "1e-4"],
        ["python", "-m", "minbert", "download", "glue", "--tasks", "RTE"]]
    help_lines = [(1, "GPU, full data (python -m minbert download cs224n first):"),
                  (2, "    python train_mml.py --task RTE \\"), (3, "        --method mml   # MML"),
                  (4, "Usage:  python -m minbert ensemble runs/a runs/b")]
    assert [a for _, a in commands(help_lines, start=HELP_START, gap_ends=True)] == [
        ["python", "train_mml.py", "--task", "RTE", "--method", "mml"],
        ["python", "-m", "minbert", "ensemble", "runs/a", "runs/b"]]


def test_every_command_line_in_help_readme_and_docs_parses(monkeypatch):
    """Oracle: each entry point's parser; a wrong flag, value or choice in a shown command fails here."""
    bad = [f"{where}: `{' '.join(argv)}`\n      {why}" for where, argv in shown_commands()
           if (why := parses(argv, monkeypatch)) is not None]
    assert not bad, "commands shown to users that their parser refuses:\n  " + "\n  ".join(bad)


def test_each_download_choice_the_top_level_help_offers_is_accepted(monkeypatch):
    """Oracle: `python -m minbert download`'s parser. The one-line help of `download` in
    `python -m minbert --help` lists datasets in parentheses; each must be one `download` accepts."""
    offered = re.search(r"\(([^)]*)\)", entry.COMMANDS["download"][1])
    assert offered, "minbert/__main__.py: the help line of `download` should list its datasets in parentheses"
    names = [n.strip() for n in offered.group(1).split(",") if n.strip() not in ("", "...")]
    refused = [n for n in names if parses(["python", "-m", "minbert", "download", n], monkeypatch) is not None]
    assert names and not refused, (f"minbert/__main__.py offers `python -m minbert download` {refused}, which "
                                   "minbert/tools/download.py does not accept")


def flag_value(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


def help_of(module, flag):
    return next(a.help for a in module.parser()._actions if flag in a.option_strings)


def numbers(text):
    """The numbers a help text names, as floats ('2e-5' and 2e-05 are the same advice)."""
    return {float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?", text)}


def test_lr_advice_for_minilm_agrees_with_the_readme_commands():
    """Oracle: the README's MiniLM commands (the quick start; the MML line). The --lr help of each script must
    advise the learning rates those commands use, so a user who follows the help runs the README's recipe."""
    readme = [argv for where, argv in shown_commands() if where.startswith("README.md") and "minilm-l6" in argv]
    quick = next(a for a in readme if "train_multitask.py" in a)
    advice = help_of(train_multitask, "--lr").split("MiniLM", 1)[-1]
    for flag in ("--lr", "--head_lr"):
        assert float(flag_value(quick, flag)) in numbers(advice), (
            f"train_multitask.py --lr help advises MiniLM {advice!r}, but the README's quick start uses "
            f"{flag} {flag_value(quick, flag)}")
    mml = next(a for a in readme if "train_mml.py" in a)
    lr = float(flag_value(mml, "--lr") or train_mml.parser().get_default("lr"))
    assert lr in numbers(help_of(train_mml, "--lr")), (f"train_mml.py --lr help ({help_of(train_mml, '--lr')!r}) "
                                                       f"does not name the {lr:g} that the README's MiniLM MML line runs at")
