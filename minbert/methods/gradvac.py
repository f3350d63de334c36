"""GradVac (Gradient Vaccine): PCGrad with a learned, non-zero similarity target per task pair.

Concept: PCGrad only acts when two gradients conflict (cosine < 0) and then makes them exactly
orthogonal. Wang et al. ("Gradient Vaccine: Investigating and Improving Multi-task Optimization in
Massively Multilingual Models", arXiv:2010.05874, ICLR 2021, Algorithm 1) observe that related
tasks normally have *positive* gradient similarity, and move each pair toward the similarity it
usually has. Per parameter group k and ordered task pair (i, j) an EMA target φ̂_ijk starts at 0:
    for each task i:   g_i' ← g_i
        for j ≠ i in random order:   φ = cos(g_i', g_j)
            if φ < φ̂:   g_i' ← g_i' + ‖g_i'‖ (φ̂ √(1−φ²) − φ √(1−φ̂²)) / (‖g_j‖ √(1−φ̂²)) · g_j
            φ̂ ← (1−β) φ̂ + β φ                                     (β = 0.01, the paper's value)
    update = Σ_i g_i'
After an adjustment cos(g_i', g_j) = φ̂ exactly. With φ̂ ≡ 0 the rule is PCGrad's projection, and
this code then gives bit-for-bit PCGrad's result (the adjustment is written as
‖g_i'‖φ̂√(1−φ²)/(‖g_j‖√(1−φ̂²)) − g_i'·g_j/‖g_j‖², whose first term is exactly 0 when φ̂ = 0).

The teaching core, first in this file (the same layout as minbert/methods/pcgrad.py):
  gradvac_coefficients(G, orders, targets, beta)   the loop above on the K×K Gram matrix G = g gᵀ,
                                   returning c (K, K) with g_i' = c_i · g; updates φ̂ in place.
  gradvac_update(g, orders, targets, beta, shared) the readable (K, P) path for one group:
                                   G = g gᵀ, the coefficients, then Σ_i g_i' = (Σ_i c_i) · g.
  Use:  g, shared = task_gradients(losses, params)             # minbert.methods.pcgrad
        update = gradvac_update(g, orders, targets, 0.01, shared)   # (P,); targets (K, K) start at 0
Below the line "memory-frugal version", class GradVac (PCGrad's per-param machinery, never
writing (K, P)) runs it per parameter group for the training script. The tests (tests/methods/)
check the class against the readable path, and that against hand-computed cases and the loop on vectors.

Variant chosen for the EMA, because the public code disagrees (REFERENCE-NOTES §8):
- Here: compare φ with the *previous* target, then update the target with the cosine measured
  *before* the adjustment, on every step, outside the `if`. So the target can rise as well as fall
  (our reading of the paper's Alg. 1; the reference notes flag it as not re-checked in the PDF).
- LibMTL updates only inside the `if`, so φ̂ starts at 0, can only fall, and GradVac decays into a
  weaker PCGrad. chenllliang and torchjd update *before* comparing (torchjd also has a √(1−φ·2) typo).
- Groups: `groups` lists parameter indices per group (e.g. one per BERT layer; the paper found
  per-layer best), built by the caller; None = one group. Each group has its own Gram matrix,
  targets and shared part (params used by ≥ 2 tasks, as in PCGrad); all groups share one order.
- Skipped pairs: a zero-norm gradient (task absent from the group's shared part) and any group
  whose Gram has inf/NaN (an overflowed fp16 step) change neither the gradients nor the targets.
Everything else (API, shared vs head params, 'sum'/'mean', AMP, the coefficient trick) is
inherited from minbert/methods/pcgrad.py. Left out: LibMTL's per-matrix grouping helper (pass `groups`).
"""

import math

import torch

from minbert.core import flags
from minbert.methods.pcgrad import PCGrad
from minbert.tasks.multitask import GRADVAC_GROUPS, gradvac_groups

# Keep |φ̂| < 1: √(1−φ̂²) is a denominator.
TARGET_LIMIT = 1 - 1e-6


def gradvac_coefficients(gram: torch.Tensor, orders: list[list[int]], targets: torch.Tensor, beta: float) -> tuple[torch.Tensor, int]:
    """Algorithm 1 for one group on the Gram matrix. gram (K, K) float64 = g gᵀ; orders[i] lists
    the j ≠ i in visiting order; targets (K, K) float64 holds φ̂_ij and is updated in place.
    Returns coef (K, K) with g_i' = coef[i] · g, and the number of adjustments made."""
    K = gram.shape[0]
    coef = torch.eye(K, dtype=torch.float64)  # g_i' ← g_i
    if not torch.isfinite(gram).all():
        return coef, 0  # overflowed step: the scaler will skip it, so keep the targets clean
    adjustments = 0
    # Hint: like pcgrad_coefficients, with norms and dots from the Gram: φ = cos(g_i', g_j); if
    # φ < φ̂ (targets[i, j], kept inside ±TARGET_LIMIT) add the module docstring's multiple of
    # g_j to coef[i, j]; then φ̂ ← (1 − β)φ̂ + βφ. Skip pairs where a norm is 0.
    ### BEGIN SOLUTION surgery
    for i in range(K):
        for j in orders[i]:
            # 1) ‖g_i'‖² = c_i G c_iᵀ, ‖g_j‖² = G_jj, g_i'·g_j = (c_i G)_j: all from the Gram.
            norm_i = math.sqrt(max(float(coef[i] @ gram @ coef[i]), 0.0))
            norm_j = math.sqrt(max(float(gram[j, j]), 0.0))
            if norm_i == 0 or norm_j == 0:
                continue  # no direction to measure: no adjustment, no EMA update
            dot = float(coef[i] @ gram[:, j])
            # 2) φ = cos(g_i', g_j), clipped to [−1, 1] against rounding (it goes under a √).
            phi = min(max(dot / (norm_i * norm_j), -1.0), 1.0)
            target = min(max(float(targets[i, j]), -TARGET_LIMIT), TARGET_LIMIT)
            # 3) Below target: add the multiple of g_j that makes cos(g_i', g_j) = φ̂. Using
            #    ‖g_i'‖ φ/‖g_j‖ = dot/‖g_j‖², the paper's coefficient splits into two terms.
            if phi < target:
                coef[i, j] += (norm_i * target * math.sqrt(1 - phi**2) / (norm_j * math.sqrt(1 - target**2))
                               - dot / float(gram[j, j]))
                adjustments += 1
            # 4) EMA toward the cosine measured before the adjustment, every step, either way.
            targets[i, j] = (1 - beta) * targets[i, j] + beta * phi
    ### END SOLUTION
    return coef, adjustments


