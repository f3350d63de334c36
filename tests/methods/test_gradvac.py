"""Tests for minbert/methods/gradvac.py: gradvac_algorithm_1, gradvac_coefficients and GradVac (targets, EMA, groups,
state).

Oracles: (a) exact vectors computed by hand from Wang et al. 2021, Algorithm 1 (the paper's loop on vectors, the
coefficients, the readable (K, P) path gradvac_update, the class); (b) PCGrad as a live oracle (φ̂ ≡ 0 must give
PCGrad bit for bit), and the paper's loop (gradvac_algorithm_1, itself checked against (a)) for the Gram form;
(c) properties (cosine after adjustment = target, no change above target, EMA convergence, independent groups,
state round trip).
Gradients are driven exactly by losses w · v_k, whose gradient w.r.t. w is v_k.
Run: python -m pytest -q tests/methods/test_gradvac.py   (offline, CPU, a few seconds)
"""

import math

import pytest
import torch

from minbert.methods.gradvac import GradVac, gradvac_coefficients, gradvac_algorithm_1, gradvac_update
from minbert.methods.pcgrad import PCGrad, pcgrad_update
from conftest import check

APPLY = "minbert.methods.gradvac.GradVac.apply"
COEF = "minbert.methods.gradvac.gradvac_coefficients"
VECTORS = "minbert.methods.gradvac.gradvac_algorithm_1"
SQRT_HALF = math.sqrt(0.5)


# ---------------------------------------------------------------------------- helpers
def cos(a, b):
    return (a @ b / (a.norm() * b.norm())).item()


def step(method, w, vectors, order=None):
    """One accumulate + apply with loss_k = w · v_k (None rows = task absent); returns w.grad."""
    w.grad = None
    method.accumulate([None if v is None else w @ v for v in vectors])
    method.apply(order=order)
    return w.grad.clone()


def adjusted_rows(vectors, target, beta=0.0):
    """g_i' for every task via gradvac_coefficients with every φ̂_ij = target. Returns
    ((K, P) rows, (K, K) targets after the step)."""
    g = torch.tensor(vectors, dtype=torch.float64)
    K = len(g)
    targets = torch.full((K, K), float(target), dtype=torch.float64)
    coef, _ = gradvac_coefficients(g @ g.T, [[j for j in range(K) if j != i] for i in range(K)], targets, beta)
    return coef @ g, targets


# ---------------------------------------------------------------------------- oracles
def test_paper_loop_on_vectors_target_half_oracle():
    """Oracle (a), Algorithm 1 by hand: g0=(1,0), g1=(−1,1), φ̂ = 0.5, β = 0.1. φ = cos(g0, g1) = −1/√2 < 0.5, so
    g0' = g0 + ‖g0‖ (0.5·√(1/2) + √(1/2)·√(3/4)) / (√2·√(3/4)) g1 = g0 + 0.78868 g1 = (0.21132, 0.78868), and
    φ̂_01 ← 0.9·0.5 + 0.1·(−1/√2) = 0.37929 (the cosine measured before the adjustment)."""
    g = torch.tensor([[1.0, 0.0], [-1.0, 1.0]], dtype=torch.float64)
    targets = torch.full((2, 2), 0.5, dtype=torch.float64)
    rows = gradvac_algorithm_1(g, [[1], [0]], targets, beta=0.1)
    check(rows[0], [0.21132, 0.78868], VECTORS, atol=1e-5)
    check(targets[0, 1], 0.9 * 0.5 - 0.1 * SQRT_HALF, VECTORS + " (the EMA of φ̂_01)", atol=1e-12)


def test_gram_coefficients_equal_the_paper_loop_on_vectors():
    """Oracle (b): the K×K form g_i' = coef[i] · g and its target updates equal Algorithm 1 on the (K, P) vectors,
    for random gradients, orders and targets."""
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        g = torch.randn(4, 7, generator=gen, dtype=torch.float64)
        orders = [[j for j in torch.randperm(4, generator=gen).tolist() if j != i] for i in range(4)]
        targets = torch.rand(4, 4, generator=gen, dtype=torch.float64) * 1.6 - 0.8
        on_vectors = targets.clone()
        coef, _ = gradvac_coefficients(g @ g.T, orders, targets, 0.3)
        expected = gradvac_algorithm_1(g, orders, on_vectors, 0.3)
        check(coef @ g, expected, COEF + f" vs {VECTORS} (trial {trial})", atol=1e-9)
        check(targets, on_vectors, COEF + f" vs {VECTORS}: the targets (trial {trial})", atol=1e-12)


