"""AdamW: Adam with decoupled weight decay, plus the two helpers BERT fine-tuning uses with it.

Concept: Adam keeps running averages of the gradient (m) and of its square (v) and steps along
m / sqrt(v), so every coordinate gets its own step size. AdamW (Loshchilov & Hutter, "Decoupled
Weight Decay Regularization", arXiv:1711.05101, Algorithm 2) shrinks the weights directly instead
of adding an L2 term λ·p to the gradient. Inside Adam, an L2 term is divided by sqrt(v) like the
rest of the gradient, so weights with large gradients are barely regularised. Decoupling fixes that.

Variant chosen: the same arithmetic as `torch.optim.AdamW` (PyTorch 2.x), so it can serve as a
live test oracle. The update is the paper's (Algorithm 2, line 12, with η_t = lr and α = 1):
    θ_t = θ_{t−1} − lr·( m̂_t / (sqrt(v̂_t) + ε) + λ·θ_{t−1} ),
    m̂_t = m_t/(1 − β1^t),  v̂_t = v_t/(1 − β2^t),
with m_t, v_t the β1- and β2-averages of g and g² (both start at 0), t = 1, 2, ... per parameter.
λ is multiplied by lr (the paper has a separate schedule factor η_t), so an lr schedule also
schedules the decay.

How the CS224N handout's AdamW (the old HuggingFace `transformers.AdamW`) differs: it adds ε to the
uncorrected sqrt(v), which is like using ε/sqrt(1 − β2^t) here (31.6× larger at t=1). It decays
*after* the Adam step. Its defaults are eps=1e-6 and weight_decay=0. Both variants pass the
handout's optimizer_test, which catches only L2-style or missing decay.

Deliberately left out: amsgrad, maximize, sparse gradients (they raise), complex parameters,
capturable/differentiable kernels, and tensor-valued lr.

Fast path: `AdamW(..., fused=True)` hands each group to `torch._fused_adamw_`, PyTorch's
one-pass kernel (what `torch.optim.AdamW(fused=True)` calls; llm.c's AdamW kernel is the same idea):
it reads p, g, m, v once and writes p, m, v once per element, where the six steps above make
about eight passes and allocate `denom`, a temporary as large as the parameters (in a
bert-base profile its sqrt alone was 10% of a bf16 step; alone, the fused step was 3.6x faster on
MiniLM's parameters and 6.6x on bert-base's, bench/results/roofline.md). It applies the same
equations, rounding in another order, so it agrees with the readable path to float rounding,
which Adam's division by sqrt(v) can magnify on coordinates with tiny gradients: within 1% of lr
after 3 steps of a tiny BERT in fp32, 10% in bf16 (tests/run/test_fast_paths.py). It is used only where it
applies (every tensor of the group on one CPU/CUDA device, one floating
dtype); anything else takes the readable path. The default is fused=False, so the code above
stays what runs, what the classroom grades and what the tests compare against; the scripts turn
it on with `--fast_paths` (minbert/run/fast_paths.py). The course copy leaves the fused step out
(it would do the assignment's job): there, fused=True takes the readable path.
"""

