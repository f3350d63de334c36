"""The red team's submissions, graded through the command a teacher runs (bench/results/classroom_red_team.md).

    python bench/classroom_red_team.py [--container]     (writes bench/results/classroom_red_team[_container].md)
    python bench/classroom_red_team.py --box [--container]   (bench/results/classroom_red_team_box[_container].md)

Builds a student copy, writes each attack into it as a student would (the forged results, the routes past the
library fence, the unreadable zips), and grades each with `python -m minbert classroom grade --json`, as root.
--container grades under Docker's default capabilities (setpriv: no CAP_SYS_ADMIN, so the `user+chroot` box).
Prints, per attack: the points it scored, the first failing line a student sees, and how many of its blocks the
gate refused (each with its one line). Every row must read 0 points.
--box runs the attacks on what a grade leaves behind instead (tests/classroom/test_sandbox_leftovers.py writes
them): a 1,500-deep chain of folders, 100,000 files, 64 MiB files, a memfd, a SysV segment, fork, subprocess; a
grader stopped by SIGTERM, SIGHUP or SIGINT mid-box (and run_autograder by SIGTERM); two grades at once, each box
hunting for the other's files. These grade with the gate reading nothing (the box alone, which they must reach).
Each grade runs with its own empty TMPDIR; per row: points or the refusal, and what was left: in that TMPDIR,
owned by a box's uid in /tmp and /dev/shm, SysV objects of a box's uid.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minbert.classroom import assignments as C, autograder as A       # noqa: E402
from minbert.classroom.assignments import package_file                # noqa: E402
from bench_classroom import cpu                                       # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "classroom"))
from test_gate import ROUTES                                          # noqa: E402
import test_sandbox_leftovers as L                                    # noqa: E402
from classroom_helpers import GRADE_WITHOUT_GATE                       # noqa: E402

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
    cmd = command([sys.executable, "-m", "minbert", "classroom", "grade", str(sub), "--assignments", key, "--json",
                   str(out)], container)
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if r.returncode:
        return {"score": "refused", "tests": [{"output": (r.stderr.strip().splitlines() or ["?"])[-1],
                                               "visibility": "visible"}], "extra_data": {"refused": {}}}
    return json.loads(out.read_text())


def leftovers(grader_tmp: Path) -> str:
    """What a grade left: anything in its TMPDIR, a box's files in /tmp and /dev/shm, a box's SysV objects."""
    found = [f"TMPDIR: {p.name}" for p in grader_tmp.iterdir()] if grader_tmp.exists() else []
    found += [f"{d}: {n}" for d in ("/tmp", "/dev/shm") for n in L.owned_by_boxes(d)] + L.sysv_of_boxes()
    return "; ".join(found) or "nothing"


def command(cmd: list, container: bool) -> list:
    """`cmd`, or under --container `cmd` run by setpriv with Docker's default capabilities."""
    return ["setpriv", f"--bounding-set={DOCKER_CAPS}", "--inh-caps=-all", *cmd] if container else cmd