def test_gradvac_with_zero_target_equals_pcgrad_exactly():
    """Oracle (b): φ̂ ≡ 0 (beta = 0) is PCGrad; same seed → same orders → bitwise equal updates."""
    gen = torch.Generator().manual_seed(0)
    vectors = [torch.randn(4, 9, generator=gen) for _ in range(10)]
    w = torch.nn.Parameter(torch.zeros(9))
    gradvac, pcgrad = GradVac([w], seed=3, beta=0.0), PCGrad([w], seed=3)
    for n, v in enumerate(vectors):
        expected = step(pcgrad, w, v)
        assert torch.equal(step(gradvac, w, v), expected), f"`{APPLY}`: step {n} differs from PCGrad with target 0"
    check(gradvac.targets, torch.zeros(4, 4, 1), APPLY + " (beta=0 must keep the targets at 0)", atol=0.0)
    # The first step of a fresh GradVac (targets still 0) equals PCGrad whatever beta is.
    rows, _ = adjusted_rows([[1, 0], [-1, 1]], target=0.0, beta=0.01)
    check(rows, [[0.5, 0.5], [0.0, 1.0]], COEF + " (target 0: the PCGrad oracle)", atol=1e-12)


def test_gradvac_target_half_oracle():
    """Oracle (a): g1=(1,0), g2=(−1,1), φ̂ = 0.5 → g1'=(0.21132, 0.78868), g2'=(0.57735, 1),
    cos(g1', g2) = 0.5, sum (0.78868, 1.78868)."""
    rows, _ = adjusted_rows([[1, 0], [-1, 1]], target=0.5)
    check(rows, [[0.21132, 0.78868], [0.57735, 1.0]], COEF, atol=1e-5)
    check(cos(rows[0], torch.tensor([-1.0, 1.0], dtype=torch.float64)), 0.5, COEF + " (cos(g1', g2))", atol=1e-5)
    w = torch.nn.Parameter(torch.zeros(2))
    gradvac = GradVac([w], beta=0.0)
    gradvac.accumulate([w @ torch.tensor([1.0, 0.0]), w @ torch.tensor([-1.0, 1.0])])
    gradvac.targets.fill_(0.5)  # φ̂ set directly; the buffers exist after the first accumulate
    stats = gradvac.apply()
    check(w.grad, [0.78868, 1.78868], APPLY, atol=1e-5)
    assert stats["projections"] == 2, f"`{APPLY}`: expected 2 adjustments, stats {stats}"


def test_gradvac_update_two_task_oracle():
    """Oracle (a), the readable (K, P) path: φ̂ = 0.5 → the sum (0.78868, 1.78868) as above, and
    every target moves by β toward the cosine measured before the adjustment (cos(g1, g2) = −0.70711)."""
    g = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    targets = torch.full((2, 2), 0.5, dtype=torch.float64)
    update = gradvac_update(g, [[1], [0]], targets, 0.5)
    check(update, [0.78868, 1.78868], "minbert.methods.gradvac.gradvac_update", atol=1e-5)
    check(targets[0, 1], 0.25 - 0.5 * SQRT_HALF, "minbert.methods.gradvac.gradvac_update (target φ̂_01 after the step)", atol=1e-12)
    # φ̂ ≡ 0 is PCGrad's projection: the same update as pcgrad_update, bit for bit
    g = torch.randn(3, 7, generator=torch.Generator().manual_seed(1))
    orders = [[2, 1], [0, 2], [1, 0]]
    assert torch.equal(gradvac_update(g, orders, torch.zeros(3, 3, dtype=torch.float64), 0.0), pcgrad_update(g, orders)), \
        "minbert.methods.gradvac.gradvac_update with φ̂ = 0 must equal minbert.methods.pcgrad.pcgrad_update"


# ---------------------------------------------------------------------------- properties
def test_gradvac_adjusted_cosine_equals_target():
    """Property (c): with K = 2, after the step cos(g_i', g_j) = φ̂ for every conflicting pair."""
    gen = torch.Generator().manual_seed(1)
    for trial in range(20):
        g = torch.randn(2, 8, generator=gen, dtype=torch.float64)
        target = 0.9 * (2 * torch.rand((), generator=gen, dtype=torch.float64).item() - 1)
        rows, _ = adjusted_rows(g.tolist(), target)
        for i, j in ((0, 1), (1, 0)):
            if cos(g[i], g[j]) < target:
                check(cos(rows[i], g[j]), target, COEF + f" (trial {trial}, pair {i},{j})", atol=1e-9)


def test_gradvac_no_change_when_cosine_at_or_above_target():
    """Property (c): φ = cos(g1, g2) = −0.7071 ≥ φ̂ = −0.9 → the update is the plain sum."""
    rows, _ = adjusted_rows([[1, 0], [-1, 1]], target=-0.9)
    check(rows, [[1.0, 0.0], [-1.0, 1.0]], COEF, atol=0.0)


