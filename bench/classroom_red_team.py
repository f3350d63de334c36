"""The red team's submissions, graded through the command a teacher runs (bench/results/classroom_red_team.md).

    python bench/classroom_red_team.py [--container]     (writes bench/results/classroom_red_team[_container].md)

Builds a student copy, writes each attack into it as a student would (the forged results, the routes past the
library fence, the unreadable zips), and grades each with `python -m minbert classroom grade --json`, as root.
--container grades under Docker's default capabilities (setpriv: no CAP_SYS_ADMIN, so the `user+chroot` box).
Prints, per attack: the points it scored, the first failing line a student sees, and how many of its lines the
instructor's integrity report flags. Every row must read 0 points, or be flagged.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minbert.classroom import assignments as C, autograder as A       # noqa: E402
from minbert.classroom.assignments import package_file                # noqa: E402
from bench_classroom import cpu                                       # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "classroom"))
from test_integrity import ROUTES                                     # noqa: E402

DOCKER_CAPS = "-all,+chown,+dac_override,+fsetid,+fowner,+mknod,+net_raw,+setgid,+setuid,+setfcap,+setpcap," \
              "+net_bind_service,+sys_chroot,+kill,+audit_write"
IMPORT = "_imp = print.__self__.__getattribute__('__imp' + 'ort__')\n"
PICKLED = IMPORT + """torch, _os = _imp('torch'), _imp('os')
_n = len(torch.__getattribute__('lo' + 'ad')(_imp('sys').argv[3], weights_only=True))
_buf = _imp('io').BytesIO()
torch.save(RESULT, _buf)
_os.write(3, _buf.getvalue())
_os._exit(0)
"""
FRAME = IMPORT + """torch, _os, _st = _imp('torch'), _imp('os'), _imp('struct')
_n = len(torch.__getattribute__('lo' + 'ad')(_imp('sys').argv[3], weights_only=True))
_os.write(3, b'minbert-results-1\\n' + _st.pack('=I', _n) + (BODY) * _n)
_os._exit(0)
"""
P = "torch.nn.Parameter(torch.zeros(()), requires_grad=False)"
SHADOWED = f"(lambda p: (p.__setattr__('double', torch.DoubleTensor), p)[1])({P})"
ATTACKS = [
    ("a Parameter whose attribute `double` is torch.DoubleTensor", "meanshift", "meanshift.py",
     PICKLED.replace("RESULT", f"[{{'bandwidth': {SHADOWED}, 'centers': {SHADOWED}, 'labels': {SHADOWED}}}] * _n")),
    ("a list of strings in torch.save's format", "meanshift", "meanshift.py", PICKLED.replace("RESULT", "[''] * _n")),
    ("a frame whose shape claims more data than it sends", "meanshift", "meanshift.py",
     FRAME.replace("BODY", "b'T\\x01\\x09bandwidth\\x01\\x01' + _st.pack('=I', 1000) + b'\\0' * 8")),
    ("a frame with a dtype outside the list", "meanshift", "meanshift.py",
     FRAME.replace("BODY", "b'T\\x01\\x09bandwidth\\xc8\\x00' + b'\\0' * 8")),
    ("a frame of NaN", "meanshift", "meanshift.py",
     FRAME.replace("BODY", "b'T\\x01\\x09bandwidth\\x01\\x00' + _st.pack('=d', float('nan'))")),
]
ATTACKS += [(name, *route[:3]) for name, route in ROUTES.items()]   # the routes past the fence, as the tests write them


def unreadable_zip(kind: str, path: Path) -> Path:
    name = "minbert/methods/meanshift.py"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name, (ROOT / package_file("meanshift.py")).read_bytes())
    data = bytearray(path.read_bytes())
    if kind == "encrypted":
        data[data.find(b"PK\x01\x02") + 8] |= 1
    else:
        data[30 + len(name):30 + len(name) + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    return path


def graded(sub: Path, key: str, out: Path, container: bool) -> dict:
    cmd = [sys.executable, "-m", "minbert", "classroom", "grade", str(sub), "--assignments", key, "--json", str(out)]
    if container:
        cmd = ["setpriv", f"--bounding-set={DOCKER_CAPS}", "--inh-caps=-all", *cmd]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if r.returncode:
        return {"score": "refused", "tests": [{"output": (r.stderr.strip().splitlines() or ["?"])[-1],
                                               "visibility": "visible"}], "extra_data": {"integrity": {}}}
    return json.loads(out.read_text())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--container", action="store_true", help="grade under Docker's default capabilities (setpriv)")
    args = p.parse_args()
    rows, level = [], "(no box ran)"
    with tempfile.TemporaryDirectory(prefix="minbert-red-team-") as tmp:
        tmp = Path(tmp)
        copy = tmp / "copy"
        C.student(copy, None)
        subs = []
        for i, (name, key, file, block) in enumerate(ATTACKS):
            sub = tmp / f"attack{i}"
            shutil.copytree(copy, sub, ignore=shutil.ignore_patterns(".git"))
            A._replace_block(sub / package_file(file), key, textwrap.dedent(block))
            subs.append((name, key, sub))
        for kind in ("encrypted", "corrupt deflate"):
            subs.append((f"a zip: {kind}", "meanshift", unreadable_zip(kind, tmp / f"{kind.replace(' ', '-')}.zip")))
        for name, key, sub in subs:
            report = graded(sub, key, tmp / "results.json", args.container)
            visible = [t for t in report["tests"] if t["visibility"] != "hidden"]
            first = next((t["output"] for t in visible if t.get("score", 0) < t.get("max_score", 1)), "")
            flagged = len(report.get("extra_data", {}).get("integrity", {}).get(key, []))
            rows.append((name, key, report["score"], first, flagged))
            if "isolation: a separate user" in report.get("output", ""):
                level = report["output"].split("(isolation: ", 1)[1].rstrip(")")
            print(f"{name}: {key} {report['score']} (flagged lines: {flagged}) {first[:120]}", flush=True)
    where = "under Docker's default capabilities (setpriv)" if args.container else "as root"
    lines = [f"# The red team's submissions, graded {where}", "",
             f"`python bench/classroom_red_team.py{' --container' if args.container else ''}`. CPU: {cpu()}. "
             f"Isolation: {level}", "",
             "| attack | assignment | points | what the student sees (first failing case) | lines flagged |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {key} | {score} | {first[:140].replace('|', '/')} | {flagged} |"
              for name, key, score, first, flagged in rows]
    out = ROOT / "bench" / "results" / f"classroom_red_team{'_container' if args.container else ''}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
