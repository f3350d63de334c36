"""SMART: smoothness-inducing adversarial regularisation + Bregman proximal point optimisation.

Jiang et al. 2020, "SMART: Robust and Efficient Fine-Tuning for Pre-trained Natural Language
Models through Principled Regularized Optimization", arXiv:1911.03437, Algorithm 1.
On top of the task loss L(θ) of one batch, `SMART.loss` returns λ_s·R_s + μ·D_Breg, where

    R_s(θ)     = mean_i max_{‖x̃_i − x_i‖∞ ≤ ε} ℓ_s(f(x̃_i; θ), f(x_i; θ))   (smoothness)
    D_Breg(θ)  = mean_i ℓ_s(f(x_i; θ), f(x_i; θ̃))                          (stay near θ̃)
    θ̃ ← β·θ̃ + (1 − β)·θ after every optimizer step (`update_teacher`), θ̃ starts at θ_0

x is the embedding-layer output (B, T, C) (for a bi-encoder pair head, both sentences' side by
side: one ε-ball per pair), f the encoder + task head, ℓ_s `divergence`: symmetric KL of the
softmax for the 5-way head, Bernoulli symmetric KL for the one-logit paraphrase head (a softmax
over ONE logit is always 1, so its KL would be 0), squared error for regression. β = 0.99 for
the first 10% of updates, 0.999 afterwards (the paper's).

Variant chosen (mode="paper", the default): Algorithm 1 with `steps` ascent steps, S = 1.
  - δ ~ N(0, σ²); each step normalises the gradient by its ∞-norm PER EXAMPLE, steps by η and
    projects onto the ε-ball (a clamp). With the paper's η = 1e-3 ≫ ε = 1e-5, δ ends near ε·sign(g).
  - Gradient flows into BOTH sides of ℓ_s and into the embedding layer through x, as in mt-dnn.
  - The teacher θ̃ runs in eval mode; the student's passes draw their own dropout masks.
  - ℓ_s in fp32 even under autocast. Cost ≈ 3× a plain step.
mode="reference" copies the perturbation of mt-dnn (the authors' code) and smart-pytorch, for
comparison: raw gradient, δ rescaled to ∞-norm ≈ 1 per token, no ε-ball, no Bregman term.
Left out: S > 1 proximal inner steps, p = 2 balls, fp16 scaling of the inner gradient, SMART on a
frozen encoder without PALs. A non-finite inner gradient makes the loss non-finite (the caller
skips the step). The reasons and measured details: docs/methods.md, "Design notes".
"""

import copy

import torch
import torch.nn.functional as F

from minbert.core import flags


