"""The runtime fence (minbert/classroom/fence.py): every operator and torch call a submission reaches is checked
against its assignment's allow-lists (allowlists.py, the records in assignments.py).

Oracles: (a) the dispatcher's own list of operators (torch._C._dispatch_get_all_op_names(): every name and
overload torch can run) and torch's public namespaces: everything off an assignment's lists must be refused, by
the name the dispatcher gives it; (b) torch's own kernels, called the ways a red team called them (the fused
AdamW with a 0-dim tensor lr, the SDPA kernels and composites): refused, and seen scoring 10/10 before the fence
(bench/classroom_red_team.py); (c) the reference solutions, recorded on cases the derivation never drew, stay on
their lists.
"""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn.functional as F
from classroom_helpers import ISOLATION, LEVEL, ROOT, solution, student, with_block  # noqa: F401 (student: a fixture)

from minbert.classroom import allowlist_recording, allowlists, assignments as C, autograder, fence as FENCE, grade as G


@contextlib.contextmanager
def fenced(key, layers=("calls", "ops")):
    """The fence of assignment `key` entered in this process (one layer or both; nothing taken away), and taken off
    after."""
    a = C.BY_KEY[key]
    f = FENCE.Fence(a.allowed_ops, a.allowed_calls, key, layers)
    modes = [m for m in f.modes if m is not None]
    for m in modes:
        m.__enter__()
    try:
        yield f
    finally:
        for m in reversed(modes):
            m.__exit__(None, None, None)


def refusal(key, call, layers=("calls", "ops")):
    """The name the fence of `key` refuses `call()` with ('' when it runs)."""
    with fenced(key, layers):
        try:
            call()
        except FENCE.Banned as e:
            return e.op
    return ""


def adamw_tensors(n=2):
    g = torch.Generator().manual_seed(0)
    return [[torch.randn(3, generator=g) for _ in range(n)] for _ in range(4)]


def fused_adamw(lr, tensors=None):
    """torch's fused AdamW step, as the given fast path called it (tensors made outside the fence)."""
    params, grads, m, v = tensors or TENSORS
    torch._fused_adamw_(params, grads, m, v, [], STEPS, lr=lr, beta1=0.9, beta2=0.999,
                        weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)


TENSORS, STEPS = adamw_tensors(), [torch.tensor(1.0)] * 2


def attention_inputs():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=g) for _ in range(3))
    mask = torch.zeros(2, 1, 1, 5)
    mask[1, ..., 3:] = -10000.0
    return q, k, v, mask


# ---------------------------------------------------------------------- the lists, over every name torch has

ALL_OPS = sorted(FENCE.all_op_names())
RESOLVED = {}


def overload(name):
    """The OpOverload object the dispatcher's name stands for (torch.ops.aten.mm.default for 'aten::mm.default')."""
    if name not in RESOLVED:
        ns, _, rest = name.partition("::")
        base, _, ov = rest.partition(".")
        try:
            RESOLVED[name] = getattr(getattr(getattr(torch.ops, ns), base), ov)
        except (AttributeError, RuntimeError):
            RESOLVED[name] = None
    return RESOLVED[name]


@pytest.mark.parametrize("key", list(C.BY_KEY))
def test_every_operator_off_the_list_is_refused_by_its_name_and_overload(key):
    """All of them: each operator overload the dispatcher lists, handed to the dispatch layer as the mode gets it.
    The fused AdamW's tensor_lr overload (10/10 against the deny-list fence, which refused default overloads only)
    is one of them."""
    a = C.BY_KEY[key]
    f = FENCE.Fence(a.allowed_ops, a.allowed_calls, key)
    refused, resolved = set(), 0
    for name in ALL_OPS:
        op = overload(name)
        if op is None:                          # listed by the dispatcher but not reachable from Python: nothing to call
            continue
        resolved += 1
        assert FENCE.op_name(op) == name, f"fence.op_name names {op} {FENCE.op_name(op)!r}, the dispatcher {name!r}"
        try:
            f.check_op(op, ())
        except FENCE.Banned as e:
            assert e.op == name
            refused.add(name)
        f.refusals.clear()
    assert resolved > 3000, f"only {resolved} operators resolved: the test checks too little"
    reachable = {n for n in ALL_OPS if overload(n) is not None}
    assert refused == reachable - a.allowed_ops, f"{key}: allowed but not listed: {sorted(reachable - a.allowed_ops - refused)[:5]}"
    for name in reachable:
        looks = any(w in name for w in ("_fused", "adam", "multi_head", "attention", "transformer_encoder"))
        if looks and name not in a.why_allowed:
            assert name in refused, f"{key} allows {name}, which computes an answer"


