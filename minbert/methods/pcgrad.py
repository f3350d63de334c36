"""PCGrad: gradient surgery for multi-task learning, as a drop-in for `sum(losses).backward()`.

Yu et al., "Gradient Surgery for Multi-Task Learning", NeurIPS 2020, arXiv:2001.06782, Algorithm 1.
When two tasks share weights their gradients can conflict (g_i · g_j < 0), and summing them lets one
task undo the other's progress. PCGrad projects each task's gradient onto the normal plane of every
other task's gradient it conflicts with (Eq. 1), visiting the other tasks in random order; the order
matters with ≥ 3 tasks. Shapes: K tasks, P scalars in all params, g (K, P) the per-task gradients
(row k = task k's gradient, flattened), G = g gᵀ (K, K) the Gram matrix.

The same update three times, each tested against the one before (tests/methods/test_pcgrad*.py):
  1) pcgrad_algorithm_1(g, orders)   Algorithm 1 as printed, on the (K, P) task vectors.
  2) pcgrad_coefficients(G, orders)  the same loop on K×K numbers: g_i' stays a combination
     g_i' = c_i · g of the original gradients, so each dot it needs is g_i' · g_j = (c_i G)_j;
     pcgrad_update(g, orders, shared) applies it. task_gradients(losses, params) builds g.
  3) class PCGrad                    the same update param by param for the training script
     (accumulate per micro-batch, apply, state_dict, AMP, DDP), never writing the (K, P) stack.

Variant chosen:
- 'sum' is the paper. 'mean' (class PCGrad) divides the whole update by the number of tasks present.
- Surgery sees only the shared coordinates: params that ≥ 2 tasks' graphs reached this step (a
  gradient that happens to be 0 still counts). A param used by one task (its head) gets that task's
  gradient; one used by none keeps p.grad = None, so AdamW neither moves nor decays it.
- A task with no gradient on the shared part (‖g_j‖ = 0) takes part in no projection.
- The order: a fresh permutation per task per step from a seeded torch.Generator, saved by
  state_dict() for exact resume; `apply(order=...)` fixes it. The readable paths take `orders`.
Left out: per-layer groups for PCGrad (GradVac has them) and sparse gradients. How the public
implementations differ from the paper: docs/methods.md, "Design notes".
"""

from collections import Counter

import torch



# ------------------------------------------------------------ 1) the paper's loop, on task vectors
def pcgrad_algorithm_1(g: torch.Tensor, orders: list[list[int]]) -> torch.Tensor:
    """Algorithm 1 as printed: g (K, P) task gradients -> g' (K, P) projected ones; the update is
    g'.sum(0). orders[i] lists the j ≠ i in the order task i visits them."""
    projected = []
    for i in range(len(g)):
        g_i = g[i].clone()                                  # g_i' ← g_i                      (P,)
        for j in orders[i]:
            # Eq. 1:  if g_i' · g_j < 0:   g_i' ← g_i' − (g_i' · g_j / ‖g_j‖²) g_j
            # against the ORIGINAL g_j; a zero g_j gives dot 0 and is never projected against.
            dot = g_i @ g[j]                                # (P,) · (P,) -> ()
            if dot < 0:
                g_i = g_i - dot / (g[j] @ g[j]) * g[j]
        projected.append(g_i)
    return torch.stack(projected)                           # (K, P); the update Σ_i g_i' = its sum


def task_gradients(losses: list[torch.Tensor], params: list[torch.nn.Parameter]) -> tuple[torch.Tensor, torch.Tensor]:
    """Row k of g (K, P) = the gradient of losses[k] w.r.t. params, flattened (0 where task k's graph
    does not reach). shared (P,) bool: the coordinates of the params that ≥ 2 tasks' graphs reach."""
    rows, used = [], []
    for k, loss in enumerate(losses):
        # Tasks usually share the encoder's forward graph: keep it alive until the last task.
        grads = torch.autograd.grad(loss, params, retain_graph=k < len(losses) - 1, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if d is None else d).reshape(-1).float()
                               for p, d in zip(params, grads)]))            # (P,)
        used.append([d is not None for d in grads])
    users = torch.tensor(used).sum(0)                                          # (N,) tasks per param
    shared = torch.cat([torch.full((p.numel(),), bool(u >= 2)) for p, u in zip(params, users)])
    return torch.stack(rows), shared.to(rows[0].device)                        # (K, P), (P,)


