"""PCGrad and GradVac, both paths, against Algorithm 1 written out on vectors.

Instructor-only (minbert/classroom/assignments.py INSTRUCTOR_ONLY: the student copy leaves this file
out, since the oracle below is the surgery assignment done on vectors).

1. The readable (K, P) path, pcgrad_update and gradvac_update (the teaching core of
   minbert/methods/pcgrad.py and gradvac.py), against an independent oracle: Algorithm 1 of Yu et
   al. 2020 (PCGrad) and of Wang et al. 2021 (GradVac) run on the (K, P) vectors with one
   projection per pair in a loop, no Gram matrix, no coefficients.
2. The memory-frugal classes PCGrad and GradVac (per param, never a (K, P) stack) against the
   readable path on the same losses (a consistency check between two implementations), and
   end to end against the same oracle on a flat (K, P) float64 stack from plain backward().
   A 3-task model with a shared trunk, one head per task and an unused param, 2 micro-batches
   (gradient accumulation), 'sum' and 'mean'.
Run: python -m pytest -q tests/methods/test_pcgrad_per_param.py   (offline, CPU, ~1 s)
"""

import math

import pytest
import torch

from minbert.methods.gradvac import GradVac, gradvac_update
from minbert.methods.pcgrad import PCGrad, pcgrad_update, task_gradients

K = 3


# ---------------------------------------------------------------------------- the oracle
def pcgrad_on_rows(g, orders):
    """Yu et al. 2020, Algorithm 1 on the vectors: g (K, P) -> (g' (K, P), number of projections)."""
    out, count = [], 0
    for i in range(len(g)):
        gi = g[i].clone()
        for j in orders[i]:
            if gi @ g[j] < 0:                             # conflict: project onto g_j's normal plane
                gi = gi - (gi @ g[j]) / (g[j] @ g[j]) * g[j]
                count += 1
        out.append(gi)
    return torch.stack(out), count


def gradvac_on_rows(g, orders, targets, beta):
    """Wang et al. 2021, Algorithm 1 on the vectors: g (K, P) -> g' (K, P); targets (K, K) updated
    in place (EMA of the cosine measured before the adjustment, on every visit)."""
    out = []
    for i in range(len(g)):
        gi = g[i].clone()
        for j in orders[i]:
            if gi.norm() == 0 or g[j].norm() == 0:
                continue
            phi, t = float(gi @ g[j] / (gi.norm() * g[j].norm())), float(targets[i, j])
            if phi < t:                                   # below target: raise cos(g_i', g_j) to φ̂
                gi = gi + gi.norm() * (t * math.sqrt(1 - phi**2) - phi * math.sqrt(1 - t**2)) / (g[j].norm() * math.sqrt(1 - t**2)) * g[j]
            targets[i, j] = (1 - beta) * t + beta * phi
        out.append(gi)
    return torch.stack(out)


def oracle_update(g, orders, shared, targets=None, beta=0.0):
    """The update (P,): Σ_i g_i' on the shared coordinates, Σ_k g_k (a head's own task) elsewhere."""
    out = g.sum(0)
    s = g[:, shared]
    rows = pcgrad_on_rows(s, orders)[0] if targets is None else gradvac_on_rows(s, orders, targets, beta)
    out[shared] = rows.sum(0)
    return out


def random_orders(K, gen):
    return [[j for j in torch.randperm(K, generator=gen).tolist() if j != i] for i in range(K)]


def conflicting_rows(K, P, gen, dtype=torch.float64):
    """(K, P) with task 1 conflicting with task 0, and a zero row now and then (a task absent)."""
    g = torch.randn(K, P, generator=gen, dtype=torch.float64)
    g[1] = -0.8 * g[0] + 0.6 * g[1]
    if K > 3 and torch.rand((), generator=gen) < 0.3:
        g[3] = 0.0
    return g.to(dtype)


