"""Tests for minbert/methods/pcgrad.py: pcgrad_algorithm_1, pcgrad_coefficients and PCGrad (accumulate, apply,
state_dict).

Oracles: (a) exact vectors computed by hand from Yu et al. 2020, Algorithm 1 and Eq. 1, for the paper's loop on
vectors, the coefficients, the readable (K, P) path (task_gradients, pcgrad_update) and the class; (b) plain
backward(), and the paper's loop (pcgrad_algorithm_1, itself checked against (a)) for the Gram form; (c) properties
(no conflict left with two tasks, identity without conflicts, scale invariance, reproducible order).
Gradients are driven exactly by losses of the form w · v_k, whose gradient w.r.t. w is v_k.
Run: python -m pytest -q tests/methods/test_pcgrad.py   (offline, CPU, a few seconds)
"""

import pytest
import torch

from minbert.methods.pcgrad import PCGrad, pcgrad_coefficients, pcgrad_algorithm_1, pcgrad_update, task_gradients

APPLY = "minbert.methods.pcgrad.PCGrad.apply"
ACCUMULATE = "minbert.methods.pcgrad.PCGrad.accumulate"
COEF = "minbert.methods.pcgrad.pcgrad_coefficients"
VECTORS = "minbert.methods.pcgrad.pcgrad_algorithm_1"
UPDATE = "minbert.methods.pcgrad.pcgrad_update"


# ---------------------------------------------------------------------------- helpers
def check(actual, expected, where, atol=1e-6):
    """Fail with the function to fix, both values and the max abs diff."""
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    assert actual.shape == expected.shape, f"`{where}`: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
    diff = (actual - expected).abs().max().item() if actual.numel() else 0.0
    assert diff <= atol, f"`{where}`: expected {expected.tolist()}, got {actual.tolist()} (max abs diff {diff:.3g} > atol {atol})"


def projected_rows(vectors, order):
    """g_i' for every task via pcgrad_coefficients: (K, K) @ (K, P) -> (K, P)."""
    g = torch.tensor(vectors, dtype=torch.float64)
    coef, _ = pcgrad_coefficients(g @ g.T, [[j for j in order if j != i] for i in range(len(g))])
    return coef @ g


def combined(vectors, order=None, reduction="sum", seed=0, scale=1.0):
    """PCGrad on one shared parameter w (P,) with loss_k = w · v_k, so g_k = v_k exactly.
    Returns (w.grad, stats)."""
    vectors = torch.tensor(vectors, dtype=torch.float32)
    w = torch.nn.Parameter(torch.zeros(vectors.shape[1]))
    pc = PCGrad([w], reduction=reduction, seed=seed)
    pc.accumulate([scale * (w @ v) for v in vectors])
    stats = pc.apply(order=order)
    return w.grad, stats


class TwoHeadNet(torch.nn.Module):
    """Shared Linear(4, 8) + tanh, one Linear(8, 1) head per task, and a layer no task uses."""

    def __init__(self, num_tasks=2, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.shared = torch.nn.Linear(4, 8)
        self.heads = torch.nn.ModuleList(torch.nn.Linear(8, 1) for _ in range(num_tasks))
        for head in self.heads[1:]:  # identical heads: the opposed targets then surely conflict
            head.load_state_dict(self.heads[0].state_dict())
        self.unused = torch.nn.Linear(2, 2)

    def losses(self, x, tasks=None):
        """Task k regresses to (−1)^k, so the tasks pull the shared layer in opposite directions."""
        h = torch.tanh(self.shared(x))
        tasks = range(len(self.heads)) if tasks is None else tasks
        return [((self.heads[k](h).squeeze(-1) - (-1.0) ** k) ** 2).mean() if k in tasks else None
                for k in range(len(self.heads))]


def batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(6, 4, generator=g) for _ in range(n)]


def grads_of(model):
    return {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}


