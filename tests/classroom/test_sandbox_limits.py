"""The box's limits pinned to their documented sizes (docs/classroom.md, "Threat model"), not only to their existence,
and its user reserved to it (minbert/classroom/sandbox.py).

Oracles: (c) the numbers docs/classroom.md states, checked at their edges: 1 MiB of printed output passes and one
byte more stops the box; 4 MiB of results pass and one byte more stops it (the two caps differ, so swapping them
fails here); inside a box, getrlimit reads 4 GiB of address space, file size 0, 64 threads, 256 open files, no core
file and the deadline + 5 CPU seconds. A uid held by one box (or one grader process) is never handed to another.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from classroom_helpers import LEVEL, needs_isolation

from minbert.classroom import sandbox

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20


def emit(out: int, result: int) -> list[str]:
    """A child that prints `out` bytes and writes `result` bytes of results."""
    return [sys.executable, "-I", "-c", f"import os, sys\nsys.stdout.buffer.write(b'x' * {out}); sys.stdout.flush()\n"
                                        f"with os.fdopen(3, 'wb') as f:\n    f.write(b'r' * {result})"]


@pytest.mark.parametrize("out, result, why", [
    (MIB, 0, ""),                                                            # the log cap: 1 MiB, inclusive
    (MIB + 1, 0, "stopped: the code printed more than 1024 KiB"),
    (0, 4 * MIB, ""),                                                        # the results cap: 4 MiB, inclusive
    (0, 4 * MIB + 1, "stopped: the code wrote as results more than 4096 KiB"),
    (2 * MIB, 0, "stopped: the code printed more than 1024 KiB"),           # under the results cap: still stopped
], ids=["log 1 MiB", "log 1 MiB + 1", "results 4 MiB", "results 4 MiB + 1", "log 2 MiB"])
def test_the_log_cap_is_1_mib_and_the_results_cap_4_mib(out, result, why):
    got = sandbox.run(emit(out, result), {}, {}, sandbox.Limits(wall_s=60), "self-check")
    assert got.why == why, f"printing {out} bytes and writing {result} bytes of results: {got.why!r}, expected {why!r}"
    if not why:
        assert (len(got.log), len(got.result)) == (out, result), "everything under the caps must reach the parent"


@needs_isolation
@pytest.mark.slow
def test_the_boxs_rlimits_are_the_documented_ones():
    script = ("import os, resource\nnames = ('AS', 'FSIZE', 'NPROC', 'NOFILE', 'CORE', 'CPU')\n"
              "os.write(3, ' '.join(str(resource.getrlimit(getattr(resource, 'RLIMIT_' + n))[0]) for n in names)"
              ".encode())")
    got = sandbox.run([sys.executable, "-I", "-c", script], {}, {}, sandbox.Limits(wall_s=30), LEVEL)
    assert got.why == "" and got.status == 0, got.why or got.log[-2000:]
    address, size, threads, files, core, cpu = map(int, got.result.split())
    assert (address, size, threads, files, core, cpu) == (4 << 30, 0, 64, 256, 0, 35), \
        "docs/classroom.md: 4 GiB of address space (the box is one process), file size 0, 64 threads, 256 open " \
        f"files, no core file, the deadline + 5 CPU seconds; the box has {got.result.decode()}"


def test_a_uid_held_by_one_box_is_never_handed_to_another(monkeypatch):
    """free_uid drew a random uid and checked that no process used it: two grades (or two workers) could draw the
    same one between the check and their box's start, and each box could then signal or read the other's."""
    draws = iter([5, 5, 9, 5])
    monkeypatch.setattr(sandbox.random, "randrange", lambda n: next(draws))
    first = sandbox.free_uid()
    second = sandbox.free_uid()                   # draws 5 (held by the first), then 9
    assert (first, second) == (sandbox.UID_BASE + 5, sandbox.UID_BASE + 9)
    sandbox.release_uid(first)
    assert sandbox.free_uid() == sandbox.UID_BASE + 5, "a released uid is free again"
    sandbox.release_uid(second)
    sandbox.release_uid(sandbox.UID_BASE + 5)


def test_a_uid_another_grader_holds_is_skipped(monkeypatch):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import random\n"
         "random.randrange = lambda n: 7\nfrom minbert.classroom import sandbox\n"
         "print(sandbox.free_uid(), flush=True)\nsys.stdin.read()", str(ROOT)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert int(holder.stdout.readline()) == sandbox.UID_BASE + 7
        draws = iter([7, 8])
        monkeypatch.setattr(sandbox.random, "randrange", lambda n: next(draws))
        got = sandbox.free_uid()
        assert got == sandbox.UID_BASE + 8, "a uid another grader process holds was handed out again"
        sandbox.release_uid(got)
    finally:
        holder.stdin.close()
        holder.wait(30)
    monkeypatch.setattr(sandbox.random, "randrange", lambda n: 7)
    assert sandbox.free_uid() == sandbox.UID_BASE + 7, "the kernel frees a uid when its holder ends"
    sandbox.release_uid(sandbox.UID_BASE + 7)
