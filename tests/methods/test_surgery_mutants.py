"""The per-parameter surgery classes (PCGrad, GradVac): how they write .grad, what they count, what they return.

Each test here was written for a mutant that survived the rest of the suite (bench/mutation.py,
bench/results/mutation.md names them): a small change to minbert/methods/pcgrad.py or gradvac.py
that no other test failed on.
Oracles: (a) hand-computed cases on linear losses L_k = v_k · w, whose gradient w.r.t. w is exactly
v_k, worked out from Algorithm 1 of Yu et al. 2020 (PCGrad, arXiv:2001.06782); (b) torch's own
backward() for how .grad is written (added to an existing .grad, in the param's dtype, and the same
when autograd hands one gradient tensor to two params); (c) torch.Generator for the saved order.
The classes are looked up by name in minbert.methods.pcgrad / gradvac, wherever they live.
Run: python -m pytest -q tests/methods/test_surgery_mutants.py   (offline, CPU, ~1 s)
"""

import argparse

import pytest
import torch

from minbert.methods import gradient_compromise, gradvac, pcgrad


def surgery_class(name):
    """The class `name` from minbert.methods.pcgrad or minbert.methods.gradvac."""
    for module in (pcgrad, gradvac):
        if hasattr(module, name):
            return getattr(module, name)
    raise AssertionError(f"neither minbert.methods.pcgrad nor minbert.methods.gradvac defines {name}")


CLASSES = ["PCGrad", "GradVac"]   # GradVac with all targets 0 is PCGrad (Wang et al. 2021, Alg. 1)


def linear_losses(w, vectors):
    """L_k = v_k · w: the gradient of L_k w.r.t. w is exactly v_k."""
    return [(torch.tensor(v, dtype=w.dtype) * w).sum() for v in vectors]


def make(name, params, **kw):
    return surgery_class(name)(params, **kw)


# ---------------------------------------------------------------------------- how .grad is written
@pytest.mark.parametrize("name", CLASSES)
def test_apply_adds_to_an_existing_grad_like_backward(name):
    """Non-conflicting tasks: the update is the plain sum, added to what .grad already held, exactly
    as (L0 + L1).backward() adds to it."""
    w = torch.nn.Parameter(torch.zeros(3))
    w.grad = torch.tensor([1.0, 2.0, 3.0])
    surgery = make(name, [w])
    surgery.accumulate(linear_losses(w, [[1, 0, 0], [0, 1, 0]]))
    surgery.apply(order=[0, 1])
    ref = torch.nn.Parameter(torch.zeros(3))
    ref.grad = torch.tensor([1.0, 2.0, 3.0])
    sum(linear_losses(ref, [[1, 0, 0], [0, 1, 0]])).backward()
    torch.testing.assert_close(w.grad, ref.grad, msg=lambda m: f"{name}.apply must add its update to an existing "
                               f".grad as backward() does (p.grad += update): {m}")


@pytest.mark.parametrize("name", CLASSES)
def test_grad_has_the_params_dtype(name):
    """backward() gives a float64 param a float64 .grad; so must apply()."""
    w = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    surgery = make(name, [w])
    surgery.accumulate(linear_losses(w, [[1, 0], [0, 1]]))
    surgery.apply(order=[0, 1])
    assert w.grad.dtype == torch.float64, f"{name}.apply: .grad of a float64 param is {w.grad.dtype}; cast the update to p.dtype"


@pytest.mark.parametrize("name", CLASSES)
def test_a_gradient_autograd_shares_between_two_params_is_weighted_once(name):
    """y = a + b: autograd hands the same gradient tensor to a and b, and the gradient of p.sum() is a
    stride-0 view. With 'mean' (weight 1/2 per task) each param must get (v0 + v1) / 2, as
    ((L0 + L1) / 2).backward() gives: scaling the shared tensor in place would scale it twice."""
    a, b, c = (torch.nn.Parameter(torch.zeros(2)) for _ in range(3))
    v = [torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])]

    def losses(a, b, c):
        return [(v[k] * (a + b)).sum() + (k + 1.0) * c.sum() for k in range(2)]

    surgery = make(name, [a, b, c], reduction="mean")
    surgery.accumulate(losses(a, b, c))
    surgery.apply(order=[0, 1])
    refs = [torch.nn.Parameter(torch.zeros(2)) for _ in range(3)]
    (sum(losses(*refs)) / 2).backward()
    for p, ref, label in zip((a, b, c), refs, "abc"):
        torch.testing.assert_close(p.grad, ref.grad, msg=lambda m: f"{name}.apply ('mean'): param {label} got "
                                   f"{p.grad.tolist()}, backward() gives {ref.grad.tolist()}: a gradient tensor shared "
                                   f"by two params (or a broadcast view) must not be scaled in place: {m}")


