"""Instructor-only reference checks moved out of tests/methods/test_surgery_coefficients.py: they compare the graded function with an
independent written-out reference (minbert/classroom/references.py). The student copy leaves this file out;
tests/methods/test_surgery_coefficients.py keeps its property and stored-case checks.
"""

import pytest
import torch

from test_surgery_coefficients import GV, PC, check, gradvac_coefficients, orders_from, pcgrad_coefficients, random_vectors

from minbert.classroom.references import gradvac_on_vectors, pcgrad_on_vectors


@pytest.mark.parametrize("order", [[0, 1, 2], [2, 1, 0]])
def test_pcgrad_three_tasks_match_algorithm_1_on_vectors(order):
    """Oracle (b): Algorithm 1 on the vectors; each dot uses the CURRENT g_i' and the ORIGINAL g_j."""
    g = random_vectors()
    g[2] = -0.5 * g[1] + 0.2 * g[2]
    orders = orders_from(order, 3)
    coef, _ = pcgrad_coefficients(g @ g.T, orders)
    hint = " (hint: g_i'·g_j = coef[i] @ gram[:, j], recomputed after every projection)"
    check(coef @ g, pcgrad_on_vectors(g, orders), f"{PC} (order {order})", hint)


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
