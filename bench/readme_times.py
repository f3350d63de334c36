"""The README's headline times, measured on a quiet machine and a busy one, and written into README.md.

    python bench/readme_times.py                        # all three commands, quiet then busy: 1-2 h on 2 cores
    python bench/readme_times.py --only tests           # some of: quickstart, tests, mml (the others keep theirs)
    python bench/readme_times.py --only tests --conditions busy
    python bench/readme_times.py --dry_run              # measure; write into a temporary folder, not the repo
    python bench/readme_times.py --smoke                # a few-step version of each, both conditions, 5-10 min:
                                                        # checks this script (a dry run)

The commands are read from README.md and run as a newcomer runs them: from the repository root, with
OMP_NUM_THREADS unset (the scripts choose their threads from the cores free at start); only --out_dir is a
temporary folder.

    quickstart  the first `python train_multitask.py ...` line (the Quick start)
    tests       the first `python -m pytest ...` line of the Tests section
    mml         the first `python train_mml.py ...` line (Other runs)

Each under two conditions, all quiet runs first:

    quiet  nothing else running: waits up to 5 min for the 1-minute load average to fall under 0.5
    busy   another job busy on one core for the whole measurement: the quick start at `--threads 1` (a second
           user's training run), restarted whenever it ends, started 2 min before the first busy command so
           that the load average has risen and the command's thread choice sees it

Measured for each: the wall time; for the quick start, the dev scores it ends with (its last printed record); the
longest silence (the longest gap between two consecutive bytes of the command's output: the newcomer's "is it
hung?") and the line printed before it; the load average at the start and
its mean and maximum over the run (sampled every 5 s; the command's own threads count in it); the busy job's CPU
use in cores; the "threads:" line the script printed. For the tests: how many ran, how many the full suite has, and
the tests behind the longest silences: this file is loaded into that pytest as a plugin (PYTEST_PLUGINS, removed
again before the first test, so child processes do not inherit it) and records when each test's progress character
is written; the command and its output are unchanged. With them: the CPU (family, model; AMX-BF16, AVX512-BF16
or AVX2 only), its cores, torch's version and the date.

Writes bench/results/readme_times.json (the last measurement of each command and condition: a run of some keeps
the others), bench/results/readme_times.md (the table, with the silences) and, from the JSON, README.md's three
lines between <!-- NAME-time:begin --> and <!-- NAME-time:end --> (NAME: quickstart, test, mml); tests/test_readme.py
checks that they are what the JSON renders to. The quick suite must print at least every 30 s on the busy machine
(docs/testing.md): the script says so, naming the tests, when it did not.
"""

import argparse
import ast
import contextlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "bench" / "results" / "readme_times.json"
TABLE = RESULTS.with_suffix(".md")
COMMANDS = ("quickstart", "tests", "mml")
MARKER = {"quickstart": "quickstart-time", "tests": "test-time", "mml": "mml-time"}
SMOKE = {"quickstart": ["--limit", "32"], "tests": ["tests/test_readme.py"], "mml": ["--limit", "16", "--epochs", "1"]}
SILENCE_RULE = 30.0     # seconds: the quick suite prints at least this often (docs/testing.md)
WARMUP_S = 120.0        # the busy job runs this long before the first busy command (the load average lags a minute)
QUIET_WAIT_S = 300.0    # at most this long waiting for the 1-minute load average to fall under 0.5 before a quiet run
LOG_ENV, PATH_ENV = "README_TIMES_LOG", "README_TIMES_PYTHONPATH"


# ---------------------------------------------------------------------------- the README's commands
def readme_command(name: str, text: str) -> str:
    """The README's command line for `name`, as written (its comment dropped)."""
    if name == "tests":
        section = re.search(r"^## Tests\n(.*?)(?=^## )", text, re.S | re.M)
        line = section and re.search(r"(python -m pytest[^\n#]*)", section.group(1))
    else:
        script = {"quickstart": "train_multitask.py", "mml": "train_mml.py"}[name]
        line = re.search(rf"(python {script} [^\n#]*)", text)
    if not line:
        sys.exit(f"readme_times: README.md has no `python ...` line for {name}")
    return line.group(1).strip()


def argv_of(name: str, command: str, out_dir: Path, smoke: bool) -> list:
    """The command's arguments with `python` as this interpreter and --out_dir in `out_dir`."""
    argv = [sys.executable, *shlex.split(command)[1:]]
    if name != "tests":
        if "--out_dir" in argv:
            argv[argv.index("--out_dir") + 1] = str(out_dir)
        else:
            argv += ["--out_dir", str(out_dir)]
    return argv + (SMOKE[name] if smoke else [])