@pytest.mark.parametrize("name", CLASSES)
def test_mean_divides_by_the_tasks_present(name):
    """'mean' divides by the number of tasks with a loss this step: 1 of 3 present -> its own gradient."""
    w = torch.nn.Parameter(torch.zeros(2))
    surgery = make(name, [w], reduction="mean")
    surgery.accumulate([linear_losses(w, [[3, 4]])[0], None, None])
    surgery.apply(order=[0, 1, 2])
    torch.testing.assert_close(w.grad, torch.tensor([3.0, 4.0]),
                               msg=lambda m: f"{name}.apply ('mean', one task of three present): {m}")


# ---------------------------------------------------------------------------- what is counted
@pytest.mark.parametrize("name", CLASSES)
def test_conflicts_and_projections_by_hand(name):
    """g0 = (1, 0), g1 = (0, 1), g2 = (−1, 0.5), order 0, 1, 2 (Yu et al. 2020, Alg. 1 by hand).
    Pairs: g0·g1 = 0 (orthogonal: no conflict), g0·g2 = −1 (conflict), g1·g2 = 0.5 (no conflict):
    conflicts = 1. Projections: g0 against g2 (g0' = g0 + g2/1.25 = (0.2, 0.4)) and g2 against g0
    (g2' = g2 + g0 = (0, 0.5)); g1 is untouched: projections = 2, update = (0.2, 1.9)."""
    w = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    surgery = make(name, [w])
    surgery.accumulate(linear_losses(w, [[1, 0], [0, 1], [-1, 0.5]]))
    stats = surgery.apply(order=[0, 1, 2])
    assert stats["conflicts"] == 1, f"{name}.apply: pairs with g_i·g_j < 0 strictly: expected 1 (dots 0, −1, 0.5), got {stats['conflicts']}"
    assert stats["projections"] == 2, f"{name}.apply: projections done: expected 2 (an orthogonal pair is not projected), got {stats['projections']}"
    torch.testing.assert_close(w.grad, torch.tensor([0.2, 1.9], dtype=torch.float64), atol=1e-6, rtol=0,
                               msg=lambda m: f"{name}.apply: update by hand is (0.2, 1.9): {m}")


def test_gradvac_counts_add_up_over_groups_and_no_group_is_skipped():
    """GradVac (targets 0 = PCGrad) with groups [[head], [w1], [w2]]: the head is used by task 0 only,
    w1 and w2 by both tasks with g0 = (1, 0), g1 = (−1, 1) in each. Per shared group: 1 conflict,
    2 projections, update g0' + g1' = (0.5, 0.5) + (0, 1) = (0.5, 1.5). The head-only group must not
    stop the loop over groups, and the counts add over the groups."""
    head, w1, w2 = (torch.nn.Parameter(torch.zeros(2)) for _ in range(3))
    surgery = surgery_class("GradVac")([head, w1, w2], groups=[[0], [1], [2]])
    v0, v1 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])
    surgery.accumulate([(v0 * w1).sum() + (v0 * w2).sum() + head.sum(), (v1 * w1).sum() + (v1 * w2).sum()])
    stats = surgery.apply(order=[0, 1])
    assert (stats["conflicts"], stats["projections"]) == (2, 4), \
        f"GradVac.apply with 2 conflicting groups: expected conflicts 2 and projections 4 (summed over groups), got {stats}"
    for p, label in ((w1, "w1"), (w2, "w2")):
        torch.testing.assert_close(p.grad, torch.tensor([0.5, 1.5]), msg=lambda m: f"GradVac.apply: group {label}: {m}")
    torch.testing.assert_close(head.grad, torch.ones(2), msg=lambda m: f"GradVac.apply: the head gets its own task's gradient: {m}")