# ------------------------------------------------------- 2) the same loop on K×K numbers: the Gram form
def pcgrad_coefficients(gram: torch.Tensor, orders: list[list[int]]) -> tuple[torch.Tensor, int]:
    """Algorithm 1 on the Gram matrix. gram (K, K) float64 = g gᵀ; orders[i] lists the j ≠ i in
    visiting order. Returns coef (K, K) with g_i' = coef[i] · g, and the number of projections."""
    # Eq. 1 with g_i' = c_i · g:  g_i' · g_j = (c_i G)_j and ‖g_j‖² = G_jj, so the loop of
    # pcgrad_algorithm_1 becomes   if (c_i G)_j < 0:   c_ij ← c_ij − (c_i G)_j / G_jj
    K = gram.shape[0]
    coef = torch.eye(K, dtype=torch.float64)  # g_i' ← g_i
    projections = 0
    # Hint: pcgrad_algorithm_1's loop on coefficients instead of vectors: g_i' = coef[i] · g, so
    # every dot product it needs comes out of the Gram matrix. Visit j in orders[i]; count the
    # projections; a task with no gradient (gram[j, j] = 0) takes part in none.
    ### BEGIN SOLUTION surgery
    for i in range(K):
        for j in orders[i]:
            if not gram[j, j] > 0:
                continue  # task j has no gradient on the shared part: nothing to project against
            # 1) g_i' · g_j = Σ_m c_im (g_m · g_j): the dot of the *current* g_i' from the Gram.
            dot = float(coef[i] @ gram[:, j])
            # 2) Conflict: drop the component of g_i' along the original g_j. In coefficients,
            #    g_i' − (dot/‖g_j‖²) g_j only changes c_ij. NaN dots fail this test: no projection.
            if dot < 0:
                coef[i, j] -= dot / float(gram[j, j])
                projections += 1
    ### END SOLUTION
    return coef, projections


def pcgrad_update(g: torch.Tensor, orders: list[list[int]], shared: torch.Tensor | None = None) -> torch.Tensor:
    """The readable path: g (K, P) -> the update (P,) = Σ_i g_i'. orders as in pcgrad_coefficients;
    shared (P,) bool marks the coordinates the surgery sees (None: all); the others get Σ_k g_k,
    which is a head's own task gradient."""
    if shared is None:
        shared = torch.ones(g.shape[1], dtype=torch.bool, device=g.device)
    s = g[:, shared]                                           # (K, S) the shared coordinates
    gram = (s.double() @ s.double().T).cpu()                   # (K, K) G = g gᵀ, in float64
    coef, _ = pcgrad_coefficients(gram, orders)                # g_i' = coef[i] · g
    update = g.sum(0)                                          # (P,) heads: their own task's gradient
    update[shared] = coef.sum(0).to(g.dtype) @ s               # Σ_i g_i' = (Σ_i c_i) · g
    return update


