"""Each assignment's own entries on the fence's lists, derived (`python -m minbert classroom allowlists [--write]`):
what its reference runs beyond the shared vocabulary, recorded by the grader's own child (child.py --record) over the
cases of SEEDS. Exit 1 if allowlists_recorded.json
differs; --write rewrites it. docs/classroom.md (The allow-lists) says how.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from minbert.classroom import assignments as C, cases as CASES, grade as G, submission as S
from minbert.classroom.allowlists import review, shared

SEEDS = range(32)            # the cases the recording runs (a test records other seeds, and finds nothing new)


def record(key: str, seeds=SEEDS, template: Path | None = None) -> dict:
    """{"ops": [...], "calls": [...], "errors": [...]}: what the reference of `key` runs over the cases of `seeds`,
    through the grader's child process (not boxed: it runs the instructor's own code); `template`: a package folder
    to run instead of the reference laid over the student copy's template (left-out fast paths removed)."""
    with tempfile.TemporaryDirectory(prefix="minbert-allowlists-") as tmp:
        tmp = Path(tmp)
        template = template or S.write_template(tmp / "template", set(), left_out={key})
        job = tmp / "job"
        G.write_job(job, key, [case for seed in seeds for case in CASES.draw(key, seed)])
        read, write = os.pipe()
        env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
        child = subprocess.Popen([sys.executable, "-I", str(job / "child.py"), str(template), key,
                                  str(job / "inputs.pt"),
                                  str(job), "--record"], close_fds=False, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, preexec_fn=lambda: os.dup2(write, 3))
        os.close(write)
        with os.fdopen(read, "rb") as f:
            data = f.read()
        err = child.communicate()[1]
        if child.returncode or not data:
            raise RuntimeError(f"allowlists: the recording child of {key} failed ({child.returncode}): "
                               f"{err.decode(errors='replace')[-2000:]}")
    return json.loads(data)


def derived(key: str) -> tuple[frozenset, frozenset, list]:
    """(ops, calls) the record of `key` must hold (what its reference runs beyond the vocabulary), and the errors
    its reference raised on the way (none, or the record would allow what a failing reference runs)."""
    got = record(key)
    return frozenset(got["ops"]) - shared()[0], frozenset(got["calls"]) - shared()[1], got["errors"]


def main(keys=None, write=False) -> int:
    """Print how each record's derived lists differ from what it holds; 1 if any differs or needs review; `write`:
    put the derived lists into allowlists_recorded.json (the other records' as they were)."""
    bad, recorded = 0, json.loads(C.RECORDED.read_text(encoding="utf-8"))
    for a in C.ASSIGNMENTS:
        if keys and a.key not in keys:
            continue
        ops, calls, errors = derived(a.key)
        recorded[a.key] = {"ops": sorted(ops), "calls": sorted(calls)}
        print(f"{a.key}: {len(ops)} ops, {len(calls)} calls of its own")
        for what, want, have in (("ops", ops, a.ops), ("calls", calls, a.calls)):
            if want != have:
                bad += 1
                print(f"  DIFFERS {what}: the record lacks {sorted(want - have)}, and holds {sorted(have - want)} "
                      "that the vocabulary now holds or the reference no longer runs")
        for e in errors:
            bad += 1
            print(f"  ERROR the reference raised {e}")
        for line in review(a):
            bad += 1
            print(f"  REVIEW {line}: an answer-computing name? explain it in why_allowed, or remove its use")
    if write:
        C.RECORDED.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
        C._recorded.cache_clear()
        print(f"wrote {C.RECORDED}")
    print("allowlists: OK" if not bad else f"allowlists: {bad} problem(s)")
    return 1 if bad else 0
