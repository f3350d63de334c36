"""PCGrad: gradient surgery for multi-task learning, as a drop-in for `sum(losses).backward()`.

Concept: when two tasks share weights, their gradients can point in conflicting directions
(g_i · g_j < 0), and summing them lets one task undo the other's progress. PCGrad (Yu et al.,
"Gradient Surgery for Multi-Task Learning", arXiv:2001.06782, Algorithm 1) removes the conflict:
    for each task i:   g_i' ← g_i
        for j ≠ i in random order:   if g_i' · g_j < 0:   g_i' ← g_i' − (g_i' · g_j / ‖g_j‖²) g_j
    update = Σ_i g_i'          (reduction='mean': divided by the number of tasks present)
Each projection is against the *original* g_j, and the order matters with ≥ 3 tasks.

Use:   pc = PCGrad(trainable_params);  pc.accumulate([loss_sst, loss_para, loss_sts]) (once per
micro-batch);  pc.apply();  optimizer.step().  Shapes: K tasks, P scalars in all params,
(P,) one flattened gradient, (K, P) the per-task stack, (K, K) the Gram matrix.

Variant chosen (where the references differ, see REFERENCE-NOTES §7):
- Shared vs task-specific. A parameter is *shared* when ≥ 2 tasks used it this step (it was in
  their autograd graphs; a gradient that merely happens to be 0 still counts as used). Surgery
  sees only the shared coordinates. A parameter used by one task (its head) gets exactly that
  task's gradient; one used by none keeps p.grad = None, so AdamW neither moves nor decays it.
- One Gram matrix. g_i' is always a linear combination of the original gradients, g_i' = c_i · g
  with c_i (K,), so every dot the loop needs is g_i' · g_j = (c_i G)_j with G = g gᵀ. We compute
  G once (one device sync, not K²), run the loop on K×K float64 numbers, then form the update
  with one (K,) @ (K, P) product, since Σ_i g_i' = (Σ_i c_i) · g.
- The order: a fresh permutation per task per step from a seeded torch.Generator, saved by
  state_dict() for exact resume. `apply(order=...)` fixes it (tests, the paper's figures).
- 'sum' is the paper. 'mean' divides the whole update, heads included, by the number of tasks
  that contributed this step: only the scale changes, never the direction.
- AMP: surgery is positively homogeneous (scale every g by s > 0 and g_i' scales by s), so with
  one GradScaler scale shared by all tasks we can project the *scaled* gradients and let
  `scaler.step(optimizer)` unscale them. An inf/NaN gradient makes the Gram NaN; comparisons with
  NaN are False, nothing is projected, the update stays non-finite and scaler.step skips it.
Left out: DDP (use no_sync() and all-reduce the (K, P) stack yourself), per-layer groups for
PCGrad (GradVac has them; the class below already loops over groups), and sparse gradients.
"""

import torch


def pcgrad_coefficients(gram: torch.Tensor, orders: list[list[int]]) -> tuple[torch.Tensor, int]:
    """Algorithm 1 on the Gram matrix. gram (K, K) float64 = g gᵀ; orders[i] lists the j ≠ i in
    visiting order. Returns coef (K, K) with g_i' = coef[i] · g, and the number of projections."""
    K = gram.shape[0]
    coef = torch.eye(K, dtype=torch.float64)  # g_i' ← g_i
    projections = 0
    # Hint: Algorithm 1 on coefficients: g_i' = coef[i] · g, so g_i' · g_j = coef[i] @ gram[:, j].
    # For each i and j in orders[i]: if that dot is < 0, subtract dot/‖g_j‖² from coef[i, j]
    # and count a projection (skip j with gram[j, j] = 0).
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


