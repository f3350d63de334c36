"""GradVac (Gradient Vaccine): PCGrad with a learned, non-zero similarity target per task pair.

Wang et al., "Gradient Vaccine: Investigating and Improving Multi-task Optimization in Massively
Multilingual Models", ICLR 2021, arXiv:2010.05874, Algorithm 1. PCGrad acts only when two gradients
conflict (cosine < 0) and then makes them orthogonal. Related tasks normally have *positive* gradient
similarity, so GradVac moves each pair (i, j) toward the similarity it usually has: an EMA target
φ̂_ij (per parameter group) that starts at 0. After an adjustment cos(g_i', g_j) = φ̂_ij exactly;
with φ̂ ≡ 0 the rule is PCGrad's projection, and this code then gives PCGrad's result bit for bit.

The same layout as minbert/methods/pcgrad.py, each part tested against the one before:
  1) gradvac_algorithm_1(g, orders, targets, beta)   Algorithm 1 as printed, on (K, P) task vectors.
  2) gradvac_coefficients(G, orders, targets, beta)  the same loop on the K×K Gram matrix G = g gᵀ,
     returning c (K, K) with g_i' = c_i · g; gradvac_update(g, ...) applies it to one group.
  3) class GradVac                                   PCGrad's per-param machinery, one Gram per group.

Variant chosen (the public implementations disagree on the EMA: docs/methods.md, "Design notes"):
- Compare φ with the *previous* target, then move the target toward the cosine measured *before*
  the adjustment, on every visit, outside the `if`: the target can rise as well as fall.
- Groups: `groups` lists parameter indices per group (e.g. one per BERT layer, the paper's best),
  built by the caller; None = one group. Each group has its own Gram, targets and shared part;
  all groups share one order. β = 0.01, the paper's value.
- Skipped: a zero-norm gradient (task absent from the group's shared part), and any group whose
  Gram has inf/NaN (an overflowed fp16 step), change neither the gradients nor the targets.
Everything else (shared vs head params, 'sum'/'mean', AMP, the order) is PCGrad's.
Left out: LibMTL's per-matrix grouping helper (pass `groups`).
"""

import math

import torch

from minbert.core import flags
from minbert.methods.pcgrad import PCGrad
from minbert.tasks.multitask import GRADVAC_GROUPS, gradvac_groups

# Keep |φ̂| < 1: √(1−φ̂²) is a denominator.
TARGET_LIMIT = 1 - 1e-6


# ------------------------------------------------------------ 1) the paper's loop, on task vectors
def gradvac_algorithm_1(g: torch.Tensor, orders: list[list[int]], targets: torch.Tensor, beta: float) -> torch.Tensor:
    """Algorithm 1 as printed, for one group: g (K, P) -> g' (K, P); the update is g'.sum(0).
    targets (K, K) float64 holds φ̂_ij and is updated in place; orders as in pcgrad_algorithm_1. As printed,
    φ̂ is not kept inside ±TARGET_LIMIT: the K×K form below adds that guard (|φ̂| = 1 divides by 0)."""
    projected = []
    for i in range(len(g)):
        g_i = g[i].clone()                                        # g_i' ← g_i                (P,)
        for j in orders[i]:
            norm_i, norm_j = float(g_i.norm()), float(g[j].norm())
            if norm_i == 0 or norm_j == 0:
                continue                                          # no direction: no adjustment, no EMA
            # φ = cos(g_i', g_j), clipped against rounding (it goes under a √)
            phi = min(max(float(g_i @ g[j]) / (norm_i * norm_j), -1.0), 1.0)
            target = float(targets[i, j])                         # φ̂_ij
            # if φ < φ̂:   g_i' ← g_i' + ‖g_i'‖ (φ̂ √(1−φ²) − φ √(1−φ̂²)) / (‖g_j‖ √(1−φ̂²)) · g_j
            if phi < target:
                g_i = g_i + norm_i * (target * math.sqrt(1 - phi**2) - phi * math.sqrt(1 - target**2)) \
                    / (norm_j * math.sqrt(1 - target**2)) * g[j]
            # φ̂ ← (1 − β) φ̂ + β φ, with the φ measured before the adjustment, either way
            targets[i, j] = (1 - beta) * target + beta * phi
        projected.append(g_i)
    return torch.stack(projected)                                 # (K, P)


# ------------------------------------------------------- 2) the same loop on K×K numbers: the Gram form
def gradvac_coefficients(gram: torch.Tensor, orders: list[list[int]], targets: torch.Tensor,
                         beta: float) -> tuple[torch.Tensor, int]:
    """Algorithm 1 for one group on the Gram matrix. gram (K, K) float64 = g gᵀ; orders[i] lists
    the j ≠ i in visiting order; targets (K, K) float64 holds φ̂_ij and is updated in place.
    Returns coef (K, K) with g_i' = coef[i] · g, and the number of adjustments made."""
    # With g_i' = c_i · g:  ‖g_i'‖² = c_i G c_iᵀ,  ‖g_j‖² = G_jj,  g_i' · g_j = (c_i G)_j, and the
    # adjustment of gradvac_algorithm_1 adds to c_ij only. Writing ‖g_i'‖ φ/‖g_j‖ = (c_i G)_j / G_jj:
    #     c_ij ← c_ij + ‖g_i'‖ φ̂ √(1−φ²) / (‖g_j‖ √(1−φ̂²)) − (c_i G)_j / G_jj
    # whose first term is exactly 0 when φ̂ = 0: PCGrad's projection, bit for bit.
    K = gram.shape[0]
    coef = torch.eye(K, dtype=torch.float64)  # g_i' ← g_i
    if not torch.isfinite(gram).all():
        return coef, 0  # overflowed step: the scaler will skip it, so keep the targets clean
    adjustments = 0
    # Hint: like pcgrad_coefficients, with norms and dots from the Gram: φ = cos(g_i', g_j); if
    # φ < φ̂ (targets[i, j], kept inside ±TARGET_LIMIT) add gradvac_algorithm_1's multiple
    # of g_j to coef[i, j]; then φ̂ ← (1 − β)φ̂ + βφ. Skip pairs where a norm is 0.
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


# -------------------------------------- 3) memory-frugal version: the same update, never materialising (K, P)
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
                raise ValueError(f"GradVac: groups must list each index 0..{len(self.params) - 1} "
                                 "of params exactly once")
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
def add_args(parser) -> None:
    """GradVac's own flags; --surgery itself is minbert.methods.pcgrad's."""
    d = flags.defaults(GradVac)
    g = parser.add_argument_group("gradient surgery: GradVac (Wang et al. 2021, arXiv:2010.05874)")
    g.add_argument("--gradvac_groups", choices=GRADVAC_GROUPS, default="model",
                   help="GradVac similarity targets per model, per layer (Wang et al.'s best) or per matrix")
    g.add_argument("--gradvac_beta", type=flags.between(0.0, 1.0, open_lo=True), default=d["beta"],
                   help="GradVac EMA rate of the targets")


def from_args(args, model, params, seed: int):
    """GradVac over `params` for --surgery gradvac (and for --grad_compromise), or None."""
    if args.surgery == "gradvac" or args.grad_compromise:
        groups = gradvac_groups(model, params, args.gradvac_groups)
        return GradVac(params, seed=seed, beta=args.gradvac_beta, groups=groups)
    return None