# ---------------------------------------------------------------------------- 1. the readable (K, P) path
@pytest.mark.parametrize("K", [2, 3, 4])
def test_readable_pcgrad_update_equals_algorithm_1_on_vectors(K):
    gen = torch.Generator().manual_seed(K)
    projections = 0
    for trial in range(30):
        g = conflicting_rows(K, 9, gen)
        orders = random_orders(K, gen)
        shared = torch.rand(9, generator=gen) < 0.7                # the rest: head coordinates
        shared[:2] = True
        got = pcgrad_update(g, orders, shared)
        torch.testing.assert_close(got, oracle_update(g, orders, shared), atol=1e-10, rtol=1e-10,
                                   msg=lambda m: f"minbert.methods.pcgrad.pcgrad_update (K={K}, trial {trial}, orders "
                                                 f"{orders}) differs from Algorithm 1 on vectors: {m}")
        projections += pcgrad_on_rows(g[:, shared], orders)[1]
    assert projections > 0, "the fixture should make some pairs conflict"
    # float32 in, float32 out, the same numbers to float32 precision; shared=None: every coordinate
    g = conflicting_rows(K, 9, gen, torch.float32)
    orders = random_orders(K, gen)
    got = pcgrad_update(g, orders)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, oracle_update(g.double(), orders, torch.ones(9, dtype=torch.bool)).float())


@pytest.mark.parametrize("K", [2, 3, 4])
def test_readable_gradvac_update_equals_algorithm_1_on_vectors(K):
    gen = torch.Generator().manual_seed(10 + K)
    for trial in range(30):
        g = conflicting_rows(K, 9, gen)
        orders = random_orders(K, gen)
        shared = torch.rand(9, generator=gen) < 0.7
        shared[:2] = True
        targets = (torch.rand(K, K, generator=gen, dtype=torch.float64) - 0.5) * 1.2   # φ̂ in (−0.6, 0.6)
        beta = float(torch.rand((), generator=gen))
        want_targets = targets.clone()
        want = oracle_update(g, orders, shared, want_targets, beta)
        got = gradvac_update(g, orders, targets, beta, shared)
        where = f"minbert.methods.gradvac.gradvac_update (K={K}, trial {trial}, orders {orders}, beta {beta:.3f})"
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10,
                                   msg=lambda m: f"{where} differs from Algorithm 1 on vectors: {m}")
        torch.testing.assert_close(targets, want_targets, atol=1e-12, rtol=1e-12,
                                   msg=lambda m: f"{where}: the EMA targets differ from Algorithm 1 on vectors: {m}")


# ---------------------------------------------------------------------------- 2. the per-param classes

class ThreeTaskNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8), torch.nn.Tanh())
        self.heads = torch.nn.ModuleList(torch.nn.Linear(8, 1) for _ in range(K))
        self.unused = torch.nn.Parameter(torch.ones(3))
        with torch.no_grad():   # heads 0 and 1 read the trunk with opposite signs: their tasks conflict
            self.heads[1].weight.copy_(-self.heads[0].weight)

    def losses(self, x, y):
        h = self.trunk(x)                                           # (B, 8)
        return [((self.heads[k](h).squeeze(-1) - y[:, k]) ** 2).mean() for k in range(K)]


def data(seed, micro_batches=2):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(5, 6, generator=g), torch.randn(5, K, generator=g) * torch.tensor([3.0, 3.0, 1.0]))
            for _ in range(micro_batches)]


def flat_reference(model, batches, order, reduction, targets=None, beta=0.0):
    """The flat (K, P) float64 oracle. targets None: PCGrad; else GradVac with φ̂ (K, K), updated."""
    params = [p for p in model.parameters() if p.requires_grad]
    g = torch.zeros(K, sum(p.numel() for p in params), dtype=torch.float64)   # (K, P)
    used = torch.zeros(K, len(params), dtype=torch.bool)
    for x, y in batches:
        for k in range(K):
            model.zero_grad(set_to_none=True)
            model.losses(x, y)[k].backward()
            g[k] += torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).double() for p in params])
            used[k] |= torch.tensor([p.grad is not None for p in params])
    model.zero_grad(set_to_none=True)
    shared = torch.cat([torch.full((p.numel(),), bool(used[:, n].sum() >= 2)) for n, p in enumerate(params)])
    out = oracle_update(g, [[j for j in order if j != i] for i in range(K)], shared, targets, beta)
    if reduction == "mean":
        out /= int(used.any(1).sum())
    return out, used.any(0)


