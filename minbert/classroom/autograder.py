"""Gradescope's autograder zip (`build`), the entry point it runs (`run`: results.json whatever happens), and
`classroom check`: the student copy leaks nothing and grades 0, this repository full points, every exploit 0.
"""

import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import traceback
import zipfile
from pathlib import Path

from minbert.classroom import assignments as C, gate
from minbert.classroom.results import results_json, write_json

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the image.
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3 python3-pip git >/dev/null
pip3 install -q -r /autograder/source/requirements.txt
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for each submission; results.json is written whatever happens.
ROOT="${MINBERT_AUTOGRADER_ROOT:-/autograder}"
cd "$ROOT/source" && exec "${PYTHON:-python3}" -m minbert.classroom.autograder run --root "$ROOT"
"""


def build(out: Path, selected=None) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "autograder.zip"
    if target.exists():
        raise C.UserError(f"autograder: {target} exists; pass a new folder")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        for rel in C.tracked_files(C.ROOT):
            if rel.startswith("minbert/") or re.fullmatch(r"requirements[^/]*\.txt", rel):
                z.write(C.ROOT / rel, "source/" + rel)
        if selected:
            z.writestr("source/assignments.txt", ",".join(sorted(selected)) + "\n")
        # The course's secret: mixed into every submission's seed, so that a student who has the grader's source
        # still cannot search for code whose cases happen to be easy. Regrades in this zip stay reproducible.
        z.writestr("source/grader_salt.txt", f"{secrets.randbits(48)}\n")
    return target


def run(root: Path) -> int:
    """Grade root/submission into root/results/results.json, at the `user+chroot` level or better, or not at all
    (Gradescope runs this as root in a default container: another user and a chroot are there, namespaces are not)."""
    results = root / "results" / "results.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        from minbert.classroom import grade as G
        chosen, salt = root / "source" / "assignments.txt", root / "source" / "grader_salt.txt"
        keys = set(chosen.read_text().strip().split(",")) if chosen.exists() else None
        sub = root / "submission"
        entries = G.grade(sub if sub.exists() else root / "missing", keys, handout=keys,
                          require_isolation="user+chroot",
                          salt=int(salt.read_text()) if salt.exists() else None)
        report = results_json(entries, "" if sub.exists() and any(sub.rglob("*.py")) else
                                "no Python file in the submission: upload the repository, its minbert/ folder or "
                                "the graded files (layers.py, attention.py, ...)")
    except C.UserError as e:
        report = {"score": 0, "execution_time": 0, "tests": [], "output": f"{e}; tell the course staff"}
    except KeyboardInterrupt as e:  # SIGTERM, SIGHUP, Ctrl-C (cleanup.Stopped): the grade's cleanup has run
        name = signal.Signals(getattr(e, "signum", signal.SIGINT)).name
        report = {"score": 0, "execution_time": 0, "tests": [],
                  "output": f"the grader was stopped ({name}) before the grade was complete; tell the course staff"}
    except BaseException as e:     # noqa: BLE001 - Gradescope must get a results.json
        report = {"score": 0, "execution_time": 0, "tests": [],
                  "output": f"the grader itself failed; tell the course staff: {type(e).__name__}"}
        traceback.print_exc()      # to the staff's log, not to the student
    write_json(results, report)
    return 0


# ---------------------------------------------------------------------- exploits (check and tests)

def _replace_block(path: Path, key: str, body: str, nth: int = 0):
    """Put `body` (unindented lines) between the markers of the nth `key` block of a file."""
    text = path.read_text()
    lines, (_, first, last) = text.splitlines(keepends=True), [b for b in gate.blocks(text) if b[0] == key][nth]
    indent = lines[first - 2][:len(lines[first - 2]) - len(lines[first - 2].lstrip())]      # the BEGIN line's
    lines[first - 1:last] = [indent + b + "\n" for b in body.splitlines()]
    path.write_text("".join(lines))


PYTEST_PATCH = """import _pytest.reports as _r
_orig = _r.TestReport.from_item_and_call
def _pass(item, call):
    rep = _orig(item, call)
    rep.outcome, rep.longrepr = "passed", None
    return rep
_r.TestReport.from_item_and_call = staticmethod(_pass)
"""


def exploit_init(copy: Path):
    """The 8-line __init__.py that patched pytest's reports."""
    (copy / "minbert" / "__init__.py").write_text(PYTEST_PATCH)
    return "embeddings"


def exploit_patch_in_graded_file(copy: Path):
    """The same patch at the top of a graded file (outside the blocks)."""
    f = copy / C.package_file("attention.py")
    f.write_text(PYTEST_PATCH + (C.ROOT / C.package_file("attention.py")).read_text())   # even with the solution
    return "attention"


def _block_exploit(name: str, file: str, key: str, body: str, doc: str):
    def exploit(copy: Path):
        _replace_block(copy / C.package_file(file), key, body)
        return key
    exploit.__name__, exploit.__doc__ = name, doc
    return exploit


