"""The red team's submissions, graded through the command a teacher runs (bench/results/classroom_red_team.md).

    python bench/classroom_red_team.py [--container]

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
    ("flex attention's eager math_attention", "attention", "attention.py", """
_m = print.__self__.__getattribute__('__imp' + 'ort__')('torch._higher_order_ops.flex_attention', None, None, ['x'])
_am = mask.to(q.dtype).expand(q.shape[0], 1, 1, q.shape[2]).reshape(q.shape[0], q.shape[2])
y = _m.math_attention(q, k, v, lambda s, b, h, qi, ki: s + _am[b, ki], (lambda b, h, qi, ki: qi >= 0,),
                      q.shape[-1] ** -0.5, {})[0]
"""),
    ("a fresh copy of torch/optim/adam.py", "adamw", "adamw.py", """
_b = type(torch).__getattribute__(torch, '__buil' + 'tins__')
_u = _b['__imp' + 'ort__']('importlib.util', None, None, ['x'])
_spec = _u.spec_from_file_location('torch.optim._fresh_adam', torch.__getattribute__('op' + 'tim').__file__.rsplit('/', 1)[0] + '/adam.py')
_fresh = _u.module_from_spec(_spec)
_spec.loader.exec_module(_fresh)
_fresh._single_tensor_adam(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(t - 1.0) for t in steps],
                           None, None, amsgrad=False, has_complex=False, beta1=beta1, beta2=beta2, lr=lr,
                           weight_decay=wd, eps=eps, maximize=False, capturable=False, differentiable=False,
                           decoupled_weight_decay=True)
"""),
    ("scikit-learn after taking the grader's finder off sys.meta_path", "meanshift", "meanshift.py", """
_b = type(np).__getattribute__(np, '__buil' + 'tins__')
_sys = _b['__imp' + 'ort__']('sys')
_sys.meta_path[:] = [f for f in _sys.meta_path if type(f).__name__ != '_RefuseModules']
_mods = _sys.__getattribute__('mod' + 'ules')
for _k in [k for k in _mods if k.startswith('skl' + 'earn')]:
    del _mods[_k]
_sk = _b['__imp' + 'ort__']('skl' + 'earn.cluster', None, None, ['x'])
return float(_sk.__getattribute__('estimate_' + 'bandwidth')(x.reshape(-1, 1), quantile=quantile))
"""),
]


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
    rows = []
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
            print(f"{name}: {key} {report['score']} (flagged lines: {flagged}) {first[:120]}", flush=True)
        level = report.get("output", "")
    where = "under Docker's default capabilities (setpriv)" if args.container else "as root"
    print(f"\n### Graded {where}\n\n{level}\n")
    print("| attack | assignment | points | what the student sees (first failing case) | lines flagged |\n|---|---|---|---|---|")
    for name, key, score, first, flagged in rows:
        print(f"| {name} | {key} | {score} | {first[:140].replace('|', '/')} | {flagged} |")


if __name__ == "__main__":
    main()
