"""Instructor-only reference checks moved out of tests/methods/test_pcgrad.py: they compare the graded function with an
independent written-out reference (minbert/classroom/references.py). The student copy leaves this file out;
tests/methods/test_pcgrad.py keeps its property and stored-case checks.
"""

import torch

from test_pcgrad import COEF, check, pcgrad_coefficients

from minbert.classroom.references import pcgrad_on_vectors as reference_algorithm_1


def test_pcgrad_gram_trick_matches_direct_algorithm_1():
    """Oracle (b): coefficients on the K×K Gram give the same g_i' as projecting (K, P) vectors."""
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        g = torch.randn(4, 7, generator=gen, dtype=torch.float64)
        orders = [[j for j in torch.randperm(4, generator=gen).tolist() if j != i] for i in range(4)]
        coef, _ = pcgrad_coefficients(g @ g.T, orders)
        check(coef @ g, reference_algorithm_1(g, orders), COEF + f" (trial {trial})", atol=1e-10)