# ---------------------------------------------------------------------------- the machine
def machine() -> dict:
    """The CPU by name, family and model (the name alone does not tell one EPYC generation from another), what it
    gives bf16, its usable cores, torch's version."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        field = lambda key: re.search(rf"^{key}\s*:\s*(.*)$", info, re.M).group(1).strip()  # noqa: E731
        name, family, model, flags = field("model name"), field("cpu family"), field("model"), field("flags").split()
    except (OSError, AttributeError):
        name, family, model, flags = platform.processor() or platform.machine(), "?", "?", []
    isa = ("AMX-BF16" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags
           else "AVX512, no native bf16" if "avx512f" in flags else "AVX2 only" if "avx2" in flags else "no AVX2")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": name, "family": family, "model": model, "isa": isa, "bf16": "BF16" in isa, "cores": cores,
            "torch": metadata.version("torch"), "python": sys.version.split()[0]}


def load_now() -> float:
    return os.getloadavg()[0]


class LoadSampler:
    """The 1-minute load average every `every` s while the block runs: its mean and maximum."""

    def __init__(self, every: float):
        self.every, self.samples, self.stop = every, [], threading.Event()

    def __enter__(self):
        self.samples.append(load_now())
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def run(self):
        while not self.stop.wait(self.every):
            self.samples.append(load_now())

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.samples.append(load_now())

    def summary(self) -> dict:
        return {"load_start": round(self.samples[0], 2), "load_mean": round(sum(self.samples) / len(self.samples), 2),
                "load_max": round(max(self.samples), 2)}


class BusyJob:
    """Another user's job on one core: the README's quick start at `--threads 1`, restarted whenever it ends (its
    output discarded, its folders removed). `cpu_seconds()`: the CPU time it has used so far."""

    def __init__(self, command: str, tmp: Path):
        self.command, self.tmp, self.cpu, self.proc, self.done = command, tmp, 0.0, None, threading.Event()

    def __enter__(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def run(self):
        n = 0
        while not self.done.is_set():
            n += 1
            argv = argv_of("quickstart", self.command, self.tmp / f"busy-{n}", smoke=False) + ["--threads", "1"]
            self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env=newcomer_env())
            _, status, usage = os.wait4(self.proc.pid, 0)                 # its CPU time, which Popen.wait drops
            self.cpu += usage.ru_utime + usage.ru_stime
            self.proc.returncode = os.waitstatus_to_exitcode(status)
            shutil.rmtree(self.tmp / f"busy-{n}", ignore_errors=True)
            if self.proc.returncode and not self.done.is_set():
                print(f"readme_times: the busy job stopped with exit status {self.proc.returncode}; restarting it",
                      file=sys.stderr)
                time.sleep(5)

    def cpu_seconds(self) -> float:
        """The finished runs' CPU time and the running one's so far (/proc/PID/stat: utime, stime)."""
        running = 0.0
        try:
            if self.proc and self.proc.returncode is None:
                fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
                running = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
        return self.cpu + running

    def __exit__(self, *exc):
        self.done.set()
        if self.proc and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)                         # our own child, by its pid
        self.thread.join()


def newcomer_env() -> dict:
    """This environment without OMP_NUM_THREADS (the scripts choose their threads) and with unbuffered output."""
    return {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | {"PYTHONUNBUFFERED": "1"}


# ---------------------------------------------------------------------------- one measurement
def run(argv: list, env: dict, every: float) -> dict:
    """Run argv from the repository root, echoing its output: its output, exit status, wall seconds, longest
    silence (seconds between two consecutive output bytes, the start and the end included) and the line before it."""
    t0 = last = time.perf_counter()
    longest, before, out = 0.0, "", bytearray()
    with LoadSampler(every) as load:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        while chunk := os.read(proc.stdout.fileno(), 65536):           # blocks until output; b"" at its end
            now = time.perf_counter()
            if now - last > longest:
                longest, before = now - last, out[-300:].decode(errors="replace").rsplit("\n", 1)[-1] or "(start)"
            out += chunk
            last = now
            sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
        rc = proc.wait()
        if time.perf_counter() - last > longest:
            longest, before = time.perf_counter() - last, out[-300:].decode(errors="replace").rsplit("\n", 1)[-1]
    text = out.decode(errors="replace")
    threads = re.search(r"^threads: .*$", text, re.M)
    return {"rc": rc, "output": text, "wall_s": round(time.perf_counter() - t0, 1), "silence_s": round(longest, 1),
            "silence_after": before.strip()[-120:], "threads_line": threads.group(0) if threads else None,
            **load.summary()}


def measure(name: str, command: str, tmp: Path, smoke: bool, busy) -> dict:
    env, log = newcomer_env(), tmp / f"{name}-{'busy' if busy else 'quiet'}.jsonl"
    if name == "tests":                                                  # this file as a plugin: see the docstring
        env |= {"PYTEST_PLUGINS": "readme_times", LOG_ENV: str(log), PATH_ENV: env.get("PYTHONPATH", ""),
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "bench"), env.get("PYTHONPATH")) if p)}
    cpu0 = busy.cpu_seconds() if busy else 0.0
    got = run(argv_of(name, command, tmp / name, smoke), env, every=1.0 if smoke else 5.0)
    busy_cores = round((busy.cpu_seconds() - cpu0) / got["wall_s"], 2) if busy else None
    output = got.pop("output")
    if name == "quickstart":   # the scores it ends with: the last dev record the script printed
        last = re.findall(r"^\{'epoch'.*\}$", output, re.M)
        got["dev"] = {k: v for k, v in ast.literal_eval(last[-1]).items()
                      if k in ("sst_acc", "para_acc", "sts_pearson", "overall")} if last else None
    shutil.rmtree(tmp / name, ignore_errors=True)
    if got["rc"]:
        sys.exit(f"readme_times: `{command}` failed (exit status {got['rc']}); nothing written")
    got |= {"command": command + (" " + " ".join(SMOKE[name]) if smoke else ""), "date": time.strftime("%Y-%m-%d"),
            "busy_job_cores": busy_cores, **machine()}
    if name == "tests":
        got |= test_counts(output) | {"silent_tests": silent_tests(log)}
    return got


def test_counts(output: str) -> dict:
    """How many tests the command ran (pytest's closing summary) and how many the full suite has."""
    last = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|errors?)\b", line)]
    if not last:
        sys.exit("readme_times: no pytest summary line in the output")
    got = {k: int(n) for n, k in re.findall(r"(\d+) ([a-z]+)", last[-1])}
    if got.get("failed") or got.get("error") or got.get("errors"):
        sys.exit(f"readme_times: the tests had failures ({got}); nothing written")
    collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"],
                               cwd=ROOT, capture_output=True, text=True, env=newcomer_env()).stdout
    return {"ran": sum(v for k, v in got.items() if k in ("passed", "skipped", "xfailed", "xpassed")),
            "suite": int(re.search(r"(\d+) tests? collected", collected).group(1))}