@pytest.mark.parametrize("name", CLASSES)
def test_stats_report_finite_steps_and_a_step_with_no_loss(name):
    """apply() returns exactly {'conflicts', 'projections', 'finite'}; finite is True for finite
    gradients, and a step where no task had a loss writes no .grad and is finite."""
    w = torch.nn.Parameter(torch.zeros(2))
    surgery = make(name, [w])
    surgery.accumulate(linear_losses(w, [[1, 0], [0, 1]]))
    stats = surgery.apply(order=[0, 1])
    assert set(stats) == {"conflicts", "projections", "finite"}, f"{name}.apply: returned keys {sorted(stats)}"
    assert stats["finite"] is True, f"{name}.apply: finite gradients reported as finite={stats['finite']}"
    w.grad = None
    surgery.accumulate([None, None])
    stats = surgery.apply(order=[0, 1])
    assert stats["finite"] is True and w.grad is None, \
        f"{name}.apply with no task loss: expected finite True and .grad None, got {stats}, {w.grad}"


# ---------------------------------------------------------------------------- errors name the class
@pytest.mark.parametrize("name", CLASSES)
def test_errors_name_the_class_and_the_call(name):
    cls = surgery_class(name)
    w = torch.nn.Parameter(torch.zeros(2))
    frozen = torch.zeros(2)
    cases = [(lambda: cls([w], reduction="avg"), ValueError, rf"^{name}: reduction must be 'sum' or 'mean'"),
             (lambda: cls([w, w]), ValueError, rf"^{name}: a parameter is listed twice"),
             (lambda: cls([w, torch.nn.Parameter(frozen, requires_grad=False)]), ValueError, rf"^{name}: pass only trainable params"),
             (lambda: cls([w]).apply(), RuntimeError, rf"^{name}\.apply: call accumulate\(losses\) first")]
    for call, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            call()
    surgery = cls([w])
    surgery.accumulate(linear_losses(w, [[1, 0], [0, 1]]))
    with pytest.raises(ValueError, match=rf"^{name}\.accumulate: expected 2 losses"):
        surgery.accumulate(linear_losses(w, [[1, 0]]))
    with pytest.raises(ValueError, match=rf"^{name}\.apply: order must be a permutation of range\(2\)"):
        surgery.apply(order=[0, 0])


# ---------------------------------------------------------------------------- the readable path's shared mask
def test_task_gradients_marks_a_param_shared_by_exactly_two_tasks():
    """3 tasks; w0 used by tasks 0 and 1 only (shared: ≥ 2 users), w1 by task 2 only (a head)."""
    w0, w1 = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(1))
    g, shared = pcgrad.task_gradients([w0.sum(), 2 * w0.sum(), 3 * w1.sum()], [w0, w1])
    assert shared.tolist() == [True, True, False], \
        f"minbert.methods.pcgrad.task_gradients: shared = params used by >= 2 tasks: expected [T, T, F], got {shared.tolist()}"
    torch.testing.assert_close(g, torch.tensor([[1.0, 1, 0], [2, 2, 0], [0, 0, 3]]))
    g, shared = pcgrad.task_gradients([w0.sum()], [w0])               # one task: (1, P), nothing shared
    assert g.shape == (1, 2) and not shared.any(), f"task_gradients with one loss: got {tuple(g.shape)}, {shared.tolist()}"