BLOCK_EXPLOITS = [_block_exploit(*e) for e in [
    ("exploit_fixture", "layers.py", "embeddings",
     "import numpy as np\nref = np.load(__file__.rsplit('/minbert/', 1)[0]"
     " + '/tests/fixtures/bert_tiny_reference.npz')\nreturn torch.from_numpy(ref['embeddings'])",
     "Return the stored reference tensor instead of computing."),
    ("exploit_sdpa", "attention.py", "attention", "y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)", ""),
    ("exploit_torch_adamw", "adamw.py", "adamw", "from torch.optim.adamw import adamw as _adamw\n_adamw(params, grads, "
     "exp_avgs, exp_avg_sqs, [], [torch.tensor(t - 1.0) for t in steps], amsgrad=False, beta1=beta1, beta2=beta2, "
     "lr=lr, weight_decay=wd, eps=eps, maximize=False)", "torch's own AdamW kernel (numerically right)."),
    ("exploit_sklearn", "meanshift.py", "meanshift", "from sklearn.cluster import estimate_bandwidth as eb\n"
     "return float(eb(x.reshape(-1, 1), quantile=quantile))", ""),
    ("exploit_exit_early", "pcgrad.py", "surgery", "import os\nos._exit(0)", "os._exit(0) from a solution block.")]]


def exploit_edited_tests(copy: Path):
    """Tests that pass whatever the code: the grader never runs the submission's tests."""
    for f in (copy / "tests").glob("test_*.py"):
        f.write_text("def test_everything():\n    assert True\n")
    return "adamw"


EXPLOITS = [exploit_init, exploit_patch_in_graded_file, *BLOCK_EXPLOITS, exploit_edited_tests]


def leaks(copy: Path) -> list[str]:
    """Where the student copy shows a removed solution line or left-out line, a reference, or the instructor's
    section."""
    removed = set()
    for rel, text in C.solution_files():     # the solutions, and the given code the copy leaves out
        removed |= {ln.strip() for ln in C.strip(text, rel, set(C.BY_KEY))[1] + C.omitted(text, rel, set(C.BY_KEY))[1]
                    if len(ln.strip()) >= 16 and not ln.strip().endswith(":")}
    refs = set(re.findall(r"^def (\w+)", (Path(__file__).parent / "references.py").read_text(), flags=re.M))
    for f in C.ROOT.glob("tests/classroom/test_grader_references_*.py"):    # their helpers too (mistake_hint, ...)
        refs |= {n for n in re.findall(r"^def (\w+)", f.read_text(), flags=re.M) if not n.startswith("test_")}
    found = []
    for path in sorted(copy.rglob("*")):
        if not path.is_file() or ".git" in path.relative_to(copy).parts:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(copy)
        for n, line in enumerate(text.splitlines(), 1):
            hit = next((r for r in removed if r in line), None) or next((r for r in refs if f"def {r}(" in line), None)
            if hit:
                found.append(f"{rel}:{n}: {hit}")
        named = "minbert.classroom" in text and rel != Path("minbert/__main__.py")   # it lists the command, absent here
        if "## Assignments: the classroom edition" in text or named:
            found.append(f"{rel}: the instructor's section or grader is named")
    return found


def check(selected=None) -> int:
    """`classroom check`: 0 when the hand-out is clean and the grader holds; prints each finding."""
    from minbert.classroom import grade as G
    bad = 0
    with tempfile.TemporaryDirectory(prefix="minbert-check-") as tmp:
        copy = Path(tmp) / "copy"
        C.student(copy, selected)
        for leak in leaks(copy):
            print(f"LEAK {leak}")
            bad += 1
        total = lambda es: sum(e["score"] for e in es)
        zero, full = G.grade(copy, selected, handout=selected), G.grade(C.ROOT, selected, handout=selected)
        print(f"student copy: {total(zero):g} / {sum(e['max_score'] for e in zero):g} (expected 0)")
        print(f"this repository: {total(full):g} / {sum(e['max_score'] for e in full):g} (expected full)")
        bad += total(zero) > 0 or total(full) < sum(e["max_score"] for e in full) - 1e-6
        for exploit in EXPLOITS:
            sub = Path(tmp) / exploit.__name__
            shutil.copytree(copy, sub, ignore=shutil.ignore_patterns(".git"))
            key = exploit(sub)
            got = sum(e["score"] for e in G.grade(sub, {key}))
            print(f"exploit {exploit.__name__}: {key} scores {got:g} (expected 0)")
            bad += got > 0
    print("check: OK" if not bad else f"check: {bad} problem(s)")
    return 1 if bad else 0


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(prog="python -m minbert.classroom.autograder")
    p.add_argument("command", choices=["run"])
    p.add_argument("--root", type=Path, default=Path(os.environ.get("MINBERT_AUTOGRADER_ROOT", "/autograder")))
    args = p.parse_args(argv)
    sys.exit(run(args.root))


if __name__ == "__main__":
    main()
