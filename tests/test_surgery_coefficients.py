"""Grades the surgery rules of assignment 8 on the Gram matrix: minbert.pcgrad.pcgrad_coefficients
(PCGrad, Yu et al. 2020, arXiv:2001.06782, Algorithm 1) and minbert.gradvac.gradvac_coefficients
(GradVac, Wang et al. 2021, arXiv:2010.05874, Algorithm 1).

Both return coef (K, K) with g_i' = coef[i] · g. Oracles: (a) a hand-computed two-task case;
(b) the algorithms written out directly on the (K, P) vectors in float64, here; (c) properties
(no change without conflict, the adjusted cosine equals the target). The PCGrad/GradVac classes
(given code) are not needed. Shapes: K tasks, P coordinates, (K, P) the stack, (K, K) the Gram.
"""

import math

import pytest
import torch

from minbert.gradvac import gradvac_coefficients
from minbert.pcgrad import pcgrad_coefficients

PC, GV = "minbert.pcgrad.pcgrad_coefficients", "minbert.gradvac.gradvac_coefficients"


def orders_from(order, K):
    return [[j for j in order if j != i] for i in range(K)]


def random_vectors(K=3, P=6, seed=0):
    """(K, P) float64 with some conflicting pairs."""
    g = torch.randn(K, P, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    g[1] = -0.8 * g[0] + 0.6 * g[1]                    # task 1 conflicts with task 0
    return g


def pcgrad_on_vectors(g, orders):
    out = []
    for i in range(len(g)):
        gi = g[i].clone()
        for j in orders[i]:
            if gi @ g[j] < 0:
                gi = gi - (gi @ g[j]) / (g[j] @ g[j]) * g[j]
        out.append(gi)
    return torch.stack(out)


def gradvac_on_vectors(g, orders, targets, beta):
    """Returns (g' (K, P), updated targets)."""
    targets, out = targets.clone(), []
    for i in range(len(g)):
        gi = g[i].clone()
        for j in orders[i]:
            ni, nj = gi.norm().item(), g[j].norm().item()
            phi, t = (gi @ g[j]).item() / (ni * nj), targets[i, j].item()
            if phi < t:
                gi = gi + ni * (t * math.sqrt(1 - phi**2) - phi * math.sqrt(1 - t**2)) / (nj * math.sqrt(1 - t**2)) * g[j]
            targets[i, j] = (1 - beta) * t + beta * phi
        out.append(gi)
    return torch.stack(out), targets


def check(got, want, where, hint=""):
    assert got.shape == want.shape, f"{where}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
    d = (got - want).abs().max().item()
    assert d <= 1e-9, f"{where}: expected {want.tolist()}, got {got.tolist()} (max |Δ| {d:.2e}){hint}"


# ---------------------------------------------------------------------------- PCGrad

def test_pcgrad_two_tasks_remove_the_conflicting_component():
    """Oracle (a): g_0 = (1, 0), g_1 = (−1, 1): g_0' = g_0 + ½·g_1 = (½, ½), g_1' = g_1 + g_0 = (0, 1)."""
    g = torch.tensor([[1.0, 0.0], [-1.0, 1.0]], dtype=torch.float64)
    coef, n = pcgrad_coefficients(g @ g.T, orders_from([0, 1], 2))
    got = coef @ g
    hint = " (hint: subtract the projection, g_i' − (g_i'·g_j/‖g_j‖²)·g_j, only when g_i'·g_j < 0)"
    check(got, torch.tensor([[0.5, 0.5], [0.0, 1.0]], dtype=torch.float64), PC, hint)
    assert n == 2, f"{PC}: expected 2 projections (one per task), got {n}"


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 1, 0]])
def test_pcgrad_three_tasks_match_algorithm_1_on_vectors(order):
    """Oracle (b): Algorithm 1 on the vectors; each dot uses the CURRENT g_i' and the ORIGINAL g_j."""
    g = random_vectors()
    g[2] = -0.5 * g[1] + 0.2 * g[2]
    orders = orders_from(order, 3)
    coef, _ = pcgrad_coefficients(g @ g.T, orders)
    hint = " (hint: g_i'·g_j = coef[i] @ gram[:, j], recomputed after every projection)"
    check(coef @ g, pcgrad_on_vectors(g, orders), f"{PC} (order {order})", hint)