class PCGrad:
    """Per-task gradients in, one combined .grad out. See the module docstring for the maths."""

    def __init__(self, params: list[torch.nn.Parameter], reduction: str = "sum", seed: int = 0):
        self.params = list(params)
        if reduction not in ("sum", "mean"):
            raise ValueError(f"{type(self).__name__}: reduction must be 'sum' or 'mean', got {reduction!r}")
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError(f"{type(self).__name__}: a parameter is listed twice (pass model.parameters(), which lists tied weights once)")
        if not all(p.requires_grad for p in self.params):
            raise ValueError(f"{type(self).__name__}: pass only trainable params: [p for p in model.parameters() if p.requires_grad]")
        self.reduction = reduction
        # Param n occupies [offsets[n], offsets[n+1]) of every flattened (P,) vector.
        self.offsets = [0]
        for p in self.params:
            self.offsets.append(self.offsets[-1] + p.numel())
        self.groups = [list(range(len(self.params)))]  # PCGrad: the whole model is one group
        self.generator = torch.Generator().manual_seed(seed)
        self.grads = None  # (K, P) fp32 running sums of the per-task gradients; K is set by accumulate
        self.used = None   # (K, N) bool: task k's graph reached param n (N = number of param tensors)

    def _allocate(self, num_tasks: int) -> None:
        device = self.params[0].device if self.params else "cpu"
        self.grads = torch.zeros(num_tasks, self.offsets[-1], device=device)
        self.used = torch.zeros(num_tasks, len(self.params), dtype=torch.bool)

    @property
    def num_tasks(self) -> int | None:
        return None if self.grads is None else self.grads.shape[0]

    def accumulate(self, losses: list[torch.Tensor | None], scaler: torch.amp.GradScaler | None = None) -> None:
        """Add one micro-batch: the gradient of each task's scalar loss w.r.t. self.params goes into
        row k of the (K, P) stack. `losses` keeps a fixed task order; None = task absent. With a
        GradScaler every loss is scaled by the same factor (the AMP rule in the module docstring)."""
        if self.grads is None:
            self._allocate(len(losses))
        if len(losses) != self.num_tasks:
            raise ValueError(f"{type(self).__name__}.accumulate: expected {self.num_tasks} losses (one per task, None if absent), got {len(losses)}")
        # A loss that needs no gradient (None, or built from frozen weights only) uses no param.
        live = [k for k, loss in enumerate(losses) if loss is not None and loss.requires_grad]
        for count, k in enumerate(live):
            loss = scaler.scale(losses[k]) if scaler is not None else losses[k]
            # Tasks usually share the encoder's forward graph, so keep it alive until the last one.
            # allow_unused: a head of another task is not in this graph and comes back as None.
            grads = torch.autograd.grad(loss, self.params, retain_graph=count < len(live) - 1, allow_unused=True)
            for n, g in enumerate(grads):
                if g is not None:
                    self.grads[k, self.offsets[n]:self.offsets[n + 1]] += g.reshape(-1)  # (P_n,) slice of row k
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

    def _spans(self, indices: list[int]) -> list[tuple[int, int]]:
        """Merge params with consecutive indices into contiguous [start, end) coordinate ranges,
        so slicing the (K, P) stack gives views (a BERT encoder is one span), never copies."""
        spans = []
        for n in sorted(indices):
            if spans and spans[-1][1] == self.offsets[n]:
                spans[-1] = (spans[-1][0], self.offsets[n + 1])
            else:
                spans.append((self.offsets[n], self.offsets[n + 1]))
        return spans

    def apply(self, order: list[int] | None = None) -> dict:
        """Surgery on the shared part, combine the tasks, write p.grad (added to an existing .grad,
        like backward), clear the stack. order: fix the visiting order (a permutation of the task
        indices, used for every task, itself skipped); None draws it from the seeded generator.
        Returns {'conflicts': pairs i<j with g_i·g_j < 0, 'projections': surgeries done,
        'finite': False if some task gradient had inf/NaN}."""
        if self.grads is None:
            raise RuntimeError(f"{type(self).__name__}.apply: call accumulate(losses) first")
        g = self.grads                              # (K, P)
        users = self.used.sum(0).tolist()           # (N,) how many tasks used each param
        orders = self._orders(order)
        stats = {"conflicts": 0, "projections": 0, "finite": True}
        # Coordinates outside the shared part are non-zero in at most one row, so the plain sum over
        # tasks is exactly the owning task's gradient there. The shared spans are overwritten below.
        out = g.sum(0)                              # (K, P) -> (P,)
        for group_index, group in enumerate(self.groups):
            spans = self._spans([n for n in group if users[n] >= 2])
            if not spans:
                continue
            # 1) G = g gᵀ over the shared coordinates: (K, S) @ (S, K) -> (K, K), one per span.
            gram = sum(g[:, a:b] @ g[:, a:b].T for a, b in spans).double().cpu()  # one sync per group
            stats["conflicts"] += sum(int(gram[i, j] < 0) for i in range(len(gram)) for j in range(i + 1, len(gram)))
            # 2) The surgery runs on K×K numbers only and returns g_i' = coef[i] · g.
            coef, done = self._surgery(gram, orders, group_index)
            stats["projections"] += done
            # 3) Σ_i g_i' = (Σ_i c_i) · g: a (K,) @ (K, S) -> (S,) product per span.
            weights = coef.sum(0).to(g)
            for a, b in spans:
                out[a:b] = weights @ g[:, a:b]
        if self.reduction == "mean":
            out /= max(1, int(self.used.any(1).sum()))  # tasks that contributed this step
        # Not fatal: a GradScaler skips such a step itself; without one, the caller should skip it.
        stats["finite"] = bool(torch.isfinite(out).all())
        for n, p in enumerate(self.params):
            if users[n] == 0:
                continue  # no task touched it: p.grad stays as it was (None after zero_grad)
            grad = out[self.offsets[n]:self.offsets[n + 1]].view_as(p).to(p.dtype)
            if p.grad is None:
                p.grad = grad
            else:
                p.grad += grad
        self.grads.zero_()
        self.used.zero_()
        return stats

    def state_dict(self) -> dict:
        """The RNG of the task order. The (K, P) stack is empty between steps, so it is not saved."""
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