# ---------------------------------------------------------------------------- what the state dicts return
@pytest.mark.parametrize("name", CLASSES)
def test_state_dict_returns_and_resumes_the_seeded_task_order(name):
    """state_dict()['generator'] is the state of torch.Generator().manual_seed(seed); a class loaded from
    another's state_dict() (after a step) then gives the same .grad on later steps, where the random
    visiting order of 3 conflicting tasks changes the result."""
    w = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    vectors = [[1, 0], [-1, 0.3], [0.2, -1]]                          # every pair conflicts
    original = make(name, [w], seed=7)
    assert torch.equal(original.state_dict()["generator"], torch.Generator().manual_seed(7).get_state()), \
        f"{name}.state_dict()['generator'] must be the state of Generator().manual_seed(seed)"
    original.accumulate(linear_losses(w, vectors))
    original.apply()
    resumed = make(name, [w], seed=99)
    resumed.load_state_dict(original.state_dict())
    for step in range(6):
        got = []
        for surgery in (original, resumed):
            w.grad = None
            surgery.accumulate(linear_losses(w, vectors))
            surgery.apply()
            got.append(w.grad.clone())
        torch.testing.assert_close(got[1], got[0], msg=lambda m: f"{name}: step {step} after load_state_dict "
                                   f"differs from the run it was saved from (the task order's RNG was not restored): {m}")


def test_gradvac_state_dict_holds_a_copy_of_the_targets():
    """Saved targets must not change when training goes on (a view would), and load gives them back."""
    w = torch.nn.Parameter(torch.zeros(2))
    surgery = surgery_class("GradVac")([w], beta=0.5)
    surgery.accumulate(linear_losses(w, [[1, 0], [1, 1]]))
    surgery.apply(order=[0, 1])
    state = surgery.state_dict()
    saved = state["targets"].clone()
    assert saved.abs().sum() > 0, "fixture: the targets should have moved after one step"
    surgery.accumulate(linear_losses(w, [[1, 0], [-1, 1]]))
    surgery.apply(order=[0, 1])
    torch.testing.assert_close(state["targets"], saved, msg=lambda m: "GradVac.state_dict must return a copy "
                               f"of the targets, not a view that later steps change: {m}")
    other = surgery_class("GradVac")([w], beta=0.5)
    other.load_state_dict(state)
    torch.testing.assert_close(other.targets, saved, msg=lambda m: f"GradVac.load_state_dict: {m}")
    assert other.targets.dtype == torch.float64


# ---------------------------------------------------------------------------- GradVac's own edges
def test_gradvac_opposite_gradients_cancel_without_a_math_error():
    """g1 = −0.1 g0 exactly: cos = −1, which float rounding makes −1.0000000000000002 for these
    numbers. With φ̂ = 0.5 the adjustment's √(1 − φ²) term is 0, so g_i' = g_i − (g_i·g_j/‖g_j‖²) g_j
    = 0 for both tasks (Wang et al. 2021, Alg. 1): the update is 0, and no √ of a negative number."""
    g = torch.tensor([[1.0, 1.0, 2.0], [-0.1, -0.1, -0.2]], dtype=torch.float64)
    targets = torch.full((2, 2), 0.5, dtype=torch.float64)
    update = gradvac.gradvac_update(g, [[1], [0]], targets, 0.0)
    torch.testing.assert_close(update, torch.zeros(3, dtype=torch.float64), atol=1e-12, rtol=0,
                               msg=lambda m: f"minbert.methods.gradvac.gradvac_update: opposite gradients: {m}")


def test_gradvac_overflowed_step_counts_no_adjustment():
    """An inf gradient (an overflowed fp16 step): no adjustment counted, targets untouched, finite False."""
    w = torch.nn.Parameter(torch.zeros(2))
    surgery = surgery_class("GradVac")([w])
    surgery.accumulate([(torch.tensor([float("inf"), 0.0]) * w).sum(), (torch.tensor([-1.0, 1.0]) * w).sum()])
    stats = surgery.apply(order=[0, 1])
    assert stats["projections"] == 0 and stats["finite"] is False, f"GradVac.apply on an inf gradient: got {stats}"
    assert surgery.targets.abs().sum() == 0, "GradVac.apply on an inf gradient must leave the targets at 0"