@pytest.mark.parametrize("key", list(C.BY_KEY))
def test_every_public_torch_callable_off_the_list_is_refused_by_its_name(key):
    a = C.BY_KEY[key]
    f = FENCE.Fence(a.allowed_ops, a.allowed_calls, key)
    objects = {}
    for where in FENCE.PUBLIC:
        module, _, cls = where.rpartition(".") if where == "torch.Tensor" else (where, "", "")
        owner = getattr(__import__(module, fromlist=["x"]), cls) if cls else __import__(where, fromlist=["x"])
        spaces = [vars(k) for k in type.mro(owner)[:-1]] if isinstance(owner, type) else [vars(owner)]
        for space in spaces:
            for obj in space.values():
                if callable(obj):
                    objects[FENCE.call_name(obj)] = obj
    assert len(objects) > 1500, f"only {len(objects)} public torch callables found"
    for name, obj in objects.items():
        try:
            f.check_call(obj, ())
            assert name in a.allowed_calls, f"{key}: {name} ran though it is not on the list"
        except FENCE.Banned as e:
            assert e.op == name and name not in a.allowed_calls, f"{key}: {name} refused as {e.op}"
        f.refusals.clear()
    for name in ("torch._fused_adamw_", "torch._fused_adam_", "torch._native_multi_head_attention",
                 "torch._transformer_encoder_layer_fwd", "torch.nn.functional.multi_head_attention_forward"):
        assert name in objects and name not in a.allowed_calls, f"{key} allows {name}"


def test_the_shared_vocabulary_holds_no_composite_that_computes_an_answer():
    looks = allowlists.REVIEW
    assert not [n for n in allowlists.elementary_ops() | allowlists.elementary_calls() if looks.search(n)]
    for a in C.ASSIGNMENTS:
        assert not allowlists.review(a), f"{a.key}: unreviewed entries {allowlists.review(a)}"
        assert set(a.why_allowed) <= a.ops | a.calls, f"{a.key}: why_allowed explains names it does not hold"


# ---------------------------------------------------------------------- the routes, called for real

@pytest.mark.parametrize("lr, overload_name", [(torch.tensor(0.01), "aten::_fused_adamw_.tensor_lr"),
                                               (0.01, "aten::_fused_adamw_.default")], ids=["tensor lr", "float lr"])
def test_the_fused_adamw_is_refused_by_either_layer_whatever_the_overload(lr, overload_name):
    """The red team's route: the given fused step with a 0-dim tensor lr took aten::_fused_adamw_.tensor_lr, which the
    deny-list never named: 10/10 at every isolation level. Each layer alone refuses it."""
    assert refusal("adamw", lambda: fused_adamw(lr)) == "torch._fused_adamw_"
    assert refusal("adamw", lambda: fused_adamw(lr), layers=("ops",)) == overload_name
    assert refusal("adamw", lambda: fused_adamw(lr), layers=("calls",)) == "torch._fused_adamw_"
    assert refusal("adamw", lambda: torch.ops.aten._fused_adamw_.tensor_lr(*TENSORS, [], STEPS, lr=lr, beta1=0.9,
                                                                         beta2=0.999, weight_decay=0.0, eps=1e-8,
                                                                         amsgrad=False, maximize=False)) \
        == "torch.ops.aten._fused_adamw_.tensor_lr"


