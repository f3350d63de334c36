"""Time the README's test command and write what it measured into the README's figure line.

    python bench/test_time.py              # run it, then rewrite the line between the test-time markers
    python bench/test_time.py --dry_run    # run it and print the line; README.md unchanged

Reads the command from README.md's "## Tests" section (its first `python -m pytest ...`), runs it as
written from the repository root, and measures: the tests it ran (pytest's closing summary), the wall time, the
longest stretch with no output (the newcomer's "is it hung?"), and how many tests the full suite has (`pytest
--collect-only`, so the README can say how many the command leaves out). With them it writes the one line between
`<!-- test-time:begin -->` and `<!-- test-time:end -->`, naming the CPU, the threads and the load average before
the start. Measure on a quiet machine (nothing else running): the figure is what a newcomer waits.
"""

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN, END = "<!-- test-time:begin -->", "<!-- test-time:end -->"


def readme_command(text: str) -> str:
    """The first `python -m pytest ...` command of the README's ## Tests section, without its comment."""
    section = re.search(r"^## Tests\n(.*?)(?=^## )", text, re.S | re.M)
    line = section and re.search(r"(python -m pytest[^\n#]*)", section.group(1))
    if not line:
        sys.exit("test_time: README.md's ## Tests section has no `python -m pytest` command")
    return line.group(1).strip()


def run(argv: list) -> tuple[str, float, float]:
    """Run argv from the repository root; (its output, wall seconds, longest seconds without output)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = last = time.perf_counter()
    longest, out = 0.0, []
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    while chunk := os.read(proc.stdout.fileno(), 65536):            # blocks until output; b"" at its end
        now = time.perf_counter()
        out.append(chunk)
        sys.stdout.write(chunk.decode(errors="replace"))
        sys.stdout.flush()
        longest, last = max(longest, now - last), now
    proc.wait()
    longest = max(longest, time.perf_counter() - last)
    return b"".join(out).decode(errors="replace"), time.perf_counter() - t0, longest


def counts(summary: str) -> dict:
    """{'passed': n, 'skipped': n, 'deselected': n, ...} from pytest's last line ("1 passed, 2 skipped in 3.0s")."""
    last = [line for line in summary.splitlines() if re.search(r"\d+ (passed|failed|errors?)\b", line)]
    if not last:
        sys.exit("test_time: no pytest summary line in the output")
    return {k: int(n) for n, k in re.findall(r"(\d+) ([a-z]+)", last[-1])}


def cpu() -> str:
    """'AMD EPYC (family 26, model 2), 2 cores': the name alone does not tell one EPYC generation from another."""
    try:
        info = dict(re.findall(r"^(model name|cpu family|model)\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.M))
        name = f"{info['model name'].strip()} (family {info['cpu family']}, model {info['model']})"
    except (OSError, KeyError):
        name = platform.processor() or platform.machine()
    return f"{name}, {os.cpu_count()} cores"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dry_run", action="store_true", help="print the figure line; leave README.md as it is")
    a = p.parse_args()
    text = README.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        sys.exit(f"test_time: README.md has no {BEGIN} ... {END} line to rewrite")
    command = readme_command(text)
    argv = [sys.executable, *shlex.split(command)[1:]]             # `python` is this interpreter
    load = os.getloadavg()[0]
    threads = os.environ.get("OMP_NUM_THREADS", "torch's default")
    output, wall, silent = run(argv)
    got = counts(output)
    collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"],
                               cwd=ROOT, capture_output=True, text=True).stdout
    total = int(re.search(r"(\d+) tests? collected", collected).group(1))
    ran = sum(v for k, v in got.items() if k in ("passed", "failed", "skipped", "xfailed", "xpassed", "error", "errors"))
    line = (f"`{command}` ran **{ran:,} tests in {wall / 60:.1f} min** (longest wait for output {silent:.0f} s; "
            f"{total - ran:,} more, marked slow, run in a plain `python -m pytest -q`) on {cpu()}, "
            f"OMP_NUM_THREADS {threads}, load {load:.1f} at the start, {time.strftime('%Y-%m-%d')}; "
            f"measured by `python bench/test_time.py`.")
    if got.get("failed") or got.get("error") or got.get("errors"):
        print(f"\ntest_time: the command had failures ({got}); README.md unchanged", file=sys.stderr)
        sys.exit(1)
    print("\n" + line)
    if not a.dry_run:
        new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{line}\n{END}", text, flags=re.S)
        README.write_text(new, encoding="utf-8")
        print("test_time: README.md's figure line rewritten", file=sys.stderr)


if __name__ == "__main__":
    main()