import torch


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay. Matches torch.optim.AdamW; see the module docstring."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, fused=False):
        if lr < 0.0:
            raise ValueError(f"AdamW: lr must be >= 0, got {lr}")
        if not all(0.0 <= beta < 1.0 for beta in betas):
            raise ValueError(f"AdamW: betas must lie in [0, 1), got {betas}")
        if eps < 0.0:
            raise ValueError(f"AdamW: eps must be >= 0, got {eps}")
        if weight_decay < 0.0:
            raise ValueError(f"AdamW: weight_decay must be >= 0, got {weight_decay}")
        # The base class stores these as each group's defaults and gives us self.param_groups,
        # self.state, state_dict() and load_state_dict().
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.fused = fused   # an attribute, not a group default: state_dict() stays the same either way

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a .grad. closure: optional loss re-evaluation."""
        loss = None
        if closure is not None:
            with torch.enable_grad():  # the closure re-runs forward and backward
                loss = closure()

        for group in self.param_groups:
            # Collect flat lists so that each equation below is one _foreach_ call over all
            # tensors of the group, not a Python loop over ~200 BERT tensors per equation.
            params, grads, exp_avgs, exp_avg_sqs, steps = [], [], [], [], []
            for p in group["params"]:
                if p.grad is None:
                    continue  # frozen or unused this step: no update, no decay, no state
                if p.grad.is_sparse:
                    raise RuntimeError("minbert.adamw.AdamW does not support sparse gradients")
                state = self.state[p]
                if not state:  # created lazily, so params that never get a gradient have none
                    state["step"] = 0.0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                # The count lives per parameter, so it survives state_dict() and stays right for
                # params that skipped some steps. float() also accepts torch's 0-dim tensor count.
                state["step"] = float(state["step"]) + 1
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
            if not params:
                continue

            # Read the hyperparameters from the group on every step: schedulers edit group["lr"].
            lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
            beta1, beta2 = group["betas"]
            # Mixed devices or dtypes in one group still work: foreach ops then fall back to a
            # per-tensor loop inside torch, which is slower but gives the same numbers.

            ### BEGIN LEFT OUT adamw: the fused step (fused=True takes the readable path below)
            if self.fused and fused_applies(params, grads):   # the fast path (minbert/run/fast_paths.py); off: below
                fused_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, wd, eps)
                continue
            ### END LEFT OUT

            # Hint: the update of the module docstring (decay the weights first, as torch does), for every
            # tensor in `params` (with grads, exp_avgs, exp_avg_sqs and steps at the same index); a plain
            # Python loop over the tensors is fine. Update p, m and v in place, under the no_grad above.
            ### BEGIN SOLUTION adamw
            # 1) p ← p·(1 − lr·λ): shrink the weights themselves, before and apart from the
            #    gradient step, so the 1/(sqrt(v̂) + ε) scaling of step 6 never weakens the decay.
            if wd != 0:
                torch._foreach_mul_(params, 1 - lr * wd)
            # 2) m ← β1·m + (1 − β1)·g: lerp(m, g, w) = m + w·(g − m) is this average in one op.
            torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
            # 3) v ← β2·v + (1 − β2)·g²: the per-coordinate gradient scale used in step 5.
            torch._foreach_mul_(exp_avg_sqs, beta2)
            torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)

            # 4) Bias corrections. m and v start at 0, so early on they underestimate E[g] and
            #    E[g²] by the factors (1 − β^t). These are plain numbers, so compute them in
            #    Python: one scalar for the whole group when all counts agree (normal training),
            #    one per tensor otherwise. `** 0.5` rather than math.sqrt, to match torch bitwise.
            if all(t == steps[0] for t in steps):
                t = steps[0]
                neg_step_size = -lr / (1 - beta1**t)
                bias_correction2_sqrt = (1 - beta2**t) ** 0.5
            else:
                neg_step_size = [-lr / (1 - beta1**t) for t in steps]
                bias_correction2_sqrt = [(1 - beta2**t) ** 0.5 for t in steps]

            # 5) denom = sqrt(v)/sqrt(1 − β2^t) + ε = sqrt(v̂) + ε. ε adds to the *corrected*
            #    value (the handout adds it to sqrt(v)); it only guards against dividing by ~0.
            denom = torch._foreach_sqrt(exp_avg_sqs)
            torch._foreach_div_(denom, bias_correction2_sqrt)
            torch._foreach_add_(denom, eps)
            # 6) p ← p − lr/(1 − β1^t) · m / denom = p − lr·m̂/(sqrt(v̂) + ε). m̂/sqrt(v̂) does not
            #    change if g is rescaled, so each coordinate moves by roughly lr or less.
            torch._foreach_addcdiv_(params, exp_avgs, denom, neg_step_size)
            ### END SOLUTION
        return loss


### BEGIN LEFT OUT adamw: fused_applies and fused_step, the fused fast path (they would do assignment 4's job)
def fused_applies(params: list, grads: list) -> bool:
    """torch's fused kernel needs every tensor on one CPU/CUDA device in one floating dtype."""
    kinds = {(t.device, t.dtype) for t in params + grads}
    if len(kinds) != 1:
        return False
    device, dtype = kinds.pop()
    return device.type in ("cpu", "cuda") and dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def fused_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, beta1, beta2, wd, eps) -> None:
    """Steps 1-6 in one pass per element (torch._fused_adamw_). The counts stay Python floats in
    our state (so checkpoints do not change); the kernel reads them as 0-dim tensors, one per
    distinct count."""
    device = params[0].device
    counts = {t: torch.tensor(t, dtype=torch.float32, device=device) for t in set(steps)}
    torch._fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, [], [counts[t] for t in steps], lr=lr, beta1=beta1,
                        beta2=beta2, weight_decay=wd, eps=eps, amsgrad=False, maximize=False)
### END LEFT OUT


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: decayed (weight matrices, embeddings: p.ndim >= 2) and not decayed (biases and
    LayerNorm weights: p.ndim < 2). Only params with requires_grad."""
    # Biases and LayerNorm gains are few and add little capacity, so decaying them regularises
    # little, while pulling them toward 0 can hurt (a LayerNorm gain of 0 switches the layer
    # off). BERT therefore excludes them. Checking ndim finds them without relying on parameter names.
    decay, no_decay = [], []
    for p in model.parameters():  # parameters() lists tied (shared) weights only once
        if p.requires_grad:
            (decay if p.ndim >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def linear_warmup_decay(optimizer, warmup_steps: int, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """lr multiplier rises linearly 0→1 over warmup_steps, then falls linearly to 0 at total_steps
    (HF's get_linear_schedule_with_warmup semantics). warmup_steps=0 means start at full lr."""
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"need 0 <= warmup_steps <= total_steps, got {warmup_steps}, {total_steps}")

    def multiplier(step: int) -> float:
        # Hint: step/warmup_steps while warming up, then a straight line down to 0 at total_steps
        # (never below 0, and never a division by 0).
        ### BEGIN SOLUTION adamw
        # Warm-up: Adam's v is estimated from only a few gradients at first, so full-size steps
        # there can wreck the pretrained weights. max(1, ·) avoids dividing by 0.
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))
        ### END SOLUTION

    # LambdaLR sets group["lr"] = initial lr · multiplier(k) after its k-th step() call.
    return torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)
