"""MML: many parallel linear heads on one [CLS] vector, kept apart by an orthogonality penalty
and thinned out by clustering their losses.

Malkiel & Wolf, "Maximal Multiverse Learning for Promoting Cross-Task Generalization of Fine-Tuned
Language Models", EACL 2021 (preprint arXiv:1911.06182). No public code exists, so this file is the
reference implementation. Notation: M heads, K outputs per head (2 for binary tasks, the class
count otherwise, 1 for regression), D feature dim, B batch; C_j(d) = dᵀF_j + b_j, F_j ∈ R^(D×K), and
β_j ∈ {0, 1} marks head j active (all 1 at start).
    Eq. 3   L_task = Σ_j β_j ℓ(C_j(d), y)                    MultiverseHeads.task_loss
    Eq. 4   L_mv = Σ_k Σ_{r<s} |f_k^r · f_k^s| β_r β_s       MultiverseHeads.multiverse_loss
            L = L_task + λ·L_mv, λ = 0.005
    Alg. 1  moving average a_j per head; MeanShift prunes     HeadEliminator
    Eq. 5   ŷ = Σ_j β_j C_j(d) / Σ_j β_j                     MultiverseHeads.predict

Variants chosen (the reasons, and the paper's ambiguities, are in docs/methods.md, "Design notes"):
  - Heads are one tensor `weight` (M, K, D): one (B, D) @ (D, M·K) matmul, no loop over heads.
  - Eliminated heads are masked (β is the `active` buffer), never deleted: shapes, optimizer state
    and checkpoints stay aligned. Masked heads leave the loss, the penalty, the averages and Eq. 5.
  - head_reduction "sum" (Eq. 3, the default) or "mean" (divided by Σβ).
  - Alg. 1's average weights the history by γ = 0.99 (the printed rule puts γ on the new loss: read
    as a typo) and starts at the first loss. MeanShift's bandwidth has a floor, min_bandwidth.
  - The penalty covers weights only, in fp32. Eq. 5 averages logits, not probabilities.
  - Regression heads start with every bias at the training labels' mean (`label_mean`).
  - Classifier dropout on d before the heads: 0.1, and 0.3 for BERT-Drop (§4.1).
Baselines from the same module (METHODS): bert, bert-drop, mv (MV-5, MV-1024), ensemble (BERT-Ensemble:
1024 heads without the multiverse loss). The paper's training protocol (epochs, metric per task) is
minbert/methods/mml_protocol.py. Left out: the encoder and loop (train_mml.py), per-head dropout masks,
and any un-elimination of heads.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from minbert.core import flags
from minbert.bert.dropout import Dropout
from minbert.methods.meanshift import estimate_bandwidth, mean_shift

LAMBDA = 0.005            # λ, weight of L_mv in the total loss
MOMENTUM = 0.99           # γ of the per-head moving average
ELIMINATE_EVERY = 1000    # K_elim, steps between elimination rounds
MIN_HEADS = 5             # rounds run only while Σβ ≥ MIN_HEADS

# num_heads None means "--num_heads, default D" (MV-5 and MV-1024 are mv with 5 and 1024).
# dropout: on the [CLS] vector before the heads; BERT fine-tunes with 0.1, BERT-Drop with 0.3.
METHODS = {
    "mml":       dict(num_heads=None, penalty=True,  eliminate=True,  dropout=0.1),
    "bert":      dict(num_heads=1,    penalty=False, eliminate=False, dropout=0.1),
    "bert-drop": dict(num_heads=1,    penalty=False, eliminate=False, dropout=0.3),
    "mv":        dict(num_heads=None, penalty=True,  eliminate=False, dropout=0.1),
    "ensemble":  dict(num_heads=None, penalty=False, eliminate=False, dropout=0.1),
}

def resolve_num_heads(method: str, dim: int, num_heads: int | None = None) -> int:
    """The M a method uses: fixed for bert/bert-drop, else `num_heads`, defaulting to D."""
    fixed = METHODS[method]["num_heads"]
    if fixed is not None:
        if num_heads not in (None, fixed):
            raise ValueError(f"minbert.methods.mml.resolve_num_heads: {method} uses {fixed} head(s), got "
                             f"num_heads={num_heads}")
        return fixed
    return dim if num_heads is None else num_heads


class MultiverseHeads(nn.Module):
    """M linear heads d -> C_j(d) in one batched op, with the β mask as the `active` buffer."""

    def __init__(self, dim: int, num_outputs: int, num_heads: int, dropout: float = 0.0,
                 label_mean: float | None = None):
        super().__init__()
        self.dim, self.num_outputs, self.num_heads = dim, num_outputs, num_heads
        self.label_mean = label_mean                                           # regression: bias start
        self.dropout = Dropout(dropout)                                        # on d, before all heads
        self.weight = nn.Parameter(torch.empty(num_heads, num_outputs, dim))   # (M, K, D)
        self.bias = nn.Parameter(torch.empty(num_heads, num_outputs))          # (M, K)
        self.register_buffer("active", torch.ones(num_heads, dtype=torch.bool))  # β, (M,)
        self.reset_parameters()

    def reset_parameters(self):
        # Each head starts as nn.Linear(D, K) would: U(−1/√D, 1/√D) for weights and biases.
        bound = 1 / math.sqrt(self.dim)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)
        # Regression (K = 1) with a known training-label mean: every head's bias starts there, so
        # no head needs the shared encoder to supply the offset (module docstring, "Regression").
        if self.num_outputs == 1 and self.label_mean is not None:
            nn.init.constant_(self.bias, self.label_mean)

    def forward(self, d: torch.Tensor) -> torch.Tensor:
        """(B, D) coding vectors -> (B, M, K) outputs of all heads, active or not (callers mask)."""
        M, K, D = self.weight.shape
        d = self.dropout(d)                                         # one mask, shared by all heads
        # (B, D) @ (D, M·K) -> (B, M·K): the M weight matrices side by side, views, no copy.
        out = F.linear(d, self.weight.view(M * K, D), self.bias.view(M * K))
        return out.view(-1, M, K)                                   # (B, M, K)

    def per_head_loss(self, outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """ℓ_j for every head: (B, M, K) outputs, (B,) labels -> (M,) batch-mean losses, in fp32."""
        outputs = outputs.float()
        if self.num_outputs == 1:                                   # regression: squared error
            return (outputs[..., 0] - labels.float()[:, None]).pow(2).mean(0)      # (B, M) -> (M,)
        B, M, K = outputs.shape
        # cross_entropy wants classes on dim 1: (B, K, M) logits against (B, M) labels.
        targets = labels.long()[:, None].expand(B, M)
        return F.cross_entropy(outputs.transpose(1, 2), targets, reduction="none").mean(0)  # (M,)

    def task_loss(self, outputs: torch.Tensor, labels: torch.Tensor, reduction: str = "sum"):
        """Eq. 3 over the active heads. Returns (loss, per-head losses (M,) detached for
        HeadEliminator.observe). reduction "sum" is Eq. 3; "mean" divides by Σβ."""
        per_head = self.per_head_loss(outputs, labels)              # (M,)
        total = torch.where(self.active, per_head, 0.0).sum()       # Σ_j β_j ℓ_j
        if reduction == "mean":
            total = total / self.active.sum()
        elif reduction != "sum":
            raise ValueError("minbert.methods.mml.MultiverseHeads.task_loss: reduction must be 'sum' or "
                             f"'mean', got {reduction!r}")
        return total, per_head.detach()

    def multiverse_loss(self) -> torch.Tensor:
        """Eq. 4: Σ_k Σ_{r<s, both active} |f_k^r · f_k^s|, via one Gram matrix per class."""
        M = self.num_heads
        with torch.autocast(self.weight.device.type, enabled=False):   # dot products in fp32
            # Hint: Eq. 4 without a loop over heads: per class k, the Gram matrix of the heads' columns
            # f_k^r, then |dot| summed over pairs r < s with both heads active.
            ### BEGIN SOLUTION mml
            f = self.weight.float().transpose(0, 1)                 # (K, M, D): f[k, r] = f_k^r
            # 1) All pairwise dot products per class: (K, M, D) @ (K, D, M) -> (K, M, M).
            gram = f @ f.transpose(1, 2)
            # 2) β_r β_s, and r < s: the upper triangle drops the diagonal |f|² and the
            #    mirrored copy of each pair.
            pairs = self.active[:, None] & self.active[None, :]     # (M, M)
            pairs = pairs & torch.ones(M, M, dtype=torch.bool, device=pairs.device).triu(1)
            # 3) Sum of |dot| over those pairs and over all K classes.
            return torch.where(pairs, gram.abs(), 0.0).sum()
            ### END SOLUTION

    def predict(self, outputs: torch.Tensor) -> torch.Tensor:
        """Eq. 5: (B, M, K) -> ŷ = β-weighted mean of the heads' logits; softmax(ŷ) as (B, K)
        probabilities, or ŷ as (B,) values if K = 1 (regression)."""
        # Hint: Eq. 5: combine the ACTIVE heads only (β = self.active): the β-weighted mean of their
        # LOGITS, then a softmax for classification (K = 1 is regression: the mean of the values).
        ### BEGIN SOLUTION mml
        w = self.active.float() / self.active.sum()                 # (M,) β_j / Σβ: 1/Σβ if active, else 0
        # 1) ŷ = Σ_j β_j C_j(d) / Σ_j β_j: (B, M, K) · (M,) -> (B, K). Masking by a 0 weight (not
        #    by indexing) keeps the shapes fixed; an eliminated head's logits count 0 times.
        y_hat = torch.einsum("bmk,m->bk", outputs.float(), w)
        if self.num_outputs == 1:
            return y_hat[:, 0]                                      # regression: the mean value, (B,)
        # 2) Classification: softmax of the averaged logits, not an average of softmaxes.
        return y_hat.softmax(-1)                                    # (B, K)
        ### END SOLUTION


class HeadEliminator(nn.Module):
    """Algorithm 1's bookkeeping: per-head moving-average losses and periodic MeanShift pruning.

    Its state (averages, counters) is in buffers, so model.state_dict() saves it when this
    module is an attribute of the model. It changes `heads.active` in place.
    """

    def __init__(self, heads: MultiverseHeads, every: int = ELIMINATE_EVERY, momentum: float = MOMENTUM,
                 min_heads: int = MIN_HEADS, quantile: float = 0.3, min_bandwidth: float = 0.05):
        super().__init__()
        # A plain reference, not a submodule: the heads' weights and β are saved once, with
        # the heads, and this module's state_dict holds only the eliminator's own buffers.
        object.__setattr__(self, "heads", heads)
        self.every, self.momentum, self.min_heads = every, momentum, min_heads
        self.quantile, self.min_bandwidth = quantile, min_bandwidth
        device = heads.active.device
        self.register_buffer("moving_avg", torch.zeros(heads.num_heads, device=device))   # a_j, (M,)
        self.register_buffer("num_observed", torch.zeros((), dtype=torch.long, device=device))
        self.register_buffer("last_check", torch.full((), -1, dtype=torch.long, device=device))

    @torch.no_grad()
    def observe(self, per_head_losses: torch.Tensor):
        """Fold one step's (M,) per-head losses into the averages of the active heads."""
        loss = per_head_losses.detach().to(self.moving_avg)
        # 1) a_j ← γ·a_j + (1 − γ)·ℓ_j, or a_j ← ℓ_j on the first call.
        # Hint: a_j ← γ·a_j + (1 − γ)·ℓ_j (a_j ← ℓ_j on the first call), for ACTIVE heads only;
        # eliminated heads keep their last average.
        ### BEGIN SOLUTION mml
        ema = self.momentum * self.moving_avg + (1 - self.momentum) * loss
        new = torch.where(self.num_observed == 0, loss, ema)
        # 2) Eliminated heads keep their last average (for the logs), never updated again.
        self.moving_avg.copy_(torch.where(self.heads.active, new, self.moving_avg))
        ### END SOLUTION
        self.num_observed += 1

    @torch.no_grad()
    def maybe_eliminate(self, step: int) -> dict | None:
        """At step = every, 2·every, …, while Σβ ≥ min_heads: cluster the active heads' averages
        and keep only the lowest cluster. Returns an event dict when heads were removed, else
        None. Calling twice with the same step does nothing the second time (safe on resume)."""
        if step <= 0 or step % self.every != 0 or step == int(self.last_check):
            return None
        self.last_check.fill_(step)
        active = self.heads.active
        if int(active.sum()) < self.min_heads:
            return None
        ids = active.nonzero().squeeze(1).cpu()                     # (A,) active head indices
        avgs = self.moving_avg.cpu().double()[ids].numpy()          # (A,)
        # 1) Bandwidth: sklearn's estimate, floored (the estimate is 0 for ≤ 6 heads).
        # Hint: bandwidth = max(estimate_bandwidth(a, quantile), min_bandwidth); mean_shift the averages;
        # with ≥ 2 clusters, set β = 0 (active False) for heads outside the lowest-centre cluster,
        # and define bandwidth, centers, keep (bool per active head), kept, eliminated for the report.
        ### BEGIN SOLUTION mml
        bandwidth = max(estimate_bandwidth(avgs, self.quantile), self.min_bandwidth)
        centers, labels = mean_shift(avgs, bandwidth)
        if len(centers) < 2:
            return None
        # 2) Keep the cluster with the lowest centroid. It always holds the best head: every
        #    centre is a mean of averages, so all centres ≥ min a_j and the smallest is nearest.
        keep = torch.from_numpy(labels == centers.argmin())
        kept, eliminated = ids[keep], ids[~keep]
        active[eliminated.to(active.device)] = False
        ### END SOLUTION
        return {
            "step": step, "bandwidth": bandwidth, "centers": sorted(centers.tolist()),
            "kept": kept.tolist(), "eliminated": eliminated.tolist(),
            "kept_moving_avg": avgs[keep.numpy()].tolist(),
            "eliminated_moving_avg": avgs[~keep.numpy()].tolist(),
        }


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    d = flags.defaults(HeadEliminator)
    g = parser.add_argument_group("MML (Malkiel & Wolf, EACL 2021, arXiv:1911.06182)")
    g.add_argument("--method", choices=list(METHODS), default="mml",
                   help="mml, or a baseline of the paper's Table 1: bert, bert-drop, mv, ensemble "
                        "(train_mml.py docstring)")
    g.add_argument("--heads", type=flags.at_least(1), default=None,
                   help="M for mml/mv/ensemble (default: hidden size D, e.g. 768); MV-5 is --method mv --heads 5")
    g.add_argument("--head_reduction", choices=["sum", "mean"], default="sum",
                   help="sum is Eq. 3 (λ was tuned for it); mean divides by the active-head count")
    g.add_argument("--eliminate_every", type=flags.at_least(1), default=d["every"],
                   help="K: steps between MeanShift elimination rounds (mml only); lower it for short runs")
    g.add_argument("--min_bandwidth", type=flags.at_least(0.0, float), default=d["min_bandwidth"],
                   help="MeanShift bandwidth floor in loss units: gaps smaller than this are noise")


def check_args(args, parser) -> None:
    if args.method in ("bert", "bert-drop") and args.heads not in (None, 1):
        parser.error(f"--method {args.method} has one head; drop --heads")


def from_args(args, dim: int, num_outputs: int, train_labels=None) -> tuple[MultiverseHeads, "HeadEliminator | None"]:
    """The method's heads, and the eliminator when it prunes (mml). train_labels: the training set's
    (N,) labels; for regression (K = 1) every head's bias starts at their mean. Classification ignores them."""
    spec = METHODS[args.method]
    label_mean = float(train_labels.float().mean()) if num_outputs == 1 and train_labels is not None else None
    heads = MultiverseHeads(dim, num_outputs, resolve_num_heads(args.method, dim, args.heads), dropout=spec["dropout"],
                            label_mean=label_mean)
    if not spec["eliminate"]:
        return heads, None
    return heads, HeadEliminator(heads, every=args.eliminate_every, min_bandwidth=args.min_bandwidth)