def test_gradvac_arguments_and_their_errors():
    w, v = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    GradVac = surgery_class("GradVac")
    assert GradVac([w], beta=1.0).beta == 1.0 and GradVac([w], beta=0.0).beta == 0.0, "GradVac: beta in [0, 1] is valid"
    with pytest.raises(ValueError, match=r"^GradVac: beta must lie in \[0, 1\], got 1.5"):
        GradVac([w], beta=1.5)
    with pytest.raises(ValueError, match=r"^GradVac: groups must list each index 0\.\.1 of params exactly once"):
        GradVac([w, v], groups=[[0]])
    surgery = GradVac([w])
    surgery.load_state_dict({**GradVac([w]).state_dict(), "targets": torch.zeros(2, 2, 1)})
    with pytest.raises(ValueError, match=r"^GradVac: loaded targets have shape \(2, 2, 1\), but there are 3 tasks and 1 groups"):
        surgery.accumulate(linear_losses(w, [[1, 0], [0, 1], [1, 1]]))
    fresh = GradVac([w])
    fresh.load_state_dict(GradVac([w]).state_dict())          # saved before any step: targets None
    assert fresh.targets is None, "GradVac.load_state_dict of a state saved before any step must keep targets None"


# ---------------------------------------------------------------------------- the flags build the right object
def parse(argv):
    """The surgery flags as the training script has them (--surgery may live in pcgrad or gradvac)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    for module in (pcgrad, gradvac, gradient_compromise):
        if hasattr(module, "add_args"):
            module.add_args(parser)
    return parser.parse_args(argv)


def build(args, model, params, seed):
    """The surgery object as train_multitask.py builds it: PCGrad's from_args (where it has one), else GradVac's."""
    if hasattr(pcgrad, "from_args"):
        built = pcgrad.from_args(args, params, seed)
        if built is not None:
            return built
    return gradvac.from_args(args, model, params, seed)


def test_surgery_flags_build_the_surgery_asked_for():
    w = torch.nn.Parameter(torch.zeros(2))
    v = torch.nn.Parameter(torch.zeros(1))
    model = torch.nn.Module()
    model.w, model.v = w, v
    args = parse([])
    assert (args.surgery, args.gradvac_groups, args.gradvac_beta) == ("none", "model", 0.01), \
        f"defaults: --surgery none, --gradvac_groups model, --gradvac_beta 0.01 (Wang et al. 2021's β), got {args}"
    assert build(args, model, [w, v], seed=3) is None, "--surgery none builds no surgery"
    pc = build(parse(["--surgery", "pcgrad"]), model, [w, v], seed=3)
    assert type(pc) is surgery_class("PCGrad") and pc.params == [w, v], f"--surgery pcgrad built {type(pc).__name__}"
    assert torch.equal(pc.generator.get_state(), torch.Generator().manual_seed(3).get_state()), "from_args must pass seed="
    for argv in (["--surgery", "gradvac", "--gradvac_beta", "0.3", "--gradvac_groups", "matrix"],
                 ["--grad_compromise", "3", "--gradvac_beta", "0.3", "--gradvac_groups", "matrix"]):
        gv = build(parse(argv), model, [w, v], seed=3)
        assert type(gv) is surgery_class("GradVac"), f"{argv} built {type(gv).__name__}"
        assert (gv.params, gv.beta, gv.groups) == ([w, v], 0.3, [[0], [1]]), f"{argv}: beta {gv.beta}, groups {gv.groups}"
        assert torch.equal(gv.generator.get_state(), torch.Generator().manual_seed(3).get_state()), "from_args must pass seed="
    assert parse(["--gradvac_beta", "1"]).gradvac_beta == 1.0
    # per layer (Wang et al. 2021's best): one group per encoder layer, then the rest, in model order
    net = torch.nn.Module()
    net.encoder = torch.nn.Module()
    net.encoder.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)])
    net.head = torch.nn.Linear(2, 1)
    gv = build(parse(["--surgery", "gradvac", "--gradvac_groups", "layer"]), net, list(net.parameters()), seed=0)
    assert gv.groups == [[0, 1], [2, 3], [4, 5]], f"--gradvac_groups layer: groups {gv.groups}, expected [[0, 1], [2, 3], [4, 5]]"
    for bad in (["--gradvac_beta", "0"], ["--gradvac_beta", "1.5"], ["--surgery", "PCGRAD"], ["--gradvac_groups", "layers"]):
        with pytest.raises((SystemExit, argparse.ArgumentError)):
            parse(bad)