def gradvac_update(g: torch.Tensor, orders: list[list[int]], targets: torch.Tensor, beta: float,
                   shared: torch.Tensor | None = None) -> torch.Tensor:
    """The readable path for one group: g (K, P) -> the update (P,) = Σ_i g_i'. targets (K, K)
    float64 φ̂, updated in place; orders and shared as in minbert.methods.pcgrad.pcgrad_update
    (the coordinates outside `shared` get Σ_k g_k, a head's own task gradient). Per-layer groups:
    call it once per group, on that group's columns of g, with that group's targets."""
    if shared is None:
        shared = torch.ones(g.shape[1], dtype=torch.bool, device=g.device)
    s = g[:, shared]                                           # (K, S) the shared coordinates
    gram = (s.double() @ s.double().T).cpu()                   # (K, K) G = g gᵀ, in float64
    coef, _ = gradvac_coefficients(gram, orders, targets, beta)  # g_i' = coef[i] · g
    update = g.sum(0)                                          # (P,) heads: their own task's gradient
    update[shared] = coef.sum(0).to(g.dtype) @ s               # Σ_i g_i' = (Σ_i c_i) · g
    return update


# ------------------------------------------------- memory-frugal version: never materialises (K, P)
# gradvac_update per parameter group, param by param: what train_multitask.py uses (from_args below).
class GradVac(PCGrad):
    """PCGrad's API (accumulate, apply, state_dict) with GradVac's rule per parameter group.
    self.targets (K, K, G) float64 holds φ̂ (G groups); it is created by the first accumulate()
    or load_state_dict(), and tests may set entries directly. apply()'s stats['projections']
    counts the adjustments made."""

    def __init__(self, params: list[torch.nn.Parameter], reduction: str = "sum", seed: int = 0,
                 beta: float = 0.01, groups: list[list[int]] | None = None):
        super().__init__(params, reduction, seed)
        if not 0 <= beta <= 1:
            raise ValueError(f"GradVac: beta must lie in [0, 1], got {beta}")
        if groups is not None:
            # A partition, so every param has exactly one target set and none is forgotten.
            if sorted(n for group in groups for n in group) != list(range(len(self.params))):
                raise ValueError(f"GradVac: groups must list each index 0..{len(self.params) - 1} of params exactly once")
            self.groups = [list(group) for group in groups]
        self.beta = beta
        self.targets = None  # (K, K, G) float64, on the CPU like the rest of the K×K arithmetic

    def _allocate(self, num_tasks: int) -> None:
        super()._allocate(num_tasks)
        if self.targets is None:
            self.targets = torch.zeros(num_tasks, num_tasks, len(self.groups), dtype=torch.float64)
        elif self.targets.shape != (num_tasks, num_tasks, len(self.groups)):
            raise ValueError(f"GradVac: loaded targets have shape {tuple(self.targets.shape)}, "
                             f"but there are {num_tasks} tasks and {len(self.groups)} groups")

    def _surgery(self, gram: torch.Tensor, orders: list[list[int]], group: int) -> tuple[torch.Tensor, int]:
        return gradvac_coefficients(gram, orders, self.targets[:, :, group], self.beta)  # a view: updated in place

    def state_dict(self) -> dict:
        """RNG and EMA targets; save it with the checkpoint, or a resumed run restarts φ̂ at 0."""
        targets = None if self.targets is None else self.targets.clone()
        return {**super().state_dict(), "targets": targets}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.targets = None if state["targets"] is None else state["targets"].clone().double()


# ---------------------------------------------------------------------------------------------- flags
SURGERIES = ("none", "pcgrad", "gradvac")


def add_args(parser) -> None:
    d = flags.defaults(GradVac)
    g = parser.add_argument_group("gradient surgery: PCGrad (Yu et al. 2020, arXiv:2001.06782), "
                                  "GradVac (Wang et al. 2020, arXiv:2010.05874)")
    g.add_argument("--surgery", choices=SURGERIES, default="none",
                   help="combine per-task gradients (implies one batch of every task per step)")
    g.add_argument("--gradvac_groups", choices=GRADVAC_GROUPS, default="model",
                   help="GradVac similarity targets per model, per layer (Wang et al.'s best) or per matrix")
    g.add_argument("--gradvac_beta", type=flags.between(0.0, 1.0, open_lo=True), default=d["beta"],
                   help="GradVac EMA rate of the targets")


def from_args(args, model, params, seed: int):
    """PCGrad or GradVac over `params` (GradVac also for --grad_compromise), or None."""
    if args.surgery == "pcgrad":
        return PCGrad(params, seed=seed)
    if args.surgery == "gradvac" or args.grad_compromise:
        groups = gradvac_groups(model, params, args.gradvac_groups)
        return GradVac(params, seed=seed, beta=args.gradvac_beta, groups=groups)
    return None