def silent_tests(log: Path, top: int = 8) -> list:
    """The tests whose progress character came longest after the one before: [nodeid, seconds, its phases]. Time
    outside every phase is collection (before the first test) or importing a test module."""
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    gaps, since, parts = [], None, []
    for t, nodeid, when, duration, printed in events:
        parts.append(("the previous test's teardown" if when == "teardown" else when, duration))
        if printed:
            if since is not None:
                rest = t - since - sum(d for _, d in parts)
                words = [f"{w} {d:.1f} s" for w, d in parts if d >= 0.05] + \
                        ([f"outside the tests {rest:.1f} s"] if rest >= 0.5 else [])
                gaps.append([nodeid, round(t - since, 1), ", ".join(words) or "each phase under 0.05 s"])
            since, parts = t, []
    return sorted(gaps, key=lambda g: -g[1])[:top]


# ---------------------------------------------------------------------------- inside the measured pytest
_log = None


def pytest_configure(config):
    """Loaded through PYTEST_PLUGINS by `measure`: open the log and take this plugin out of the environment that
    the tests' child processes inherit."""
    global _log
    if os.environ.get(LOG_ENV):
        _log = open(os.environ.pop(LOG_ENV), "a", buffering=1)
        os.environ.pop("PYTEST_PLUGINS", None)
        os.environ["PYTHONPATH"] = os.environ.pop(PATH_ENV, "")
        if not os.environ["PYTHONPATH"]:
            del os.environ["PYTHONPATH"]
        _log.write(json.dumps([time.time(), "(pytest's start-up and collection)", "start", 0.0, True]) + "\n")


