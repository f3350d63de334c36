"""PCGrad and GradVac keep per-task gradients param by param (no flat (K, P) copy): the result
must equal Algorithm 1 run on the flat (K, P) float64 stack.

Oracle (b): an independent flat implementation. Per-task gradients come from plain backward()
on each task's loss alone, are stacked into g (K, P) float64, and Algorithm 1 (PCGrad) or
GradVac's rule is run directly on the vectors (no Gram trick), shared coordinates only; heads
keep their own task's gradient. A 3-task model with a shared trunk, one head per task and an
unused param, 2 micro-batches (gradient accumulation), 'sum' and 'mean'.
Run: python -m pytest -q tests/methods/test_pcgrad_per_param.py   (offline, CPU, ~1 s)
"""

import math

import pytest
import torch

from minbert.methods.gradvac import GradVac
from minbert.methods.pcgrad import PCGrad

K = 3


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
    s = g[:, shared]                                                               # (K, S)
    out = g.sum(0)                                                                 # heads: their own task
    rows = []
    for i in range(K):
        gi = s[i].clone()
        for j in [j for j in order if j != i]:
            if targets is None:
                if gi @ s[j] < 0:
                    gi = gi - (gi @ s[j]) / (s[j] @ s[j]) * s[j]
            else:
                phi = float(gi @ s[j] / (gi.norm() * s[j].norm()))
                t = float(targets[i, j])
                if phi < t:
                    gi = gi + gi.norm() * (t * math.sqrt(1 - phi**2) - phi * math.sqrt(1 - t**2)) / (s[j].norm() * math.sqrt(1 - t**2)) * s[j]
                targets[i, j] = (1 - beta) * targets[i, j] + beta * phi
        rows.append(gi)
    out[shared] = torch.stack(rows).sum(0)
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