def test_the_attention_composites_are_refused_where_the_dispatch_layer_alone_would_let_them_compute():
    """F.multi_head_attention_forward(need_weights=True) computes softmax attention with addmm, bmm and _softmax, all on
    attention's list: the dispatch layer alone lets it compute. The call layer refuses it by name, as it refuses
    SDPA and its math composite (which decomposes before the dispatch layer: CompositeImplicitAutograd)."""
    q, k, v, mask = attention_inputs()
    w, eye = torch.randn(12, 4), torch.eye(4)
    mha = lambda: F.multi_head_attention_forward(q[0].transpose(0, 1), k[0].transpose(0, 1), v[0].transpose(0, 1),  # noqa: E731
                                                  4, 1, w, None, None, None, False, 0.0, eye, None, need_weights=True)
    assert refusal("attention", mha, layers=("ops",)) == "", "the dispatch layer alone refused what it cannot tell"
    assert refusal("attention", mha, layers=("calls",)) == "torch.nn.functional.multi_head_attention_forward"
    assert refusal("attention", lambda: F.scaled_dot_product_attention(q, k, v), layers=("calls",)) == \
        "torch.nn.functional.scaled_dot_product_attention"
    assert refusal("attention", lambda: torch.ops.aten._scaled_dot_product_attention_math(q, k, v, mask)) == \
        "torch.ops.aten._scaled_dot_product_attention_math"
    assert refusal("attention", lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)) == \
        "torch.nn.functional.scaled_dot_product_attention"
    assert refusal("attention", lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), layers=("ops",)) == \
        "aten::_scaled_dot_product_flash_attention_for_cpu.default"
    assert refusal("layer", lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)) == "", \
        "the layer grades with the given fast attention: its lists allow SDPA (why_allowed)"


def test_a_refusal_fails_the_case_even_when_the_code_catches_it():
    q, k, v, mask = attention_inputs()
    with fenced("attention") as f:
        try:
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        except Exception:                                  # noqa: BLE001 - what a probing submission does
            pass
        y = torch.softmax(q @ k.transpose(-1, -2) + mask, -1) @ v      # then the honest answer
        assert f.case_done("/t")[0] == "torch.nn.functional.scaled_dot_product_attention" and y.shape == q.shape


def test_honest_code_passes_each_layers_check_of_the_other():
    """Each check verifies the other layer, and each mode is set aside while its own handler runs: an operator
    inside a checked call (the backward kernels of torch.autograd.grad), and a call made by an operator outside any call
    (`torch.from_numpy` is no torch function; its operator re-enters the call layer), must pass. The mml reference
    lost two hidden cases to a call layer that saw the operator mode set aside."""
    import numpy as np
    ids, x = torch.arange(4), torch.ones(3, requires_grad=True)
    with fenced("mml") as f:
        keep = torch.from_numpy(np.array([0, 1, 0, 1]) == 0)
        kept, dropped = ids[keep], ids[~keep]
        assert f.case_done("/t") == ("", ""), "the mml reference's own line was refused"
    with fenced("smart") as f:
        grad, = torch.autograd.grad((x * x).sum(), x)
        assert f.case_done("/t") == ("", "") and grad.tolist() == [2.0, 2.0, 2.0]
    assert kept.tolist() == [0, 2] and dropped.tolist() == [1, 3]