# ---------------------------------------------------------------------------- exact oracles
def test_paper_loop_on_vectors_two_and_three_task_oracles():
    """Oracle (a), Algorithm 1 by hand. Two tasks g0=(1,0), g1=(−1,1): g0·g1 = −1 < 0, so
    g0' = g0 − (−1/2) g1 = (0.5, 0.5) and g1' = g1 − (−1/1) g0 = (0, 1). Three tasks, adding g2=(0,−1):
    task 0 visiting 1 then 2 gives (0.5, 0.5), then (g0'·g2 = −0.5) (0.5, 0); visiting 2 first
    (g0·g2 = 0: no projection) then 1 gives (0.5, 0.5): the order matters."""
    g = torch.tensor([[1.0, 0.0], [-1.0, 1.0]], dtype=torch.float64)
    check(pcgrad_algorithm_1(g, [[1], [0]]), [[0.5, 0.5], [0.0, 1.0]], VECTORS, atol=1e-12)
    g3 = torch.tensor([[1.0, 0.0], [-1.0, 1.0], [0.0, -1.0]], dtype=torch.float64)
    check(pcgrad_algorithm_1(g3, [[1, 2], [0, 2], [0, 1]])[0], [0.5, 0.0], VECTORS + " (task 0 visits 1, 2)", atol=1e-12)
    check(pcgrad_algorithm_1(g3, [[2, 1], [0, 2], [0, 1]])[0], [0.5, 0.5], VECTORS + " (task 0 visits 2, 1)", atol=1e-12)


def test_gram_coefficients_equal_the_paper_loop_on_vectors():
    """Oracle (b): the K×K form g_i' = coef[i] · g gives the rows of Algorithm 1 on the (K, P) vectors,
    for random conflicting gradients and random orders, zero-gradient tasks included."""
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        g = torch.randn(4, 7, generator=gen, dtype=torch.float64)
        if trial % 5 == 0:
            g[trial % 4] = 0                                   # a task with no gradient: never projected against
        orders = [[j for j in torch.randperm(4, generator=gen).tolist() if j != i] for i in range(4)]
        coef, _ = pcgrad_coefficients(g @ g.T, orders)
        check(coef @ g, pcgrad_algorithm_1(g, orders), COEF + f" vs {VECTORS} (trial {trial})", atol=1e-10)


def test_pcgrad_removes_conflicting_component_two_task_oracle():
    """Oracle (a): g1=(1,0), g2=(−1,1) → g1'=(0.5,0.5), g2'=(0,1), sum (0.5,1.5), g1'·g2 = 0."""
    rows = projected_rows([[1, 0], [-1, 1]], order=[0, 1])
    check(rows, [[0.5, 0.5], [0.0, 1.0]], COEF, atol=1e-12)
    check(rows[0] @ torch.tensor([-1.0, 1.0], dtype=torch.float64), 0.0, COEF + " (g1'·g2 must be 0)", atol=1e-12)
    grad, stats = combined([[1, 0], [-1, 1]])
    check(grad, [0.5, 1.5], APPLY, atol=1e-6)
    assert stats["conflicts"] == 1 and stats["projections"] == 2, f"`{APPLY}`: stats {stats}, expected 1 conflict, 2 projections"


def test_pcgrad_update_two_task_oracle():
    """Oracle (a), the readable (K, P) path: g1=(1,0), g2=(−1,1) → update g1' + g2' = (0.5, 1.5).
    With only the first coordinate shared, g1 and g2 are opposite there: each is projected to 0
    on it, and the second coordinate (a head of task 2) keeps its own gradient: (0, 1)."""
    g = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    check(pcgrad_update(g, [[1], [0]]), [0.5, 1.5], UPDATE)
    check(pcgrad_update(g, [[1], [0]], shared=torch.tensor([True, False])), [0.0, 1.0], UPDATE + " (shared=[True, False])")
    check(pcgrad_update(torch.tensor([[1.0, 0.2], [0.5, 1.0]]), [[1], [0]]), [1.5, 1.2], UPDATE + " (no conflict: the sum)")