# -------------------------------------- 3) memory-frugal version: the same update, never materialising (K, P)
# What train_multitask.py uses (from_args below).
class PCGrad:
    """pcgrad_update for the training loop: per-task gradients in, one combined .grad out.

    Use:   pc = PCGrad(trainable_params);  pc.accumulate([loss_sst, loss_para, loss_sts]) (once per
    micro-batch);  pc.apply();  optimizer.step().  Same maths as the readable path above; what
    differs is where the numbers live:
    - No flat copy. g is never written as one (K, P) tensor: each task's gradient stays in the tensors
      autograd returned (grads[k][n]), G is summed param by param (G_ij = Σ_n g_in · g_jn, one dot of
      two views per pair and param), and the update of param n is Σ_k w_k g_kn, w = Σ_i c_i. The
      stacked version cost 1.21× a plain summed 3-task step (it wrote and zeroed K·P floats every
      step); see bench/bench_surgery.py. G comes to the CPU in one device sync, not K².
    - Shared is decided per param tensor (used by ≥ 2 tasks), p.grad of an unused param stays None.
    - AMP: surgery is positively homogeneous (scale every g by s > 0 and g_i' scales by s), so with
      one GradScaler scale shared by all tasks we can project the *scaled* gradients and let
      `scaler.step(optimizer)` unscale them. An inf/NaN gradient makes the Gram NaN; comparisons
      with NaN are False, nothing is projected, the update stays non-finite and scaler.step skips it.
    - DDP: run the per-task backward passes under no_sync() and average self.grads over the ranks
      before apply() (minbert.run.distributed.Sync.task_grads)."""

    def __init__(self, params: list[torch.nn.Parameter], reduction: str = "sum", seed: int = 0):
        self.params = list(params)
        if reduction not in ("sum", "mean"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'sum' or 'mean', got {reduction!r}")
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError(f"{type(self).__name__}: a parameter is listed twice (pass model.parameters(), which "
                             "lists tied weights once)")
        if not all(p.requires_grad for p in self.params):
            raise ValueError(f"{type(self).__name__}: pass only trainable params: [p for p in "
                             "model.parameters() if p.requires_grad]")
        self.reduction = reduction
        self.groups = [list(range(len(self.params)))]  # PCGrad: the whole model is one group
        self.generator = torch.Generator().manual_seed(seed)
        self.grads = None  # grads[k][n]: task k's running gradient of param n (shaped like it), or None
        self.used = None   # (K, N) bool: task k's graph reached param n (N = number of param tensors)

    def _allocate(self, num_tasks: int) -> None:
        self.grads = [[None] * len(self.params) for _ in range(num_tasks)]
        self.used = torch.zeros(num_tasks, len(self.params), dtype=torch.bool)

    @property
    def num_tasks(self) -> int | None:
        return None if self.grads is None else len(self.grads)

    def accumulate(self, losses: list[torch.Tensor | None], scaler: torch.amp.GradScaler | None = None) -> None:
        """Add one micro-batch: the gradient of each task's scalar loss w.r.t. self.params is kept
        per task and per param (autograd's own output tensors: no copy into a (K, P) stack).
        `losses` keeps a fixed task order; None = task absent. With a GradScaler every loss is
        scaled by the same factor (the AMP rule in the module docstring)."""
        if self.grads is None:
            self._allocate(len(losses))
        if len(losses) != self.num_tasks:
            raise ValueError(f"{type(self).__name__}.accumulate: expected {self.num_tasks} losses (one per task, None "
                             f"if absent), got {len(losses)}")
        # A loss that needs no gradient (None, or built from frozen weights only) uses no param.
        live = [k for k, loss in enumerate(losses) if loss is not None and loss.requires_grad]
        for count, k in enumerate(live):
            loss = scaler.scale(losses[k]) if scaler is not None else losses[k]
            # Tasks usually share the encoder's forward graph, so keep it alive until the last one.
            # allow_unused: a head of another task is not in this graph and comes back as None.
            grads = torch.autograd.grad(loss, self.params, retain_graph=count < len(live) - 1, allow_unused=True)
            for n, g in enumerate(grads):
                if g is not None:
                    g = g.float()  # fp32 sums, as .grad of an fp32 param; a no-op for fp32 grads
                    # Out of place: autograd may hand the same tensor to two params (y = a + b).
                    previous = self.grads[k][n]
                    self.grads[k][n] = g if previous is None else previous + g
                    self.used[k, n] = True

    def _orders(self, order: list[int] | None) -> list[list[int]]:
        """orders[i]: the tasks j ≠ i in the sequence task i is projected against them."""
        K = self.num_tasks
        if order is None:  # always K draws per step, whatever is present, so resume replays exactly
            perms = [torch.randperm(K, generator=self.generator).tolist() for _ in range(K)]
        elif sorted(order) == list(range(K)):
            perms = [list(order)] * K
        else:
            raise ValueError(f"{type(self).__name__}.apply: order must be a permutation of range({K}), got {order}")
        return [[j for j in perm if j != i] for i, perm in enumerate(perms)]

    def _surgery(self, gram: torch.Tensor, orders: list[list[int]], group: int) -> tuple[torch.Tensor, int]:
        return pcgrad_coefficients(gram, orders)  # GradVac overrides this one method

    def _gram(self, shared: list[int]) -> torch.Tensor:
        """G = g gᵀ (K, K) float64 over the shared params, summed param by param: G_ij = Σ_n g_in · g_jn.
        Each (i, j ≤ i) is one dot of two (P_n,) views, so no (K, P_n) stack is ever written; the
        dots stay on the device and come to the CPU in one sync per group."""
        K = self.num_tasks
        pairs = [(i, j) for i in range(K) for j in range(i + 1)]
        dots = []
        for n in shared:
            for i, j in pairs:
                gi, gj = self.grads[i][n], self.grads[j][n]
                if gi is None or gj is None:  # task absent from this param: its gradient there is 0
                    dots.append(torch.zeros((), device=self.params[n].device))
                else:
                    dots.append(torch.dot(gi.reshape(-1), gj.reshape(-1)))  # (P_n,) · (P_n,)
        # (S·pairs,) -> (S, pairs) -> sum over params in float64 -> (pairs,), one device sync.
        sums = torch.stack(dots).view(len(shared), len(pairs)).double().sum(0).cpu()
        gram = torch.zeros(K, K, dtype=torch.float64)
        for (i, j), value in zip(pairs, sums):
            gram[i, j] = gram[j, i] = value
        return gram

    def _owned(self):
        """A test: may we write into this stored gradient? Only if no other stored gradient shares
        its memory (autograd hands one tensor to both inputs of an add) and it is not a broadcast
        view (the gradient of p.sum() is a stride-0 expand)."""
        counts = Counter(g.untyped_storage().data_ptr() for row in self.grads for g in row if g is not None)
        return lambda g: g.is_contiguous() and counts[g.untyped_storage().data_ptr()] == 1

    def _combine(self, n: int, weights: list[float], owned) -> torch.Tensor:
        """Σ_k w_k g_kn for param n, shaped like it. Written into the first task's own gradient
        when we own it: no new P_n-sized buffer, so no page faults, and w = 1 costs nothing."""
        terms = [(self.grads[k][n], w) for k, w in enumerate(weights) if self.grads[k][n] is not None and w != 0]
        if not terms:
            return torch.zeros_like(self.params[n], dtype=torch.float32)
        (first, w0), rest = terms[0], terms[1:]
        out = (first if w0 == 1 else first.mul_(w0)) if owned(first) else first * w0
        for g, w in rest:
            out.add_(g, alpha=w)                                  # (P_n,) += w · (P_n,)
        return out

    def apply(self, order: list[int] | None = None) -> dict:
        """Surgery on the shared part, combine the tasks, write p.grad (added to an existing .grad,
        like backward), clear the stored gradients. order: fix the visiting order (a permutation
        of the task indices, used for every task, itself skipped); None draws it from the seeded
        generator. Returns {'conflicts': pairs i<j with g_i·g_j < 0, 'projections': surgeries
        done, 'finite': False if some task gradient had inf/NaN}."""
        if self.grads is None:
            raise RuntimeError(f"{type(self).__name__}.apply: call accumulate(losses) first")
        K = self.num_tasks
        users = self.used.sum(0).tolist()           # (N,) how many tasks used each param
        orders = self._orders(order)
        stats = {"conflicts": 0, "projections": 0, "finite": True}
        # 'mean' divides the whole update by the number of tasks that contributed this step.
        scale = 1.0 / max(1, int(self.used.any(1).sum())) if self.reduction == "mean" else 1.0
        # A param used by at most one task gets that task's gradient: weight 1 for every row is
        # exactly that, since the other rows are absent there. Shared params get Σ_i c_i below.
        weights = {n: [scale] * K for n in range(len(self.params))}
        for group_index, group in enumerate(self.groups):
            shared = [n for n in group if users[n] >= 2]
            if not shared:
                continue
            # 1) G = g gᵀ over the shared coordinates, accumulated param by param: (K, K).
            gram = self._gram(shared)
            stats["conflicts"] += sum(int(gram[i, j] < 0) for i in range(K) for j in range(i + 1, K))
            # 2) The surgery runs on K×K numbers only and returns g_i' = coef[i] · g.
            coef, done = self._surgery(gram, orders, group_index)
            stats["projections"] += done
            # 3) Σ_i g_i' = (Σ_i c_i) · g: per shared param n, Σ_k w_k g_kn with w = Σ_i c_i.
            group_weights = (coef.sum(0) * scale).tolist()
            for n in shared:
                weights[n] = group_weights
        sums, owned = [], self._owned()
        for n, p in enumerate(self.params):
            if users[n] == 0:
                continue  # no task touched it: p.grad stays as it was (None after zero_grad)
            grad = self._combine(n, weights[n], owned)
            # A sum is inf/NaN iff some element is (barring an overflow of finite values ~1e38), and
            # a sum reads P_n floats once where isfinite(grad).all() also writes a P_n bool mask.
            sums.append(grad.sum())
            grad = grad.to(p.dtype)
            if p.grad is None:
                p.grad = grad
            else:
                p.grad += grad
        # Not fatal: a GradScaler skips such a step itself; without one, the caller should skip it.
        stats["finite"] = bool(torch.isfinite(torch.stack(sums)).all()) if sums else True
        self.grads = [[None] * len(self.params) for _ in range(K)]
        self.used.zero_()
        return stats

    def state_dict(self) -> dict:
        """The RNG of the task order. The per-task gradients are empty between steps, so they are not saved."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


# ---------------------------------------------------------------------------------------------- flags
SURGERIES = ("none", "pcgrad", "gradvac")


def add_args(parser) -> None:
    g = parser.add_argument_group("gradient surgery: PCGrad (Yu et al. 2020, arXiv:2001.06782)")
    g.add_argument("--surgery", choices=SURGERIES, default="none",
                   help="combine per-task gradients: pcgrad projects away conflicts, gradvac moves each pair "
                        "toward its usual similarity (flags below); implies one batch of every task per step")


def from_args(args, params, seed: int) -> "PCGrad | None":
    """PCGrad over `params` for --surgery pcgrad, or None (GradVac: minbert.methods.gradvac.from_args)."""
    return PCGrad(params, seed=seed) if args.surgery == "pcgrad" else None