class ByCall(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class ByOp(torch.Tensor):
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("layer, subclass", [("calls", ByCall), ("ops", ByOp)])
def test_a_tensor_subclass_is_refused_by_its_layer_alone(layer, subclass):
    """A subclass's own __torch_function__ or __torch_dispatch__ runs outside the mode that called it."""
    x = torch.Tensor._make_subclass(subclass, torch.ones(2))
    assert refusal("attention", lambda: x + 1, (layer,)) == FENCE.SUBCLASS


def test_a_thread_is_refused():
    """Modes are per thread: a thread started by the submission would run without them."""
    import _thread
    saved = _thread.start_new_thread, threading._start_new_thread
    try:
        with fenced("attention") as f:
            FENCE.refuse_threads(f)
            with pytest.raises(FENCE.Banned):
                threading.Thread(target=lambda: None).start()
            assert f.case_done("/t")[0] == FENCE.THREAD
    finally:
        _thread.start_new_thread, threading._start_new_thread = saved


# ---------------------------------------------------------------------- no switch: the fence alone, installed for good

# Each route, as a determined student with the grader's source wrote it (every private name a string handed to the
# `getattr` of a frame's builtins), ends by calling KERNEL[key]; the script reports whether the kernel ran.
GETATTR = "ga = sys._getframe().f_builtins['getattr']\nC_ = ga(torch, '_' + 'C')\n"
SWITCH_OFF = ("for name, off in (('canary', True), ('ops', None), ('calls', None), ('refused', None)):\n"
              "    try:\n        setattr(fence_object, name, off)\n    except AttributeError:\n        pass\n")
FENCE_ROUTES = {
    "the fence object, through a running generator's frame and f_back to the installer's f_locals":
        "def walk():\n    yield it.gi_frame.f_back\nit = walk()\nframe = next(it)\n"
        "while 'f' not in frame.f_locals:\n    frame = frame.f_back\nfence_object = frame.f_locals['f']\n"
        + SWITCH_OFF + "KERNEL()",
    "the fence object, through torch._C's mode stack getter":
        GETATTR + "mode = ga(C_, '_get_function_stack_at')(0)\nfence_object = ga(mode, 'fence', mode)\n"
        + SWITCH_OFF + "KERNEL()",
    "both modes popped, the kernel run, the modes pushed back":
        GETATTR + "fm, dm = ga(C_, '_pop_torch_function_stack')(), ga(C_, '_pop_torch_dispatch_stack')(None)\n"
        "KERNEL()\nga(C_, '_push_on_torch_dispatch_stack')(dm)\nga(C_, '_push_on_torch_function_stack')(fm)",
    "_disable_current_modes for one call":
        GETATTR + "D = ga(ga(torch, 'utils'), '_python' + '_dispatch')\n"
        "with ga(D, '_disable' + '_current_modes')(), ga(C_, 'DisableTorchFunction')():\n    KERNEL()",
    "the Python dispatch key excluded and torch functions disabled for one call":
        GETATTR + "with ga(C_, '_DisableTorchDispatch')(), ga(C_, 'DisableTorchFunction')():\n    KERNEL()",
    "the call mode alone popped (the operators of a composite are on the list)":
        GETATTR + "fm = ga(C_, '_pop_torch_function_stack')()\nKERNEL()\nga(C_, '_push_on_torch_function_stack')(fm)",
}
KERNELS = {"attention": "lambda: F.multi_head_attention_forward(q[0], k[0], v[0], 4, 1, w, None, None, None, False, 0.0, "
                        "eye, None, need_weights=True) if CALL_MODE_ONLY else F.scaled_dot_product_attention(q, k, v)",
           "adamw": "lambda: torch._fused_adamw_(*P, [], [torch.tensor(1.0)] * 2, lr=torch.tensor(0.01), beta1=0.9, "
                    "beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False, maximize=False)"}
FENCED_SCRIPT = """
import json, os, sys
import torch
import torch.nn.functional as F
from minbert.classroom import assignments as C, fence as FENCE
key, route, CALL_MODE_ONLY = sys.argv[1], sys.argv[2], sys.argv[3] == '1'
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(2, 2, 5, 4, generator=g) for _ in range(3))
w, eye, P = torch.randn(12, 4), torch.eye(4), [[torch.randn(3, generator=g) for _ in range(2)] for _ in range(4)]
a = C.BY_KEY[key]
f = FENCE.Fence(a.allowed_ops, a.allowed_calls, key)
f.install()
KERNEL_RUNS = []
KERNEL = lambda: KERNEL_RUNS.append((%s)())
outcome = {'honest': repr(torch.softmax(q * 2, -1).sum() > 0), 'intact': f.case_done('/t')[0]}
try:
    exec(route)
except FENCE.Banned as e:
    outcome['banned'] = e.op
except Exception as e:
    outcome['raised'] = type(e).__name__ + ': ' + str(e)
outcome['ran'], outcome['case'] = bool(KERNEL_RUNS), f.case_done('/t')[0]
os.write(1, ('\\n' + json.dumps(outcome)).encode())
"""


@pytest.fixture(scope="module")
def fenced_routes():
    """{(route, key): what the script saw}: every route against both kernels, each in a process of its own with the
    fence installed for good (as the child installs it), run side by side."""
    procs = {}
    for route, code in FENCE_ROUTES.items():
        for key in [k for k in KERNELS if k == "attention" or "call mode alone" not in route]:
            script = FENCED_SCRIPT % KERNELS[key]
            procs[route, key] = subprocess.Popen(
                [sys.executable, "-c", script, key, code, "1" if "call mode alone" in route else "0"], cwd=ROOT,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seen = {}
    for which, proc in procs.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{which}: the fenced script failed:\n{err[-3000:]}"
        seen[which] = json.loads(out.strip().splitlines()[-1])
    return seen


@pytest.mark.parametrize("route, key", [(r, k) for r in FENCE_ROUTES for k in KERNELS
                                        if k == "attention" or "call mode alone" not in r])
def test_no_route_switches_the_installed_fence_off(route, key, fenced_routes):
    """The fence alone (no static check before it), installed as the child installs it: each way a determined
    student took it down (its object's flags reached through frames or torch's stack getter; its modes popped and
    pushed back; disabled for one call) leaves the library kernel refused, and the case failed. Before, each of
    these let F.scaled_dot_product_attention or torch._fused_adamw_ compute."""
    seen = fenced_routes[route, key]
    assert seen["honest"] == "tensor(True)" and seen["intact"] == "", \
        f"the installed fence refused honest code or printing a tensor: {seen}"
    assert not seen["ran"], f"{route}: the {key} kernel ran past the fence: {seen}"
    assert seen.get("banned") and seen["case"] == seen["banned"], f"{route}: refused without failing the case: {seen}"


# ---------------------------------------------------------------------- the lists are what the references run

@pytest.mark.slow
@pytest.mark.parametrize("key", list(C.BY_KEY))
def test_each_reference_stays_on_its_lists_on_cases_the_derivation_never_drew(key):
    """Recorded through the grader's child process, as grading runs it, on seeds outside allowlist_recording.SEEDS: the
    records hold exactly what the reference runs (beyond the shared vocabulary), and nothing new turns up."""
    a = C.BY_KEY[key]
    got = allowlist_recording.record(key, seeds=range(1000, 1006))
    assert not got["errors"], f"{key}: the reference raised {got['errors']}"
    assert set(got["ops"]) <= a.allowed_ops and set(got["calls"]) <= a.allowed_calls, (
        f"{key}: the reference ran {sorted(set(got['ops']) - a.allowed_ops)} {sorted(set(got['calls']) - a.allowed_calls)}"
        ", which its lists lack: run `python -m minbert classroom allowlists` and review")


@pytest.mark.slow
def test_the_records_hold_what_the_recording_derives():
    """`python -m minbert classroom allowlists` exits 0: no record lacks what its reference runs, or keeps what it
    no longer runs, and every entry that looks like an answer is explained."""
    assert allowlist_recording.main() == 0


# ---------------------------------------------------------------------- the red team's route, end to end

ROUTES = {   # the step block of a one-line AdamW; the schedule block keeps the reference
    "the given fused step with a 0-dim tensor lr":
        "fused_step(params, grads, exp_avgs, exp_avg_sqs, steps, torch.tensor(lr), beta1, beta2, wd, eps)",
    "torch._fused_adamw_ with a 0-dim tensor lr":
        "torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], [torch.tensor(float(t)) for t in steps],\n"
        "                    lr=torch.tensor(lr), beta1=beta1, beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False,\n"
        "                    maximize=False)",
}


def route_submission(student, folder, route):
    sub = with_block(student, folder, "adamw.py", "adamw", ROUTES[route])
    schedule = solution("adamw.py", "adamw").split("# Warm-up")[1]
    autograder._replace_block(sub / "minbert" / "adamw.py", "adamw", "# Warm-up" + schedule, nth=1)
    return sub


def step_points(tests):
    return sum(t["score"] for t in tests if "(steps" in t["name"])


@pytest.mark.slow
@pytest.mark.parametrize("route", list(ROUTES))
def test_the_fused_route_scores_zero_at_every_isolation_level_and_through_run_autograder(route, student, tmp_path,
                                                                                       monkeypatch):
    """10/10 before the fence, at every level, through Gradescope's entry point too, with no integrity flag. The
    schedule block is right, so the steps' cases alone must lose their points."""
    sub = route_submission(student, tmp_path / "sub", route)
    seen = {}
    if ISOLATION:
        seen[LEVEL] = step_points(G.grade(sub, {"adamw"}, salt=3))
    monkeypatch.setattr(G, "_ISOLATION", ("self-check", "forced by the test"))
    seen["self-check"] = step_points(G.grade(sub, {"adamw"}, salt=3, require_isolation=False))
    monkeypatch.undo()
    setpriv = shutil.which("setpriv")
    if setpriv and os.geteuid() == 0:                    # Docker's default capabilities: the user+chroot box
        caps = ("-all,+chown,+dac_override,+fsetid,+fowner,+mknod,+net_raw,+setgid,+setuid,+setfcap,+setpcap,"
                "+net_bind_service,+sys_chroot,+kill,+audit_write")
        out = tmp_path / "container.json"
        r = subprocess.run([setpriv, f"--bounding-set={caps}", "--inh-caps=-all", sys.executable, "-m", "minbert",
                            "classroom", "grade", str(sub), "--assignments", "adamw", "--salt", "3", "--json", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert r.returncode == 0, r.stderr[-2000:]
        seen["user+chroot"] = step_points(json.loads(out.read_text())["tests"])
    if ISOLATION:                                         # Gradescope's run_autograder, as root
        root = tmp_path / "autograder"
        (root / "source").mkdir(parents=True)
        (root / "source" / "assignments.txt").write_text("adamw\n")
        shutil.copytree(sub / "minbert", root / "submission" / "minbert")
        assert autograder.run(root) == 0
        seen["run_autograder"] = step_points(json.loads((root / "results" / "results.json").read_text())["tests"])
    assert seen and all(points == 0 for points in seen.values()), f"{route} scored {seen}"


# ---------------------------------------------------------------------- nothing given in the copy computes an answer

# Given code in the copy's graded files that names a callable which looks like an answer (allowlists.REVIEW), reviewed.
GIVEN_REVIEWED = {
    ("minbert/adamw.py", "torch.optim.lr_scheduler.LambdaLR"): "the schedule's scheduler: it applies the multiplier "
                                                               "the student writes",
    ("minbert/adamw.py", "torch.optim.optimizer.Optimizer"): "AdamW's base class: parameter groups and state, no update",
    ("minbert/bert/attention.py", "torch.nn.functional.scaled_dot_product_attention"):
        "the fast attention the layer and PALs are graded with; attention's cases never run it, its lists refuse it",
}


def test_the_copys_given_code_names_no_answer_but_the_reviewed_ones(student):
    """AdamW's given fused step (torch._fused_adamw_) was left in the copy: a one-line AdamW called it and scored
    10/10. Every torch callable the copy's graded files name outside the blocks (an attribute chain from one of
    the file's imports, resolved without running anything) is either not answer-like or reviewed here."""
    import ast

    from minbert.classroom import fence, submission
    found = set()
    for rel in submission.graded_files(set(C.BY_KEY)):
        tree = ast.parse((student / rel).read_text())
        names = {a.asname or a.name: (f"{n.module}.{a.name}" if isinstance(n, ast.ImportFrom) else a.name)
                 for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        for n in ast.walk(tree):
            parts = []
            while isinstance(n, ast.Attribute):
                parts, n = [n.attr, *parts], n.value
            path = ".".join([names[n.id], *parts]) if isinstance(n, ast.Name) and n.id in names else ""
            obj = fence.resolve(path) if path.startswith("torch") else None
            if obj is not None and callable(obj) and allowlists.REVIEW.search(fence.call_name(obj)):
                found.add((rel, fence.call_name(obj)))
    assert found == set(GIVEN_REVIEWED), (f"given code in the copy names {sorted(found - set(GIVEN_REVIEWED))}: leave it "
                                          "out (### BEGIN LEFT OUT) or review it here")
    assert "def fused_step" not in (student / "minbert" / "adamw.py").read_text()


@pytest.mark.slow
def test_the_copys_given_code_that_each_assignment_runs_stays_on_its_lists(student, tmp_path):
    """The copy itself, every block filled with the reference, run through the child's recording mode on cases the
    derivation never drew: what its given code runs (the harness's objects, the graded functions around the blocks,
    the outputs' conversion) is on each assignment's lists."""
    import textwrap

    from minbert.classroom import gate, submission
    template = tmp_path / "template"
    shutil.copytree(student / "minbert", template / "minbert")
    for rel in submission.graded_files(set(C.BY_KEY)):
        nth = {}
        for key, body, _ in gate.split(C.omit((ROOT / rel).read_text(), rel, set(C.BY_KEY)))[1]:
            autograder._replace_block(template / rel, key, textwrap.dedent(body).strip("\n"), nth=nth.get(key, 0))
            nth[key] = nth.get(key, 0) + 1
    for path in (template, *template.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    for a in C.ASSIGNMENTS:
        got = allowlist_recording.record(a.key, seeds=range(2000, 2002), template=template)
        assert not got["errors"], f"{a.key}: the reference in the copy raised {got['errors']}"
        assert set(got["ops"]) <= a.allowed_ops and set(got["calls"]) <= a.allowed_calls, \
            f"{a.key}: {sorted(set(got['ops']) - a.allowed_ops)} {sorted(set(got['calls']) - a.allowed_calls)}"