def test_task_gradients_stack_plain_backward_per_task():
    """Oracle (b): row k of g is task k's plain backward() flattened; shared marks the trunk only."""
    model, x = TwoHeadNet(num_tasks=3), batches(1)[0]
    params = [p for p in model.parameters() if p.requires_grad]
    g, shared = task_gradients(model.losses(x), params)
    for k in range(3):
        model.zero_grad(set_to_none=True)
        model.losses(x)[k].backward()
        row = torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1) for p in params])
        check(g[k], row, f"minbert.methods.pcgrad.task_gradients (row {k})")
    want = torch.cat([torch.full((p.numel(),), name.startswith("shared.")) for name, p in model.named_parameters()])
    assert torch.equal(shared, want), "minbert.methods.pcgrad.task_gradients: shared must mark exactly the params ≥ 2 tasks used"


def test_pcgrad_three_tasks_depend_on_order():
    """Oracle (a): G=[(1,0,0),(−1,1,0),(0,−1,1)]: ascending order → sum (0,0.25,1.75) with rows
    (0.5,0.25,0.25),(0,0.5,0.5),(−0.5,−0.5,1); reversed → sum (0.5,0.5,1.5). Row 0 still conflicts
    with g1 afterwards (dot −0.25): sequential projection does not remove every conflict."""
    vectors = [[1, 0, 0], [-1, 1, 0], [0, -1, 1]]
    rows = projected_rows(vectors, order=[0, 1, 2])
    check(rows, [[0.5, 0.25, 0.25], [0, 0.5, 0.5], [-0.5, -0.5, 1]], COEF, atol=1e-12)
    check(rows[0] @ torch.tensor([-1.0, 1.0, 0.0], dtype=torch.float64), -0.25, COEF, atol=1e-12)
    check(combined(vectors, order=[0, 1, 2])[0], [0, 0.25, 1.75], APPLY + " (order=[0, 1, 2])", atol=1e-6)
    check(combined(vectors, order=[2, 1, 0])[0], [0.5, 0.5, 1.5], APPLY + " (order=[2, 1, 0])", atol=1e-6)


# ---------------------------------------------------------------------------- properties
def test_pcgrad_is_identity_without_conflicts():
    """Property (c): all dots ≥ 0 → no projection, the update is the plain sum of gradients."""
    vectors = torch.rand(3, 5, generator=torch.Generator().manual_seed(0))  # positive: no conflicts
    grad, stats = combined(vectors.tolist())
    check(grad, vectors.sum(0), APPLY, atol=1e-6)
    assert stats["projections"] == 0, f"`{APPLY}`: projected {stats['projections']} times without any conflict"


def test_pcgrad_two_tasks_leave_no_conflict():
    """Property (c): with K = 2, each g_i' · g_j ≥ 0 after projection (0 where there was a conflict)."""
    gen = torch.Generator().manual_seed(1)
    for trial in range(20):
        g = torch.randn(2, 10, generator=gen, dtype=torch.float64)
        rows = projected_rows(g.tolist(), order=[0, 1])
        for i, j in ((0, 1), (1, 0)):
            dot = (rows[i] @ g[j]).item()
            assert dot >= -1e-12, f"`{COEF}`: trial {trial}: g_{i}'·g_{j} = {dot:.3g} < 0 after projection"


def test_pcgrad_commutes_with_common_positive_scale():
    """Property (c), the AMP rule: scaling every loss by s scales the update by s."""
    vectors = torch.randn(3, 6, generator=torch.Generator().manual_seed(2)).tolist()
    plain, _ = combined(vectors, order=[0, 1, 2])
    scaled, _ = combined(vectors, order=[0, 1, 2], scale=1024.0)
    check(scaled / 1024.0, plain, APPLY, atol=1e-6)


