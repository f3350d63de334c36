"""Instructor-only reference checks moved out of tests/methods/test_smart.py: they compare the graded function with an
independent written-out reference (minbert/classroom/references.py). The student copy leaves this file out;
tests/methods/test_smart.py keeps its property and stored-case checks.
"""

import pytest
import torch

from test_smart import PERTURB, SMART, Toy, make_batch

from minbert.classroom.references import smart_expected_step
from minbert.methods.smart import divergence


def expected_step(*args):
    return smart_expected_step(divergence, *args)


@pytest.mark.parametrize("epsilon", [1.0, 2e-4])
def test_ascent_normalises_per_example_and_projects_onto_the_ball(epsilon):
    """property + written-out step, fp64, eval mode: with ε = 1 the ball does not bind and every
    example moves by exactly η in ∞-norm; with ε = 2e-4 < η the clamp binds."""
    model, batch = Toy().double().eval(), make_batch("sst")
    smart = SMART(model, epsilon=epsilon, eta=1e-3, steps=1, mu=0)
    with torch.no_grad():
        x, clean = model.embed(batch), model("sst", batch)
    delta0 = torch.randn(x.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1e-4
    got = smart.perturb("sst", batch, x, clean, delta=delta0)
    want = expected_step(model, "sst", batch, x, clean, delta0, 1e-3, epsilon)
    assert got.shape == x.shape, f"{PERTURB}: δ has shape {tuple(got.shape)}, expected (B, T, C) {tuple(x.shape)}"
    assert not got.requires_grad, f"{PERTURB}: return δ detached (the inner loop trains nothing)"
    hint = ""
    if (got - want).abs().max() > 1e-12:
        g_all = (got - delta0).abs().amax(dim=(1, 2))
        if epsilon == 1.0 and not torch.allclose(g_all, torch.full_like(g_all, 1e-3), rtol=1e-6):
            hint = " (hint: normalise g by its ∞-norm PER EXAMPLE: amax over T and C, one value per example)"
        elif got.abs().max() > epsilon + 1e-15:
            hint = " (hint: project onto the ε-ball: clamp δ to [−ε, ε] after the step)"
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-9, msg=lambda m:
        f"{PERTURB}: expected δ_0 + η·g/‖g_i‖∞ clamped to [−ε, ε] (ε = {epsilon}){hint}\n{m}")
