"""`python -m minbert <command>`: one entry point, every command listed with one line, each reachable.

Oracle: (c) properties of the command line a user sees (exit status, the lines printed), run as a user runs it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from minbert.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parents[1]


def minbert(*args):
    return subprocess.run([sys.executable, "-m", "minbert", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_help_lists_every_command_with_one_line():
    r = minbert("--help")
    assert r.returncode == 0, r.stderr
    listed = {line.split()[0] for line in r.stdout.splitlines() if line.startswith("  ")}
    assert listed == set(COMMANDS), f"`python -m minbert --help` lists {sorted(listed)}, not {sorted(COMMANDS)}"


def test_an_unknown_command_is_one_line_and_status_2_naming_the_closest():
    r = minbert("donwload")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown command 'donwload'" in r.stderr, r.stderr
    assert "did you mean download?" in r.stderr, f"a mistyped command must name the closest one: {r.stderr}"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_answers_help_under_its_own_name(command):
    r = minbert(command, "--help")
    assert r.returncode == 0, f"python -m minbert {command} --help failed:\n{r.stderr[-1500:]}"
    assert f"python -m minbert {command}" in r.stdout, f"its usage line should name `python -m minbert {command}`"


def test_a_command_that_returns_a_value_still_exits_0(monkeypatch):
    """`python -m minbert ensemble` returned its table (a list), which sys.exit printed and turned into status 1:
    the study's ensemble step then stopped the whole study."""
    import minbert.__main__ as entry
    from minbert.tools import ensemble
    monkeypatch.setattr(ensemble, "main", lambda argv: [{"member": "a", "overall": 0.7}])
    assert entry.main(["ensemble", "x"]) == 0


def test_no_command_is_an_error_with_the_usage():
    """`python -m minbert` alone must not look like success: a script running it by mistake (a missing variable in
    `python -m minbert $CMD`) would carry on. Status 2 (argparse's for a usage error) and the commands listed."""
    r = minbert()
    assert r.returncode == 2, f"`python -m minbert` with no command exited {r.returncode}; expected 2 (a usage error)"
    assert "python -m minbert <command>" in r.stdout + r.stderr and "commands:" in r.stdout + r.stderr, \
        f"`python -m minbert` with no command must print the usage and the commands:\n{r.stdout}{r.stderr}"


def test_a_reader_that_leaves_first_ends_the_command_quietly():
    """`python -m minbert --help | head -1`: when the pipe's reader has gone, the command stops without a traceback,
    as Unix tools do (its reader already has what it wanted)."""
    read_end, write_end = os.pipe()
    os.close(read_end)   # the reader is gone before the first write: every write fails with EPIPE
    try:
        r = subprocess.run([sys.executable, "-m", "minbert", "--help"], cwd=ROOT, stdout=write_end,
                           stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write_end)
    assert "Traceback" not in r.stderr, \
        f"python -m minbert --help into a closed pipe (minbert/core/errors.py, cli):\n{r.stderr[-1500:]}"