@pytest.mark.parametrize("method", ["pcgrad", "gradvac"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_per_param_surgery_equals_flat_stack_reference(method, reduction):
    torch.manual_seed(0)
    model = ThreeTaskNet()
    params = [p for p in model.parameters() if p.requires_grad]
    order, projections = [2, 0, 1], 0
    for seed in range(3):                                     # 3 steps: GradVac's targets move
        batches = data(seed)
        if method == "pcgrad":
            surgery, targets = PCGrad(params, reduction=reduction), None
        else:
            if seed == 0:
                surgery = GradVac(params, reduction=reduction, beta=0.3)
                targets = torch.full((K, K), 0.2, dtype=torch.float64)
            surgery.targets = targets.clone().unsqueeze(-1) if surgery.targets is None else surgery.targets
        want, touched = flat_reference(model, batches, order, reduction, targets, beta=0.3)
        for x, y in batches:
            surgery.accumulate(model.losses(x, y))
        stats = surgery.apply(order=order)
        got = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).double() for p in params])
        where = f"minbert.{method}.{type(surgery).__name__}.apply ({reduction}, step {seed})"
        projections += stats["projections"]
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=lambda m: f"{where}: per-param result differs from the flat (K, P) reference: {m}")
        unused = [n for n, q in enumerate(params) if q is model.unused][0]
        assert model.unused.grad is None and not touched[unused], f"{where}: an unused param must keep .grad None"
        if method == "gradvac":
            torch.testing.assert_close(surgery.targets[:, :, 0], targets, atol=1e-6, rtol=1e-6,
                                       msg=lambda m: f"{where}: EMA targets differ from the flat reference: {m}")
        model.zero_grad(set_to_none=True)
    assert projections > 0, f"minbert.{method}: the fixture should force at least one projection in 3 steps, got none"


@pytest.mark.parametrize("method", ["pcgrad", "gradvac"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_per_param_class_gives_the_readable_paths_update(method, reduction):
    """Consistency of the two implementations: the class (2 micro-batches, per param) and
    task_gradients + pcgrad_update / gradvac_update on the summed losses, over 3 steps."""
    torch.manual_seed(0)
    model = ThreeTaskNet()
    params = [p for p in model.parameters() if p.requires_grad]
    order = [1, 2, 0]
    orders = [[j for j in order if j != i] for i in range(K)]
    surgery = PCGrad(params, reduction=reduction) if method == "pcgrad" else GradVac(params, reduction=reduction, beta=0.3)
    targets, projections = torch.zeros(K, K, dtype=torch.float64), 0
    for seed in range(3):
        batches = data(seed)
        per_batch = [model.losses(x, y) for x, y in batches]
        g, shared = task_gradients([sum(losses[k] for losses in per_batch) for k in range(K)], params)
        assert g.shape == (K, sum(p.numel() for p in params)) and shared.sum() > 0
        want = pcgrad_update(g, orders, shared) if method == "pcgrad" else gradvac_update(g, orders, targets, 0.3, shared)
        if reduction == "mean":
            want = want / K
        for x, y in batches:
            surgery.accumulate(model.losses(x, y))
        projections += surgery.apply(order=order)["projections"]
        got = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        where = f"minbert.methods.{method}.{type(surgery).__name__}.apply ({reduction}, step {seed})"
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5,
                                   msg=lambda m: f"{where}: differs from the readable (K, P) path: {m}")
        if method == "gradvac":
            torch.testing.assert_close(surgery.targets[:, :, 0], targets, atol=1e-6, rtol=1e-6,
                                       msg=lambda m: f"{where}: EMA targets differ from the readable path's: {m}")
        model.zero_grad(set_to_none=True)
    assert projections > 0, f"minbert.{method}: the fixture should force at least one projection in 3 steps, got none"
