"""Grades the surgery rules of assignment 8 on the Gram matrix: minbert.methods.pcgrad.pcgrad_coefficients
(PCGrad, Yu et al. 2020, arXiv:2001.06782, Algorithm 1) and minbert.methods.gradvac.gradvac_coefficients
(GradVac, Wang et al. 2021, arXiv:2010.05874, Algorithm 1).

Both return coef (K, K) with g_i' = coef[i] · g. Oracles: (a) a hand-computed two-task case;
(b) the algorithms written out on the (K, P) vectors live in the instructor's
tests/classroom/test_grader_references_surgery.py; (c) properties
(no change without conflict, the adjusted cosine equals the target). The PCGrad/GradVac classes
(given code) are not needed. Shapes: K tasks, P coordinates, (K, P) the stack, (K, K) the Gram.
"""

import math

import torch

from minbert.methods.gradvac import gradvac_coefficients
from minbert.methods.pcgrad import pcgrad_coefficients

PC, GV = "minbert.methods.pcgrad.pcgrad_coefficients", "minbert.methods.gradvac.gradvac_coefficients"


def orders_from(order, K):
    return [[j for j in order if j != i] for i in range(K)]


def random_vectors(K=3, P=6, seed=0):
    """(K, P) float64 with some conflicting pairs."""
    g = torch.randn(K, P, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    g[1] = -0.8 * g[0] + 0.6 * g[1]                    # task 1 conflicts with task 0
    return g


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


def test_pcgrad_leaves_non_conflicting_gradients_alone():
    g = torch.tensor([[1.0, 0.2, 0.0], [0.5, 1.0, 0.1], [0.1, 0.3, 1.0]], dtype=torch.float64)
    coef, n = pcgrad_coefficients(g @ g.T, orders_from([0, 1, 2], 3))
    check(coef, torch.eye(3, dtype=torch.float64), PC, " (hint: project only when the dot is negative)")
    assert n == 0, f"{PC}: no pair conflicts, expected 0 projections, got {n}"


# ---------------------------------------------------------------------------- GradVac


def test_gradvac_leaves_pairs_at_or_above_target_alone():
    g = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)     # cos = 0.707
    targets = torch.full((2, 2), 0.5, dtype=torch.float64)
    coef, n = gradvac_coefficients(g @ g.T, orders_from([0, 1], 2), targets, 0.5)
    check(coef, torch.eye(2, dtype=torch.float64), GV, " (hint: adjust only when φ < φ̂)")
    assert n == 0, f"{GV}: cosine above target, expected 0 adjustments, got {n}"
    assert abs(targets[0, 1].item() - (0.25 + 0.5 * math.sqrt(0.5))) <= 1e-12, f"{GV}: the target must move even without an adjustment"
