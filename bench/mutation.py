"""Mutation testing: does some test fail when the code that decides a result is changed a little?

    pip install -r requirements-dev.txt                       # brings mutmut
    OMP_NUM_THREADS=1 python bench/mutation.py minbert/methods/pcgrad.py    # one file
    OMP_NUM_THREADS=1 python bench/mutation.py                # every file in TARGETS (hours on 2 cores)
    python bench/mutation.py --report                         # bench/results/mutation.md from the saved runs

mutmut (https://github.com/boxed/mutmut) makes small changes ("mutants") to one function at a time
(`<` to `<=`, `+ 1` to `+ 2`, a constant, a dropped argument, `x = y` to `x = None`) and runs the
tests that call that function; a mutant no test fails on ("survived") is either a behaviour no
test pins down or an equivalent change (the same behaviour, written differently).

Each file in TARGETS is run on its own, in a scratch copy of this checkout (the git-tracked and
untracked, not ignored files) under --scratch, never in the checkout itself, with only its own
test files: mutmut first runs them once to learn which test calls which function, then runs each
mutant against the tests that call its function (pytest -x). The result per mutant is saved to
bench/results/mutation/<file>.json (with the diff of each survivor), and --report rebuilds
bench/results/mutation.md from those files and the verdicts in EQUIVALENT below.

Left out on purpose: minbert/classroom/ (the grader and its results parsing; being rewritten) and
the scripts' bodies (mutmut mutates functions in a package; train_multitask.py's loop is covered
by hand-written mutants, see the report).
"""

import argparse
import ast
import difflib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "mutation"
REPORT = ROOT / "bench" / "results" / "mutation.md"

# file to mutate -> the test files that grade it (run for each of its mutants). Tests that only
# run a whole script (test_train_*.py) are left out: minutes per mutant for little extra coverage.
T = "tests/"
TARGETS = {
    "minbert/methods/pcgrad.py": [T + "methods/test_pcgrad.py", T + "methods/test_pcgrad_per_param.py",
                                  T + "methods/test_surgery_coefficients.py", T + "methods/test_surgery_mutants.py"],
    "minbert/methods/gradvac.py": [T + "methods/test_gradvac.py", T + "methods/test_pcgrad_per_param.py",
                                   T + "methods/test_surgery_coefficients.py", T + "methods/test_surgery_mutants.py"],
    "minbert/methods/mml.py": [T + "methods/test_mml.py", T + "methods/test_schedule_mutants.py"],
    "minbert/methods/meanshift.py": [T + "methods/test_meanshift.py", T + "methods/test_schedule_mutants.py"],
    "minbert/tasks/sampling.py": [T + "tasks/test_sampling.py", T + "test_loop_mechanics.py"],
    "minbert/run/checkpoint.py": [T + "run/test_checkpoint.py", T + "test_loop_mechanics.py"],
    "minbert/run/optimizer_step.py": [T + "test_loop_mechanics.py"],
    "minbert/adamw.py": [T + "test_adamw.py"],
    "minbert/methods/gradient_compromise.py": [T + "methods/test_gradient_compromise.py"],
    "minbert/methods/pals.py": [T + "methods/test_pals.py"],
    "minbert/methods/smart.py": [T + "methods/test_smart.py"],
    "minbert/methods/r3f.py": [T + "methods/test_r3f.py"],
    "minbert/methods/mnr.py": [T + "methods/test_mnr.py"],
    "minbert/methods/simcse.py": [T + "methods/test_simcse.py"],
    "minbert/methods/loss_scaling.py": [T + "methods/test_loss_scaling.py"],
    "minbert/methods/head_pretraining.py": [T + "methods/test_head_pretraining.py"],
    "minbert/tasks/metrics.py": [T + "tasks/test_metrics.py"],
    "minbert/tasks/pair_heads.py": [T + "tasks/test_pair_heads.py"],
    "minbert/tasks/multitask.py": [T + "tasks/test_multitask.py", T + "tasks/test_head_variants.py"],
    "minbert/tasks/data.py": [T + "tasks/test_data.py"],
    "minbert/tasks/glue.py": [T + "tasks/test_glue.py"],
    "minbert/tasks/embedding_eval.py": [T + "methods/test_simcse.py"],
    "minbert/bert/attention.py": [T + "bert/test_attention.py"],
    "minbert/bert/layers.py": [T + "bert/test_layers.py", T + "bert/test_model.py"],
    "minbert/bert/model.py": [T + "bert/test_model.py"],
    "minbert/bert/config.py": [T + "bert/test_config.py"],
    "minbert/bert/dropout.py": [T + "bert/test_dropout.py"],
    "minbert/bert/tokenizer.py": [T + "bert/test_tokenizer.py"],
}