def pytest_runtest_logreport(report):
    """One line per test phase: when it ended, the test, the phase, its seconds, whether `-q` printed a character
    for it (a passed test's call; a setup or teardown only when it did not pass)."""
    if _log:
        printed = report.when == "call" or not report.passed
        _log.write(json.dumps([time.time(), report.nodeid, report.when, report.duration, printed]) + "\n")


# ---------------------------------------------------------------------------- what is written
def cpu_words(m: dict) -> str:
    precision = "bf16" if m["bf16"] else "fp32"
    return (f"{m['cpu']} (family {m['family']}, model {m['model']}; {m['isa']}, so `--amp auto` runs {precision}), "
            f"{m['cores']} cores, torch {m['torch']}")


def render(name: str, results: dict) -> str:
    """README.md's line for `name` from the stored measurements (a condition not measured says so)."""
    got = results.get(name, {})
    quiet, busy = got.get("quiet"), got.get("busy")
    wait = "longest wait for output"
    dev = lambda m: f"; dev overall {m['dev']['overall']:.3f}" if m.get("dev") else ""  # noqa: E731
    q = (f"**{quiet['wall_s'] / 60:.1f} min** on a quiet machine ({wait} {quiet['silence_s']:.0f} s; "
         f"load {quiet['load_start']:.1f} at the start{dev(quiet)})") if quiet else "quiet machine: not measured yet"
    b = (f"**{busy['wall_s'] / 60:.1f} min** with another job busy on one core ({wait} {busy['silence_s']:.0f} s; "
         f"load {busy['load_start']:.1f} at the start, {busy['load_mean']:.1f} over the run{dev(busy)})") if busy \
        else "with another job busy on one core: not measured yet"
    measured = [m for m in (quiet, busy) if m]
    if not measured:
        return f"not measured yet (`python bench/readme_times.py --only {name}`)"
    cpus = sorted({cpu_words(m) for m in measured})
    where = "; ".join(cpus) if len(cpus) == 1 else "; ".join(f"{c}: {cpu_words(m)}" for c, m in
                                                              (("quiet", quiet), ("busy", busy)) if m)
    dates = " and ".join(sorted({m["date"] for m in measured}))
    tail = f"{where}; {dates}; measured by `python bench/readme_times.py`"
    if name != "tests":
        return f"{q}, {b}, on {tail}"
    counted = f"`{measured[0]['command']}` runs **{measured[0]['ran']:,} tests**"
    slow = f"{measured[0]['suite'] - measured[0]['ran']:,} more, marked slow, run in a plain `python -m pytest -q`"
    return f"{counted}: {q}, {b}; {slow}. On {tail}."