def test_gradvac_ema_target_moves_up_as_well_as_down():
    """The EMA update runs every step, outside the `if` (unlike LibMTL, where φ̂ can only fall):
    φ = −0.7071 with β = 0.5 pulls φ̂ = 0.5 down to −0.1036 (after an adjustment) and
    φ̂ = −0.9 up to −0.8036 (without one); φ is the cosine *before* the adjustment."""
    for start, expected in ((0.5, 0.5 * 0.5 - 0.5 * SQRT_HALF), (-0.9, -0.5 * 0.9 - 0.5 * SQRT_HALF)):
        _, targets = adjusted_rows([[1, 0], [-1, 1]], target=start, beta=0.5)
        check(targets, [[start, expected], [expected, start]], COEF + f" (EMA from {start})", atol=1e-12)


def test_gradvac_ema_converges_to_a_constant_cosine():
    """Property (c): the same gradients every step → φ̂ → cos(g1, g2) = −0.7071 (β = 0.1, 200 steps)."""
    w = torch.nn.Parameter(torch.zeros(2))
    gradvac = GradVac([w], beta=0.1)
    v = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    for _ in range(200):
        step(gradvac, w, v)
    check(gradvac.targets[:, :, 0], [[0.0, -SQRT_HALF], [-SQRT_HALF, 0.0]], APPLY + " (EMA limit)", atol=1e-6)


def test_gradvac_skips_absent_tasks_and_nonfinite_steps():
    """A task absent this step (zero gradient) and an inf gradient change no target and don't crash."""
    w = torch.nn.Parameter(torch.zeros(2))
    gradvac = GradVac([w], beta=0.5)
    step(gradvac, w, [torch.tensor([1.0, 0.0]), None, torch.tensor([-1.0, 1.0])])
    expected = torch.zeros(3, 3)
    expected[0, 2] = expected[2, 0] = -0.5 * SQRT_HALF
    check(gradvac.targets[:, :, 0], expected, APPLY + " (only the pair of present tasks moves)", atol=1e-7)
    grad = step(gradvac, w, [torch.tensor([1.0, 0.0]), torch.tensor([float("inf"), 1.0]), torch.tensor([-1.0, 1.0])])
    assert not torch.isfinite(grad).all(), f"`{APPLY}`: an inf task gradient should give a non-finite update"
    check(gradvac.targets[:, :, 0], expected, APPLY + " (an inf step must not move the targets)", atol=1e-7)


def test_gradvac_groups_adjust_independently():
    """Property (c): two groups (param a, param b) with their own targets give, on each param,
    exactly what a one-group GradVac on that param alone gives."""
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))
    va = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])
    vb = torch.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 1.0]])
    grouped = GradVac([a, b], beta=0.5, groups=[[0], [1]])
    alone_a, alone_b = GradVac([a], beta=0.5), GradVac([b], beta=0.5)
    # Start group a at φ̂ = 0.5 and group b at 0, set through load_state_dict (as on resume).
    start = torch.zeros(2, 2, 2, dtype=torch.float64)
    start[:, :, 0] = 0.5
    for method, targets in ((grouped, start), (alone_a, start[:, :, :1]), (alone_b, start[:, :, 1:])):
        method.load_state_dict({**method.state_dict(), "targets": targets})
    for n in range(3):
        a.grad = b.grad = None
        grouped.accumulate([a @ va[k] + b @ vb[k] for k in range(2)])
        grouped.apply(order=[0, 1])
        got = a.grad.clone(), b.grad.clone()
        check(got[0], step(alone_a, a, va, order=[0, 1]), APPLY + f" (group 0, step {n})", atol=1e-6)
        check(got[1], step(alone_b, b, vb, order=[0, 1]), APPLY + f" (group 1, step {n})", atol=1e-6)
        check(grouped.targets, torch.cat([alone_a.targets, alone_b.targets], dim=2), APPLY + " (targets)", atol=1e-12)


def test_gradvac_state_dict_round_trip():
    """state_dict() holds the RNG and the (K, K, G) targets: a restored copy continues identically."""
    gen = torch.Generator().manual_seed(2)
    vectors = [torch.randn(3, 5, generator=gen) for _ in range(8)]
    w = torch.nn.Parameter(torch.zeros(5))
    original = GradVac([w], seed=4, beta=0.3)
    for v in vectors[:4]:
        step(original, w, v)
    restored = GradVac([w], seed=99, beta=0.3)
    restored.load_state_dict(original.state_dict())
    for n, v in enumerate(vectors[4:]):
        check(step(restored, w, v), step(original, w, v), "minbert.methods.gradvac.GradVac.load_state_dict" + f" (step {n})", atol=0.0)
    check(restored.targets, original.targets, "minbert.methods.gradvac.GradVac.state_dict", atol=0.0)


def test_gradvac_rejects_groups_that_are_not_a_partition():
    a, b = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))
    for groups in ([[0]], [[0, 1], [1]], [[0], [2]]):
        with pytest.raises(ValueError, match="exactly once"):
            GradVac([a, b], groups=groups)