def divergence(task: str, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """ℓ_s for one head type, mean over the batch, computed in fp32: symmetric KL of softmax for 'sst';
    Bernoulli symmetric KL (softmax over [0, z], i.e. sigmoid) for the one-logit 'para' head; squared error for
    'sts'."""
    # Hint: ℓ_s of the module docstring, mean over the batch, in fp32: sts squared error; sst symmetric
    # KL of the softmaxes, KL(P‖Q) + KL(Q‖P); para the same for the two-class distribution
    # [1 − sigmoid(z), sigmoid(z)] (a softmax over ONE logit is always 1). Use log_softmax.
    ### BEGIN SOLUTION smart
    p, q = p.float(), q.float()                                   # fp32 even under autocast
    if task == "sts":
        return (p - q).pow(2).mean()                              # (B,) -> ()
    if task == "para":
        # P(y=1) = sigmoid(z) = softmax([0, z])[1]: two classes, so the KL below is not 0.
        # (Closed form of the result: (sigmoid(z_p) − sigmoid(z_q))·(z_p − z_q).)
        zeros = torch.zeros_like(p)
        p, q = torch.stack([zeros, p], -1), torch.stack([zeros, q], -1)   # (B,) -> (B, 2)
    elif task != "sst":
        raise ValueError(f"minbert.methods.smart.divergence: unknown task {task!r} (expected sst, para or sts)")
    log_p, log_q = F.log_softmax(p, -1), F.log_softmax(q, -1)     # (B, K); never log(softmax): log 0 = -inf
    # KL(P‖Q) + KL(Q‖P) = Σ_k P_k(log P_k − log Q_k) + Q_k(log Q_k − log P_k)
    #                   = Σ_k (P_k − Q_k)(log P_k − log Q_k)          (≥ 0: both factors share a sign)
    return ((log_p.exp() - log_q.exp()) * (log_p - log_q)).sum(-1).mean()
    ### END SOLUTION


class SMART:
    """λ_s·R_s + μ·D_Breg for MultitaskBert; see the module docstring.

    Use: build it once the model is loaded, moved to its device and given any R4F heads (the
    teacher copies the model as it is then). Inside the autocast context,
    `loss = task_loss(...) + smart.loss(task, batch, out)`; after every `optimizer.step()`,
    `smart.update_teacher()`; save `smart.state_dict()` with checkpoints.
    """

    def __init__(self, model, lambda_s=1.0, epsilon=1e-5, sigma=1e-5, eta=1e-3, steps=1, mu=1.0,
                 beta=(0.99, 0.999), beta_switch=0.1, total_steps: int = 0, mode: str = "paper"):
        if mode not in ("paper", "reference"):
            raise ValueError(f"minbert.methods.smart.SMART: mode must be 'paper' or 'reference', got {mode!r}")
        if getattr(model, "frozen_encoder", False) and getattr(model, "pals", None) is None:
            # a frozen encoder without PALs runs under no_grad: nothing to differentiate for δ
            raise ValueError("minbert.methods.smart.SMART: the encoder is frozen (--option pretrain), so the "
                             "ascent cannot differentiate through it; fine-tune the encoder or use R3F")
        self.model, self.mode = model, mode
        self.lambda_s, self.epsilon, self.sigma, self.eta, self.steps = lambda_s, epsilon, sigma, eta, steps
        self.mu, self.beta, self.beta_switch, self.total_steps = mu, beta, beta_switch, total_steps
        self.updates = 0                                           # update_teacher() calls so far
        self.teacher = None
        if mode == "paper" and mu > 0:
            # θ̃_1 = θ_0 as a deep copy: its own tensors (copying `.data` references would alias the
            # live weights). Not a submodule of `model`, so it is in neither model.state_dict() nor
            # the optimizer, and model.train() does not switch it out of eval mode.
            self.teacher = copy.deepcopy(model).eval().requires_grad_(False)
            for p in self.teacher.parameters():
                p.grad = None                                      # deepcopy also copies .grad

    # ------------------------------------------------------------------ R_s: the adversarial term

    def perturb(self, task, batch, x, target, delta=None) -> torch.Tensor:
        """The adversarial δ (B, T, C) for embedding output x (B, T, C), detached.
        `target` is the clean output; `delta` overrides the random start (tests use it)."""
        x, target = x.detach(), target.detach()                   # the inner loop trains nothing
        # 1) random start: δ ~ N(0, σ²I)                                                (B, T, C)
        delta = torch.randn_like(x) * self.sigma if delta is None else delta.detach()
        for _ in range(self.steps):
            delta.requires_grad_(True)
            # 2) ℓ_s(f(x + δ), f(x)) with the clean output as a fixed target
            inner = divergence(task, self.model(task, batch, embeds=x + delta), target)
            # 3) g = ∂ℓ_s/∂δ only: autograd skips every weight gradient and touches no .grad
            (g,) = torch.autograd.grad(inner, delta)                                     # (B, T, C)
            if self.mode == "paper":
                # Hint: divide g by its ∞-norm PER EXAMPLE (max |g| over T and C; never divide by 0), step
                # δ + η·g̃, then project onto the ε-ball (clamp to [−ε, ε]); return δ detached.
                ### BEGIN SOLUTION smart
                # 4) g̃ = g / ‖g‖∞ per example; an all-zero g (no noise, no dropout) stays 0, not NaN
                scale = g.abs().amax(dim=(1, 2), keepdim=True)                           # (B, 1, 1)
                g = g / scale.clamp_min(torch.finfo(g.dtype).tiny)
                # 5) δ ← Π_{‖δ‖∞ ≤ ε}(δ + η·g̃): step, then project onto the ∞-ball (a clamp)
                delta = (delta + self.eta * g).clamp(-self.epsilon, self.epsilon).detach()
                ### END SOLUTION
            else:
                # 4') mt-dnn: step with the raw gradient, then rescale each token to ∞-norm ≈ 1
                delta = delta + self.eta * g
                delta = (delta / (delta.abs().amax(-1, keepdim=True) + 1e-6)).detach()   # (B, T, C) / (B, T, 1)
        return delta

    def adversarial_loss(self, task: str, batch: dict, clean_out: torch.Tensor) -> torch.Tensor:
        """R_s: ℓ_s(f(x + δ), f(x)) at the adversarial δ; differentiable in θ on both sides."""
        x = self.model.inputs(task, batch)                         # (B, T, C), keeps its graph
        delta = self.perturb(task, batch, x, clean_out)            # (B, T, C), a constant now
        adv_out = self.model(task, batch, embeds=x + delta)
        return divergence(task, adv_out, clean_out)

    # ------------------------------------------------------------------ D_Breg: the mean teacher

    def bregman_loss(self, task: str, batch: dict, clean_out: torch.Tensor) -> torch.Tensor:
        """D_Breg: ℓ_s(f(x; θ), f(x; θ̃)); gradient reaches the student only."""
        if self.teacher is None:
            return torch.zeros((), device=clean_out.device)
        with torch.no_grad():
            teacher_out = self.teacher(task, batch)                # no autograd history
        return divergence(task, clean_out, teacher_out)

    def loss(self, task: str, batch: dict, clean_out: torch.Tensor) -> torch.Tensor:
        """λ_s·R_s + μ·D_Breg for this batch (to be added to the task loss before backward)."""
        total = torch.zeros((), device=clean_out.device)
        if self.lambda_s > 0:
            total = total + self.lambda_s * self.adversarial_loss(task, batch, clean_out)
        if self.teacher is not None:
            total = total + self.mu * self.bregman_loss(task, batch, clean_out)
        return total

    @property
    def current_beta(self) -> float:
        """β of the next update: beta[0] for the first beta_switch·total_steps updates, then beta[1]
        (total_steps=0 means "unknown": beta[1] throughout)."""
        return self.beta[0] if self.updates < self.beta_switch * self.total_steps else self.beta[1]

    @torch.no_grad()
    def update_teacher(self) -> None:
        """θ̃ ← β·θ̃ + (1 − β)·θ; call after each optimizer.step()."""
        if self.teacher is not None:
            # Hint: θ̃ ← β·θ̃ + (1 − β)·θ for every teacher parameter, in place (match them by name), and
            # copy the student's buffers. β is self.current_beta.
            ### BEGIN SOLUTION smart
            beta = self.current_beta
            student = dict(self.model.named_parameters())
            for name, t in self.teacher.named_parameters():
                # lerp: θ̃ + (1 − β)(θ − θ̃) = β·θ̃ + (1 − β)·θ, in place, under no_grad
                t.lerp_(student[name], 1.0 - beta)
            student = dict(self.model.named_buffers())
            for name, t in self.teacher.named_buffers():        # e.g. R4F's power-iteration vectors
                t.copy_(student[name])
            ### END SOLUTION
        self.updates += 1

    def state_dict(self) -> dict:
        return {"teacher": None if self.teacher is None else self.teacher.state_dict(), "updates": self.updates}

    def load_state_dict(self, d: dict) -> None:
        if (self.teacher is None) != (d["teacher"] is None):
            raise ValueError("minbert.methods.smart.SMART.load_state_dict: the saved state and this SMART "
                             "disagree on having a teacher (mode/mu differ)")
        if self.teacher is not None:
            self.teacher.load_state_dict(d["teacher"])
        self.updates = int(d["updates"])


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    d = flags.defaults(SMART)
    g = parser.add_argument_group("SMART (Jiang et al. 2020, arXiv:1911.03437, Alg. 1)")
    g.add_argument("--smart", type=flags.at_least(0.0, float), default=0.0,
                   help=f"weight λ_s of the smoothness term (paper: {d['lambda_s']:g}; 0 = off)")
    g.add_argument("--smart_epsilon", type=flags.positive, default=d["epsilon"],
                   help="ε, ∞-ball radius (Song/Hu/Pan text: 1e-6; their Fig. 1: strong 1e-5)")
    g.add_argument("--smart_sigma", type=flags.positive, default=d["sigma"],
                   help="σ, std of the initial noise (Song/Hu/Pan: weak 1e-6, strong 1e-5)")
    g.add_argument("--smart_eta", type=flags.positive, default=d["eta"], help="η, ascent step size")
    g.add_argument("--smart_mu", type=flags.at_least(0.0, float), default=d["mu"],
                   help="μ, Bregman weight (Song/Hu/Pan text: weak 0.02, strong 2; Fig. 1: weak 0.2; 0 = no teacher)")
    g.add_argument("--smart_steps", type=flags.at_least(1), default=d["steps"], help="ascent steps T_x̃ (paper: 1)")
    g.add_argument("--smart_mode", choices=["paper", "reference"], default=d["mode"],
                   help="paper: projected ε-ball ascent; reference: mt-dnn's rescaled noise")


def from_args(args, model, total_steps: int):
    """SMART for `model`, or None when --smart is 0."""
    if not args.smart:
        return None
    return SMART(model, lambda_s=args.smart, epsilon=args.smart_epsilon, sigma=args.smart_sigma, eta=args.smart_eta,
                 steps=args.smart_steps, mu=args.smart_mu, total_steps=total_steps, mode=args.smart_mode)