# mutant name -> why it cannot change a result (an equivalent mutant). Filled in by reading each
# survivor's diff; a survivor not listed here is a gap in the tests, and gets a test instead.
EQUIVALENT: dict[str, str] = {}

# mutmut's exit code per mutant -> status (mutmut.stats.status_by_exit_code)
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", None: "not checked"}


def scratch_copy(scratch: Path) -> None:
    """The checkout's tracked and untracked-not-ignored files, copied to `scratch` (a fresh folder)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file() and not name.startswith("bench/results/"):
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, scratch / name)


def run_one(target: str, scratch_root: Path, collect_only: bool = False) -> dict:
    tests = [t for t in TARGETS[target] if (ROOT / t).exists()]
    scratch = scratch_root / target.replace("/", "_")
    if collect_only:   # read the results of an earlier run in the same scratch folder
        return collect(target, scratch, tests, minutes=None)
    scratch_copy(scratch)
    (scratch / "setup.cfg").write_text(
        "[mutmut]\nsource_paths = minbert\n"
        f"only_mutate = {target}\n"
        "also_copy =\n    pytest.ini\n    data\n    recipes\n    train_multitask.py\n    train_mml.py\n"
        "pytest_add_cli_args_test_selection =\n" + "".join(f"    {t}\n" for t in tests))
    start = time.time()
    log = scratch / "mutmut.log"
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "1"], cwd=scratch,
                       stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONHASHSEED": "0"})
    return collect(target, scratch, tests, minutes=round((time.time() - start) / 60, 1))


def collect(target: str, scratch: Path, tests: list[str], minutes) -> dict:
    meta = scratch / "mutants" / (target + ".meta")
    if not meta.exists():
        raise SystemExit(f"mutmut did not run on {target}: see {scratch / 'mutmut.log'}")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    result = {"file": target, "tests": tests, "minutes": minutes, "mutants": {}}
    for name, code in sorted(codes.items(), key=lambda kv: natural(kv[0])):
        status = STATUS.get(code, "suspicious")
        entry = {"status": status}
        if status != "killed":
            entry["diff"] = mutant_diff(scratch / "mutants" / target, name)
        result["mutants"][name] = entry
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / (target.replace("/", "_") + ".json")).write_text(json.dumps(result, indent=1) + "\n")
    return result


def check_survivors(target: str, scratch_root: Path) -> dict:
    """Run the target's test files as they are now against each mutant the saved run did not kill
    (in that run's scratch copy, whose mutants/ holds every mutant, chosen by MUTANT_UNDER_TEST as
    mutmut does). A mutant some test now fails on becomes "killed", with the failing tests named."""
    path = RESULTS / (target.replace("/", "_") + ".json")
    result = json.loads(path.read_text())
    mutants_dir = scratch_root / target.replace("/", "_") / "mutants"
    shutil.copytree(ROOT / "tests", mutants_dir / "tests", dirs_exist_ok=True)   # the tests as they are now
    tests = [t for t in TARGETS[target] if (ROOT / t).exists()]
    result["tests"] = tests
    for name, entry in result["mutants"].items():
        if entry["status"] == "killed":
            continue
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rf", *tests],
                             cwd=mutants_dir, capture_output=True, text=True, env={**os.environ, "MUTANT_UNDER_TEST": name})
        failed = sorted(set(re.findall(r"^FAILED (\S+)", out.stdout, re.M)))
        if out.returncode == 1 and failed:
            entry.update(status="killed", killed_by=failed)
            print(f"  {name}: killed by {', '.join(failed)}", flush=True)
        elif out.returncode not in (0, 1):
            raise SystemExit(f"pytest could not run for {name} (exit {out.returncode}):\n{out.stdout[-2000:]}")
    path.write_text(json.dumps(result, indent=1) + "\n")
    return result


@functools.cache
def mutated_functions(mutated_file: Path) -> dict[str, str]:
    source = mutated_file.read_text()
    lines = source.splitlines()
    return {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def mutant_diff(mutated_file: Path, name: str) -> str:
    """The lines a mutant changes, read from mutmut's mutated copy of the file, where each mutant is
    a function `<name>` beside the original `<function>__mutmut_orig` (what `mutmut show` prints,
    without starting mutmut once per mutant)."""
    functions = mutated_functions(mutated_file)
    short = name.rsplit(".", 1)[-1]
    original = short.split("__mutmut_")[0] + "__mutmut_orig"
    if short not in functions or original not in functions:
        return "(diff not found)"
    a = functions[original].replace("__mutmut_orig", "").splitlines()
    b = functions[short].replace("__mutmut_" + short.split("__mutmut_")[1], "").splitlines()
    return "\n".join(line for line in difflib.unified_diff(a, b, lineterm="", n=0)
                     if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def natural(name: str):
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", name)]


def report() -> str:
    runs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]
    runs.sort(key=lambda r: list(TARGETS).index(r["file"]) if r["file"] in TARGETS else 99)
    lines = ["# Mutation testing", "",
             "Made by `python bench/mutation.py --report` from bench/results/mutation/*.json (one mutmut run per file,",
             "its own test files only; see the docstring of bench/mutation.py). *killed*: some test failed on the",
             "mutant. *equivalent*: a survivor that cannot change a result, with the reason below.", "",
             "| file | mutants | killed | equivalent | survived | killed % | (killed + equivalent) % | minutes |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    tot = [0, 0, 0, 0]
    for r in runs:
        m = r["mutants"]
        n = len(m)
        killed = sum(e["status"] == "killed" for e in m.values())
        equiv = sum(e["status"] != "killed" and k in EQUIVALENT for k, e in m.items())
        live = n - killed - equiv
        tot = [a + b for a, b in zip(tot, [n, killed, equiv, live])]
        lines.append(f"| `{r['file']}` | {n} | {killed} | {equiv} | {live} | {100 * killed / max(n, 1):.1f} | "
                     f"{100 * (killed + equiv) / max(n, 1):.1f} | {r['minutes']} |")
    n, killed, equiv, live = tot
    lines.append(f"| **all** | {n} | {killed} | {equiv} | {live} | {100 * killed / max(n, 1):.1f} | "
                 f"{100 * (killed + equiv) / max(n, 1):.1f} | |")
    missing = [t for t in TARGETS if t.replace("/", "_") + ".json" not in {p.name for p in RESULTS.glob("*.json")}]
    if missing:
        lines += ["", "Not run yet: " + ", ".join(f"`{t}`" for t in missing) + "."]
    lines += ["", "## Survivors", ""]
    for r in runs:
        for name, e in r["mutants"].items():
            if e["status"] == "killed":
                continue
            verdict = f"equivalent: {EQUIVALENT[name]}" if name in EQUIVALENT else f"**{e['status']}**: no test fails on it"
            lines += [f"### `{name}`", "", verdict, "", "```diff", e.get("diff", ""), "```", ""]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="files of TARGETS to mutate (default: all of them)")
    ap.add_argument("--scratch", default="/tmp/minbert-mutation", help="where the scratch copies go")
    ap.add_argument("--report", action="store_true", help="only rebuild bench/results/mutation.md")
    ap.add_argument("--collect", action="store_true", help="only read the results of the last run in --scratch")
    ap.add_argument("--check", action="store_true",
                    help="rerun only the saved survivors against the tests as they are now (after writing new tests)")
    args = ap.parse_args()
    if not args.report:
        unknown = [f for f in args.files if f not in TARGETS]
        if unknown:
            raise SystemExit(f"not in bench/mutation.py's TARGETS: {unknown}")
        for target in args.files or TARGETS:
            r = (check_survivors(target, Path(args.scratch)) if args.check else
                 run_one(target, Path(args.scratch), collect_only=args.collect))
            survived = [k for k, e in r["mutants"].items() if e["status"] != "killed"]
            print(f"{target}: {len(r['mutants']) - len(survived)}/{len(r['mutants'])} killed in {r['minutes']} min; "
                  f"not killed: {', '.join(survived) or 'none'}", flush=True)
    REPORT.write_text(report())
    print(f"wrote {REPORT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