def test_pcgrad_mean_reduction_is_sum_over_tasks_present():
    """'mean' divides the 'sum' update by K, or by the number of tasks present this step."""
    vectors = [[1, 0, 0], [-1, 1, 0], [0, -1, 1]]
    total, _ = combined(vectors, order=[0, 1, 2])
    mean, _ = combined(vectors, order=[0, 1, 2], reduction="mean")
    check(mean, total / 3, APPLY + " (reduction='mean')", atol=1e-7)
    w = torch.nn.Parameter(torch.zeros(2))
    pc = PCGrad([w], reduction="mean")
    pc.accumulate([w @ torch.tensor([1.0, 0.0]), None, w @ torch.tensor([-1.0, 1.0])])
    pc.apply(order=[0, 1, 2])
    check(w.grad, [0.25, 0.75], APPLY + " (mean over the 2 tasks present of 3)", atol=1e-7)


def test_pcgrad_seeded_order_is_reproducible_and_resumable():
    """Property (c): the same seed gives the same orders; state_dict() resumes the sequence; and
    over 20 steps both outcomes of the order-dependent 3-task example appear (order is random)."""
    vectors = torch.tensor([[1.0, 0, 0], [-1, 1, 0], [0, -1, 1]])
    w = torch.nn.Parameter(torch.zeros(3))

    def run(pc, steps):
        out = []
        for _ in range(steps):
            w.grad = None
            pc.accumulate([w @ v for v in vectors])
            pc.apply()
            out.append(w.grad.clone())
        return torch.stack(out)

    first, second = run(PCGrad([w], seed=5), 20), run(PCGrad([w], seed=5), 20)
    check(second, first, APPLY + " (same seed, same orders)", atol=0.0)
    assert len({tuple(row.tolist()) for row in first}) > 1, f"`{APPLY}`: 20 seeded steps all used the same order"
    pc = PCGrad([w], seed=5)
    run(pc, 7)
    resumed = PCGrad([w], seed=123)
    resumed.load_state_dict(pc.state_dict())
    check(run(resumed, 13), first[7:], "minbert.methods.pcgrad.PCGrad.load_state_dict", atol=0.0)


# ---------------------------------------------------------------------------- integration with a model
def test_pcgrad_single_task_equals_plain_backward():
    """Oracle (b): K = 1 means nothing to project; every .grad equals loss.backward()'s."""
    x = batches(1)[0]
    model = TwoHeadNet(num_tasks=1)
    model.losses(x)[0].backward()
    expected = grads_of(model)
    model.zero_grad(set_to_none=True)
    pc = PCGrad(list(model.parameters()))
    pc.accumulate(model.losses(x))
    pc.apply()
    for name, grad in grads_of(model).items():
        if expected[name] is None:
            assert grad is None, f"`{APPLY}`: {name}.grad should stay None like backward() leaves it"
        else:
            check(grad, expected[name], APPLY + f" ({name})", atol=1e-7)


def test_pcgrad_heads_get_only_their_task_gradient_and_unused_grad_stays_none():
    """Oracle (a)+(b): loss_k = h_k (w · v_k) with h_k = 1 makes the shared w see the oracle
    vectors (sum (0.5, 1.5)); each head h_k gets exactly its own dL_k/dh_k = w · v_k, unprojected;
    a parameter no loss uses keeps .grad None (so AdamW neither updates nor decays it). Then the
    same on a real model with the head params between shared ones in the param list."""
    w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    heads = [torch.nn.Parameter(torch.ones(())) for _ in range(2)]
    idle = torch.nn.Parameter(torch.ones(3))
    v = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    pc = PCGrad([heads[0], w, idle, heads[1]])
    pc.accumulate([heads[k] * (w @ v[k]) for k in range(2)])
    pc.apply()
    check(w.grad, [0.5, 1.5], APPLY + " (shared w)", atol=1e-6)
    check(torch.stack([h.grad for h in heads]), [1.0, 1.0], APPLY + " (heads: w·v_k)", atol=0.0)
    assert idle.grad is None, f"`{APPLY}`: a parameter no task used got .grad {idle.grad}; it must stay None"

    model, x = TwoHeadNet(), batches(1)[0]
    params = [model.heads[0].weight, model.shared.weight, model.heads[1].weight, model.shared.bias,
              model.heads[0].bias, model.heads[1].bias, model.unused.weight]
    losses = model.losses(x)
    own = [torch.autograd.grad(losses[k], list(model.heads[k].parameters()), retain_graph=True) for k in range(2)]
    pc = PCGrad(params)
    pc.accumulate(losses)
    stats = pc.apply()
    assert stats["projections"] > 0, f"`{APPLY}`: the opposed regression targets should conflict; stats {stats}"
    for k in range(2):
        for p, expected in zip(model.heads[k].parameters(), own[k]):
            check(p.grad, expected, APPLY + f" (heads[{k}] must get exactly task {k}'s gradient)", atol=0.0)
    assert model.unused.weight.grad is None, f"`{APPLY}`: unused.weight.grad should stay None"