def table(results: dict) -> str:
    """bench/results/readme_times.md: every stored measurement, with the tests behind the longest silences."""
    lines = ["# The README's times, quiet and busy", "",
             "Written by `python bench/readme_times.py` (its docstring says how each figure is measured); the "
             "README's lines are rendered from `readme_times.json` beside this file.", "",
             "| command | condition | wall | longest silence | printed before it | load start / mean / max | busy job "
             "(cores) | threads line | CPU | date |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in COMMANDS:
        for cond, m in results.get(name, {}).items():
            lines.append(f"| `{m['command']}` | {cond} | {m['wall_s'] / 60:.1f} min ({m['wall_s']:.0f} s) | "
                         f"{m['silence_s']:.0f} s | `{m['silence_after'].replace('|', '/')}` | {m['load_start']:.1f} / "
                         f"{m['load_mean']:.1f} / {m['load_max']:.1f} | {m['busy_job_cores'] or '-'} | "
                         f"{m['threads_line'] or '-'} | {cpu_words(m)} | {m['date']} |")
    for cond, m in results.get("tests", {}).items():
        lines += ["", f"Quick suite, {cond}: {m['ran']:,} tests of {m['suite']:,}; the longest gaps between two "
                  "progress characters, each with the test that ended it and its phases:", ""]
        lines += [f"- {gap:.1f} s: `{nodeid}` ({parts})" for nodeid, gap, parts in m["silent_tests"]]
    return "\n".join(lines) + "\n"


def rewrite_readme(text: str, results: dict) -> str:
    for name in COMMANDS:
        begin, end = f"<!-- {MARKER[name]}:begin -->", f"<!-- {MARKER[name]}:end -->"
        if begin not in text or end not in text:
            sys.exit(f"readme_times: README.md has no {begin} ... {end} to rewrite")
        sep = lambda m: "\n" if m.group(1).startswith("\n") else ""  # noqa: E731  own lines stay own lines
        text = re.sub(re.escape(begin) + "(.*?)" + re.escape(end),
                      lambda m: f"{begin}{sep(m)}{render(name, results)}{sep(m)}{end}", text, flags=re.S)
    return text


def readme_region(name: str, text: str) -> str:
    """What README.md holds between `name`'s markers, stripped (tests/test_readme.py compares it with render)."""
    return text.split(f"<!-- {MARKER[name]}:begin -->", 1)[1].split(f"<!-- {MARKER[name]}:end -->", 1)[0].strip()


def save(results: dict, into: Path | None = None) -> None:
    """The results, their table and README.md's lines: in the repository, or (a dry run) in a copy under `into`."""
    results_path, table_path, readme = (RESULTS, TABLE, README) if into is None else \
        (into / RESULTS.name, into / TABLE.name, into / README.name)
    results_path.write_text(json.dumps(results, indent=1) + "\n")
    table_path.write_text(table(results))
    readme.write_text(rewrite_readme(README.read_text(encoding="utf-8"), results), encoding="utf-8")


def load_results(path: Path = RESULTS) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


# ---------------------------------------------------------------------------- main
def wait_quiet(limit: float) -> None:
    t0 = time.perf_counter()
    while load_now() >= 0.5 and time.perf_counter() - t0 < limit:
        time.sleep(10)
    if load_now() >= 0.5:
        print(f"readme_times: the load is {load_now():.1f}, not quiet; the quiet figures will say so", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(COMMANDS), help=f"comma-separated, of {', '.join(COMMANDS)}")
    p.add_argument("--conditions", default="quiet,busy", help="quiet, busy or both (quiet runs first)")
    p.add_argument("--dry_run", action="store_true",
                   help="measure; write the results and a README.md into a temporary folder, not the repository")
    p.add_argument("--smoke", action="store_true",
                   help="check this script: a few steps of each command (and tests/test_readme.py only), 5 s of "
                        "warm-up, no wait for a quiet machine; implies --dry_run")
    a = p.parse_args()
    names, conditions = a.only.split(","), a.conditions.split(",")
    if not set(names) <= set(COMMANDS) or not conditions or not set(conditions) <= {"quiet", "busy"}:
        p.error(f"--only takes some of {','.join(COMMANDS)}; --conditions some of quiet,busy")
    warmup, quiet_wait = (5.0, 0.0) if a.smoke else (WARMUP_S, QUIET_WAIT_S)
    a.dry_run = a.dry_run or a.smoke
    text = README.read_text(encoding="utf-8")
    commands = {name: readme_command(name, text) for name in COMMANDS}
    results = {} if a.smoke else load_results()
    into = Path(tempfile.mkdtemp(prefix="readme_times-dry_run-")) if a.dry_run else None
    with tempfile.TemporaryDirectory(prefix="readme_times-") as tmp:
        tmp = Path(tmp)
        for cond in [c for c in ("quiet", "busy") if c in conditions]:
            with BusyJob(commands["quickstart"], tmp) if cond == "busy" else contextlib.nullcontext() as busy:
                if busy:
                    print(f"readme_times: the busy job runs; {warmup:.0f} s before the first command", flush=True)
                    time.sleep(warmup)
                for name in [n for n in COMMANDS if n in names]:
                    if cond == "quiet":
                        wait_quiet(quiet_wait)                          # the previous command's load, too
                    print(f"\nreadme_times: {name}, {cond}: `{commands[name]}`", flush=True)
                    results.setdefault(name, {})[cond] = measure(name, commands[name], tmp, a.smoke, busy)
                    save(results, into)                                 # each as it is measured: a long run may stop
    print("\n" + table(results))
    for name in names:
        print(f"README, {name}: {render(name, results)}")
    busy_tests = results.get("tests", {}).get("busy")
    if "tests" in names and "busy" in conditions and busy_tests["silence_s"] > SILENCE_RULE:
        print(f"readme_times: the quick suite was silent {busy_tests['silence_s']:.0f} s on the busy machine, over "
              f"the {SILENCE_RULE:.0f} s rule; the longest: {busy_tests['silent_tests'][:3]}", file=sys.stderr)
    where = "bench/results/ and README.md" if into is None else f"{into} (a dry run: the repository unchanged)"
    print(f"readme_times: wrote readme_times.json, readme_times.md and README.md's lines in {where}", file=sys.stderr)


if __name__ == "__main__":
    main()