def test_pcgrad_leaves_non_conflicting_gradients_alone():
    g = torch.tensor([[1.0, 0.2, 0.0], [0.5, 1.0, 0.1], [0.1, 0.3, 1.0]], dtype=torch.float64)
    coef, n = pcgrad_coefficients(g @ g.T, orders_from([0, 1, 2], 3))
    check(coef, torch.eye(3, dtype=torch.float64), PC, " (hint: project only when the dot is negative)")
    assert n == 0, f"{PC}: no pair conflicts, expected 0 projections, got {n}"


# ---------------------------------------------------------------------------- GradVac

def test_gradvac_with_zero_targets_is_pcgrad():
    """With φ̂ = 0 the GradVac rule is PCGrad's projection (oracle (b): PCGrad on vectors)."""
    g = random_vectors(seed=1)
    orders = orders_from([2, 0, 1], 3)
    coef, _ = gradvac_coefficients(g @ g.T, orders, torch.zeros(3, 3, dtype=torch.float64), 0.01)
    check(coef @ g, pcgrad_on_vectors(g, orders), f"{GV} (φ̂ = 0)")


def test_gradvac_adjusted_cosine_equals_the_target():
    """Property: after adjusting g_0 toward g_1 with target 0.5, cos(g_0', g_1) = 0.5 (two tasks)."""
    g = random_vectors(K=2, seed=2)
    targets = torch.full((2, 2), 0.5, dtype=torch.float64)
    coef, n = gradvac_coefficients(g @ g.T, orders_from([0, 1], 2), targets, 0.0)
    g0 = coef[0] @ g
    cos = (g0 @ g[1] / (g0.norm() * g[1].norm())).item()
    assert abs(cos - 0.5) <= 1e-9, f"{GV}: after the adjustment cos(g_0', g_1) should equal the target 0.5, got {cos:.6f}"
    assert n == 2, f"{GV}: both tasks are below target, expected 2 adjustments, got {n}"
    check(coef @ g, gradvac_on_vectors(g, orders_from([0, 1], 2), torch.full((2, 2), 0.5, dtype=torch.float64), 0.0)[0], GV)


def test_gradvac_targets_follow_the_ema_of_the_cosine():
    """φ̂ ← (1 − β)·φ̂ + β·φ, with φ measured BEFORE the adjustment, for every visited pair, in place."""
    g = random_vectors(seed=3)
    orders = orders_from([1, 2, 0], 3)
    start = torch.tensor([[0.0, 0.3, -0.2], [0.1, 0.0, 0.4], [-0.5, 0.2, 0.0]], dtype=torch.float64)
    targets = start.clone()
    coef, _ = gradvac_coefficients(g @ g.T, orders, targets, 0.25)
    want_g, want_targets = gradvac_on_vectors(g, orders, start, 0.25)
    check(targets, want_targets, f"{GV}: targets after one call",
          " (hint: update targets[i, j] in place on every visit, with the cosine before the adjustment)")
    check(coef @ g, want_g, GV)


def test_gradvac_leaves_pairs_at_or_above_target_alone():
    g = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)     # cos = 0.707
    targets = torch.full((2, 2), 0.5, dtype=torch.float64)
    coef, n = gradvac_coefficients(g @ g.T, orders_from([0, 1], 2), targets, 0.5)
    check(coef, torch.eye(2, dtype=torch.float64), GV, " (hint: adjust only when φ < φ̂)")
    assert n == 0, f"{GV}: cosine above target, expected 0 adjustments, got {n}"
    assert abs(targets[0, 1].item() - (0.25 + 0.5 * math.sqrt(0.5))) <= 1e-12, f"{GV}: the target must move even without an adjustment"