def test_pcgrad_accumulating_micro_batches_equals_one_call_on_summed_losses():
    """Oracle (b): gradients are linear, so two accumulate() calls (also one task per micro-batch,
    the others None, as the training loop sends them) equal one call on the summed losses."""
    x1, x2 = batches(2)
    for tasks in (None, ([0], [1])):
        model = TwoHeadNet()
        pc = PCGrad(list(model.parameters()))
        pc.accumulate(model.losses(x1, tasks and tasks[0]))
        pc.accumulate(model.losses(x2, tasks and tasks[1]))
        pc.apply(order=[0, 1])
        micro = grads_of(model)
        model.zero_grad(set_to_none=True)
        a, b = model.losses(x1, tasks and tasks[0]), model.losses(x2, tasks and tasks[1])
        pc.accumulate([sum(l for l in pair if l is not None) for pair in zip(a, b)])
        pc.apply(order=[0, 1])
        for name, grad in grads_of(model).items():
            if grad is None:
                assert micro[name] is None, f"`{ACCUMULATE}`: {name}.grad differs in being None"
            else:
                check(micro[name], grad, ACCUMULATE + f" ({name}, tasks {tasks})", atol=1e-6)


def test_pcgrad_with_grad_scaler_matches_unscaled_step():
    """Oracle (b): projecting the GradScaler-scaled gradients, then scaler.step() (or unscale_),
    gives the weights (and grads) of the unscaled computation: one common scale commutes with it."""
    x = batches(1)[0]
    weights = []
    for use_scaler in (False, True):
        model = TwoHeadNet()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        pc = PCGrad(list(model.parameters()))
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12) if use_scaler else None
        pc.accumulate(model.losses(x), scaler=scaler)
        pc.apply(order=[0, 1])
        if scaler is None:
            grads = grads_of(model)
            opt.step()
        else:
            scaler.unscale_(opt)
            for name, grad in grads_of(model).items():
                if grad is not None:
                    check(grad, grads[name], APPLY + f" ({name} after scaler.unscale_)", atol=1e-6)
            scaler.step(opt)
            scaler.update()
        weights.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    check(weights[1], weights[0], APPLY + " with GradScaler", atol=1e-6)


def test_pcgrad_nonfinite_task_gradient_does_not_crash_and_scaler_skips_step():
    """AMP overflow: an inf task gradient gives stats['finite'] = False, and scaler.step skips."""
    w = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    pc = PCGrad([w])
    pc.accumulate([w @ torch.tensor([1.0, 0.0]), w @ torch.tensor([float("inf"), 1.0])], scaler=scaler)
    stats = pc.apply()
    assert stats["finite"] is False, f"`{APPLY}`: stats['finite'] should be False with an inf gradient, got {stats}"
    scaler.step(opt)
    scaler.update()
    check(w.detach(), [1.0, 1.0], APPLY + " (the scaler must skip the step)", atol=0.0)


def test_pcgrad_rejects_bad_arguments():
    w = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="reduction"):
        PCGrad([w], reduction="avg")
    with pytest.raises(ValueError, match="trainable"):
        PCGrad([torch.nn.Parameter(torch.zeros(2), requires_grad=False)])
    pc = PCGrad([w])
    pc.accumulate([w.sum(), w.sum()])
    with pytest.raises(ValueError, match="expected 2 losses"):
        pc.accumulate([w.sum()])
    with pytest.raises(ValueError, match="permutation"):
        pc.apply(order=[0, 0])