def box_attacks(copy: Path, tmp: Path, container: bool) -> list[tuple]:
    """(attack, points or refusal, what the student sees, what was left) for each attack on what a grade leaves."""
    rows = []
    grade = GRADE_WITHOUT_GATE          # the gate reads nothing: these attacks are on the box, which they must reach
    for i, (name, attack) in enumerate(L.ATTACKS.items()):
        sub = tmp / f"box{i}"
        shutil.copytree(copy, sub, ignore=shutil.ignore_patterns(".git"))
        A._replace_block(sub / package_file("attention.py"), "attention", textwrap.dedent(L.wins_if(attack)))
        out, grader_tmp = tmp / f"box{i}.json", tmp / f"tmp-box{i}"
        p = L.started(command([*grade, sub, "--assignments", "attention", "--json", out, "--salt", "1"], container),
                      tmp, grader_tmp)
        _, err = p.communicate(timeout=1800)
        report = json.loads(out.read_text()) if out.exists() else None
        first = (report["tests"][0]["output"] if report else (err.strip().splitlines() or ["?"])[-1])
        if report and "(isolation: " in report["output"]:
            box_attacks.level = report["output"].split("(isolation: ", 1)[1].removesuffix(")")
        rows.append((name, report["score"] if report else f"refused ({p.returncode})", first, leftovers(grader_tmp)))
        print(rows[-1], flush=True)
    sub = tmp / "loop"
    shutil.copytree(copy, sub, ignore=shutil.ignore_patterns(".git"))
    A._replace_block(sub / package_file("attention.py"), "attention", "while True:\n    pass")
    for how, signum in (("grade", signal.SIGTERM), ("grade", signal.SIGHUP), ("grade", signal.SIGINT),
                        ("run_autograder", signal.SIGTERM)):
        grader_tmp, out = tmp / f"tmp-{how}-{signum.name}", tmp / f"{how}-{signum.name}.json"
        if how == "grade":
            cmd = [*grade, sub, "--assignments", "attention", "--json", out, "--salt", "1", "--timeout", "600"]
        else:
            root = tmp / f"autograder-{signum.name}"
            (root / "source").mkdir(parents=True)
            (root / "source" / "assignments.txt").write_text("attention\n")
            shutil.copytree(sub, root / "submission", ignore=shutil.ignore_patterns(".git"))
            out = root / "results" / "results.json"
            cmd = [sys.executable, "-m", "minbert.classroom.autograder", "run", "--root", root]
        p = L.started(command([str(c) for c in cmd], container), tmp, grader_tmp)
        uids = L.wait_for_a_box(p)
        p.send_signal(signum)
        _, err = p.communicate(timeout=300)
        alive = [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if L._uid(pid) in uids]
        report = json.loads(out.read_text()) if out.exists() else None
        seen = report["output"] if report else (err.strip().splitlines() or ["?"])[-1]
        rows.append((f"{how} stopped by {signum.name} mid-box", report["score"] if report else
                     f"refused (exit {p.returncode})", seen, leftovers(grader_tmp) +
                     (f"; box processes alive: {alive}" if alive else "")))
        print(rows[-1], flush=True)
    folders = {k: tmp / f"tmp-two-{k}" for k in "ab"}
    procs, outs = {}, {}
    for me, other in (("a", "b"), ("b", "a")):
        folders[me].mkdir()
        folders[me].chmod(0o755)
    for me, other in (("a", "b"), ("b", "a")):
        sub = tmp / f"two-{me}"
        shutil.copytree(copy, sub, ignore=shutil.ignore_patterns(".git"))
        A._replace_block(sub / package_file("attention.py"), "attention", f"# MARKER-{me}\n" + L.wins_if(
            L.hunt(str(folders[other]), f"MARKER-{other}", ROOT / "minbert" / "bert" / "attention.py")))
        outs[me] = tmp / f"two-{me}.json"
        procs[me] = L.started(command([str(c) for c in (*grade, sub, "--assignments", "attention", "--json", outs[me],
                                                         "--salt", "1", "--timeout", "120")], container), tmp, folders[me])
    uids = {me: set() for me in procs}
    while any(p.poll() is None for p in procs.values()):
        for me, p in procs.items():
            uids[me] |= L.box_uids_under(p.pid)
        time.sleep(0.1)
    for me, p in procs.items():
        report = json.loads(outs[me].read_text()) if outs[me].exists() else None
        rows.append((f"two grades at once: box {me} hunts the other's files (uids {sorted(uids[me])})",
                     report["score"] if report else f"refused (exit {p.returncode})",
                     report["tests"][0]["output"] if report else "", leftovers(folders[me])))
        print(rows[-1], flush=True)
    return rows


def main_box(args):
    with tempfile.TemporaryDirectory(prefix="minbert-red-team-") as tmp:
        tmp = Path(tmp)
        C.student(tmp / "copy", None)
        rows = box_attacks(tmp / "copy", tmp, args.container)
    where = "under Docker's default capabilities (setpriv)" if args.container else "as root"
    lines = [f"# What a grade leaves behind: the red team's attacks, graded {where}", "",
             f"`python bench/classroom_red_team.py --box{' --container' if args.container else ''}`. CPU: {cpu()}. "
             f"Isolation: {getattr(box_attacks, 'level', '(no box ran)')}. Each grade ran with its own empty TMPDIR; "
             "\"left\" lists what was in it afterwards, a box's files in /tmp and /dev/shm, and a box's SysV objects.",
             "",
             "| attack | points | what the student sees (first case), or the grader's last line | left |",
             "|---|---|---|---|"]
    lines += [f"| {name} | {score} | {first[:140].replace('|', '/')} | {left} |" for name, score, first, left in rows]
    out = ROOT / "bench" / "results" / f"classroom_red_team_box{'_container' if args.container else ''}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--container", action="store_true", help="grade under Docker's default capabilities (setpriv)")
    p.add_argument("--box", action="store_true", help="the attacks on what a grade leaves behind, not the routes")
    args = p.parse_args()
    if args.box:
        return main_box(args)
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
            flagged = len(report.get("extra_data", {}).get("refused", {}).get(key, []))
            rows.append((name, key, report["score"], first, flagged))
            if "isolation: a separate user" in report.get("output", ""):
                level = report["output"].split("(isolation: ", 1)[1].removesuffix(")")
            print(f"{name}: {key} {report['score']} (blocks refused: {flagged}) {first[:120]}", flush=True)
    where = "under Docker's default capabilities (setpriv)" if args.container else "as root"
    lines = [f"# The red team's submissions, graded {where}", "",
             f"`python bench/classroom_red_team.py{' --container' if args.container else ''}`. CPU: {cpu()}. "
             f"Isolation: {level}", "",
             "| attack | assignment | points | what the student sees (first failing case) | blocks refused by the gate |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {key} | {score} | {first[:140].replace('|', '/')} | {flagged} |"
              for name, key, score, first, flagged in rows]
    out = ROOT / "bench" / "results" / f"classroom_red_team{'_container' if args.container else ''}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
